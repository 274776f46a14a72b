package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/sloppy"
)

// Settings are the resolved settings of a daemon.
type Settings struct {
	Node          model.Node
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	HealthzAddr   string
	MetricsAddr   string
	// PodCIDRsFromNode: pods are told apart by the Node object's
	// spec.podCIDRs (detectLocalMode NodeCIDR).
	PodCIDRsFromNode bool
	// Notes are settings that were given but do not apply, reported once.
	Notes []string
}

// Resolve turns kube-proxy's configuration into the node's settings.
// addrs lists the node's own addresses (those that can serve node ports);
// a Node object read later adds the node's primary IPs.
func Resolve(kp *kubeproxy.KubeProxyConfiguration, hostname string, addrs []netip.Addr) (*Settings, error) {
	s := &Settings{
		MinSyncPeriod: kp.IPVS.MinSyncPeriod.Duration,
		SyncPeriod:    kp.IPVS.SyncPeriod.Duration,
		HealthzAddr:   kp.HealthzBindAddress,
		MetricsAddr:   kp.MetricsBindAddress,
	}
	n := &s.Node
	if err := resolveNode(n, kp, hostname, addrs); err != nil {
		return nil, err
	}
	if err := s.resolveLocalDetection(kp); err != nil {
		return nil, err
	}
	if err := resolveNodePorts(n, kp.NodePortAddresses); err != nil {
		return nil, err
	}
	if kp.Mode != "" && kp.Mode != "ipvs" {
		s.Notes = append(s.Notes, fmt.Sprintf("mode: %q is ignored; ipvsplane always programs IPVS", kp.Mode))
	}
	if err := validateNode(n); err != nil {
		return nil, err
	}
	return s, nil
}

// ResolveOwn adds the ipvsplane section's guards to the node's settings:
// the external-IP ranges, the protected ports with the daemon's own
// (those of HealthzAddr and MetricsAddr), and the allowed schedulers.
func (s *Settings) ResolveOwn(own Own) error {
	n := &s.Node
	var err error
	if n.ExternalIPRanges, err = prefixes("ipvsplane.externalIPRanges (--external-ip-ranges)", own.ExternalIPRanges); err != nil {
		return err
	}
	if n.ProtectedPorts, err = protectedPorts(own.ProtectedPorts, s.HealthzAddr, s.MetricsAddr); err != nil {
		return err
	}
	n.AllowedSchedulers = nil
	for _, name := range own.AllowedSchedulers {
		name = strings.TrimSpace(name)
		if !model.KnownScheduler(name) {
			return fmt.Errorf("ipvsplane.allowedSchedulers (--allowed-schedulers): %q: %w", name, model.ErrUnknownScheduler)
		}
		n.AllowedSchedulers = append(n.AllowedSchedulers, name)
	}
	return nil
}

// protectedPorts reads the ports given as "10250/tcp" (a bare port is
// TCP's) and adds the TCP ports of the daemon's servers' bind addresses,
// each once.
func protectedPorts(given []string, serverAddrs ...string) ([]model.ProtectedPort, error) {
	var out []model.ProtectedPort
	add := func(p model.ProtectedPort) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, g := range given {
		p, err := parseProtectedPort(strings.TrimSpace(g))
		if err != nil {
			return nil, fmt.Errorf("ipvsplane.protectedPorts (--protected-ports): %q: %w", g, err)
		}
		add(p)
	}
	for _, a := range serverAddrs {
		// Validation has checked them; empty turns the server off.
		if _, port, err := net.SplitHostPort(a); err == nil {
			if n, err := strconv.ParseUint(port, 10, 16); err == nil && n > 0 {
				add(model.ProtectedPort{Protocol: inet.TCP, Port: uint16(n)})
			}
		}
	}
	return out, nil
}

// parseProtectedPort reads "PORT/PROTOCOL" or "PORT" (TCP).
func parseProtectedPort(s string) (model.ProtectedPort, error) {
	port, proto, found := strings.Cut(s, "/")
	p := model.ProtectedPort{Protocol: inet.TCP}
	if found {
		var err error
		if p.Protocol, err = inet.ParseProtocol(proto); err != nil || !model.ServiceProtocol(p.Protocol) {
			return p, fmt.Errorf("want tcp, udp or sctp after the port")
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return p, fmt.Errorf("want a port 1-65535, as 10250/tcp")
	}
	p.Port = uint16(n)
	return p, nil
}

// resolveNode sets the node's name, addresses, scheduler, masquerading,
// timeouts and excluded ranges.
func resolveNode(n *model.Node, kp *kubeproxy.KubeProxyConfiguration, hostname string, addrs []netip.Addr) error {
	n.Name = strings.ToLower(strings.TrimSpace(kp.HostnameOverride))
	if n.Name == "" {
		n.Name = strings.ToLower(hostname)
	}
	n.Addresses = addrs
	n.Scheduler = kp.IPVS.Scheduler
	n.StrictARP = kp.IPVS.StrictARP
	n.MasqueradeAll = kp.IPTables.MasqueradeAll
	if kp.IPTables.MasqueradeBit != nil {
		bit := *kp.IPTables.MasqueradeBit
		if bit < 0 || bit > 31 {
			return fmt.Errorf("masqueradeBit: want 0-31, got %d", bit)
		}
		n.MasqueradeMark = 1 << bit
	}
	n.TCPTimeout = kp.IPVS.TCPTimeout.Duration
	n.TCPFinTimeout = kp.IPVS.TCPFinTimeout.Duration
	n.UDPTimeout = kp.IPVS.UDPTimeout.Duration
	var err error
	n.ExcludeCIDRs, err = prefixes("ipvs.excludeCIDRs", kp.IPVS.ExcludeCIDRs)
	return err
}

// resolveLocalDetection sets how traffic from pods is told apart: by
// clusterCIDR, or as detectLocalMode asks. As kube-proxy, it reads
// clusterCIDR in ClusterCIDR mode alone.
func (s *Settings) resolveLocalDetection(kp *kubeproxy.KubeProxyConfiguration) error {
	n := &s.Node
	switch kp.DetectLocalMode {
	case "", "ClusterCIDR":
		cidrs, err := prefixes("clusterCIDR", splitList(kp.ClusterCIDR))
		if err != nil {
			return err
		}
		// kube-proxy tells pods apart by the first range of each family.
		n.ClusterCIDRs = firstPerFamily(cidrs)
	case "InterfaceNamePrefix":
		if kp.DetectLocal.InterfaceNamePrefix == "" {
			return fmt.Errorf("detectLocalMode InterfaceNamePrefix needs detectLocal.interfaceNamePrefix")
		}
		n.PodInterfacePrefix = kp.DetectLocal.InterfaceNamePrefix
	case "BridgeInterface":
		if kp.DetectLocal.BridgeInterface == "" {
			return fmt.Errorf("detectLocalMode BridgeInterface needs detectLocal.bridgeInterface")
		}
		n.PodBridge = kp.DetectLocal.BridgeInterface
	case "NodeCIDR":
		// The ranges come with the Node object, which the tracker waits
		// for, as kube-proxy does.
		s.PodCIDRsFromNode = true
	default:
		// Validate refuses it first, as kube-proxy does.
		return fmt.Errorf("detectLocalMode: %q is not supported", kp.DetectLocalMode)
	}
	return nil
}

// resolveNodePorts sets the addresses node ports are served on, from
// nodePortAddresses.
func resolveNodePorts(n *model.Node, nodePortAddresses []string) error {
	all := false
	for _, a := range nodePortAddresses {
		switch a = strings.TrimSpace(a); a {
		case "all", "":
			all = true
		case "primary":
			n.NodePortPrimary = true
		case "localhost":
			// kube-proxy's IPVS mode serves no node port on a loopback
			// address, so of "localhost" only its restriction remains.
			n.NodePortAddresses = append(n.NodePortAddresses, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
		default:
			p, ok := sloppy.ParsePrefix(a)
			if !ok {
				return fmt.Errorf("nodePortAddresses: %q is not a CIDR", a)
			}
			n.NodePortAddresses = append(n.NodePortAddresses, p)
		}
	}
	if all {
		// Every node address: the same as none listed.
		n.NodePortAddresses, n.NodePortPrimary = nil, false
	}
	return nil
}

// validateNode refuses now what the dataplane would refuse at every
// sync, as kube-proxy refuses an unknown scheduler or a negative timeout
// at start-up.
func validateNode(n *model.Node) error {
	err := n.Validate()
	if err == nil {
		return nil
	}
	// Name the configuration's field, keeping the error a *FieldError
	// that errors.Is(err, model.ErrInvalid) matches.
	var fe *model.FieldError
	if errors.As(err, &fe) && (fe.Field == "scheduler" || fe.Field == "timeouts") {
		return &model.FieldError{Object: "configuration", Field: "ipvs." + fe.Field, Reason: fe.Reason}
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func prefixes(field string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, ok := sloppy.ParsePrefix(strings.TrimSpace(s))
		if !ok {
			return nil, fmt.Errorf("%s: %q is not a CIDR", field, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// firstPerFamily keeps the first prefix of each address family.
func firstPerFamily(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	seen := map[bool]bool{}
	for _, p := range ps {
		if v6 := p.Addr().Is6(); !seen[v6] {
			seen[v6] = true
			out = append(out, p)
		}
	}
	return out
}
