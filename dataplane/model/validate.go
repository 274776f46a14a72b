package model

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// ErrInvalid is matched (errors.Is) by every [FieldError].
var ErrInvalid = errors.New("model: invalid")

// FieldError says which field of which object is wrong. The object is
// skipped; the others are still programmed.
type FieldError struct {
	// Object names what is wrong: "service namespace/name:port" or
	// "node NAME".
	Object string
	// Service names the service port, for a service port's error (zero
	// otherwise), so that the error can be reported on its Service.
	Service ServicePortName
	// Field is the model's field, with indexes: "endpoints[2].addr".
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: field %s: %s", e.Object, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// schedulers are the IPVS schedulers the kernel has; a service port
// naming another gets the node's (SchedulerError).
var schedulers = map[string]bool{
	"rr": true, "wrr": true, "lc": true, "wlc": true, "lblc": true, "lblcr": true,
	"dh": true, "sh": true, "sed": true, "nq": true, "mh": true, "fo": true,
	"ovf": true, "twos": true,
}

// MaxSchedulerName is the longest IPVS scheduler name the kernel takes,
// in bytes (IP_VS_SCHEDNAME_MAXLEN, 16 with the terminating NUL).
const MaxSchedulerName = 15

// KnownScheduler reports whether name is one of the kernel's IPVS
// schedulers.
func KnownScheduler(name string) bool { return schedulers[name] }

// maxAffinity is the longest ClientIP affinity Kubernetes allows.
const maxAffinity = 86400 * time.Second

// Validate checks the service port and returns the first problem found.
func (s *ServicePort) Validate() error {
	fail := func(field, format string, args ...any) error {
		return &FieldError{Object: "service " + s.Name.String(), Service: s.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Name.Namespace == "" || s.Name.Name == "":
		return fail("name", "namespace and name must be set")
	case !ServiceProtocol(s.Protocol):
		return fail("protocol", "unknown protocol %d (want TCP, UDP or SCTP)", uint8(s.Protocol))
	case s.Port == 0:
		return fail("port", "must be 1-65535")
	case len(s.ClusterIPs) == 0:
		return fail("clusterIPs", "a service port needs a cluster IP")
	case s.SessionAffinity < 0 || s.SessionAffinity > maxAffinity || s.SessionAffinity%time.Second != 0:
		return fail("sessionAffinity", "timeout %v must be whole seconds from 1s to %v", s.SessionAffinity, maxAffinity)
	}
	families := map[bool]bool{}
	for i, ip := range s.ClusterIPs {
		if err := checkServiceAddr(ip); err != nil {
			return fail(fmt.Sprintf("clusterIPs[%d]", i), "%v", err)
		}
		if families[ip.Is4()] {
			return fail(fmt.Sprintf("clusterIPs[%d]", i), "%s: a second cluster IP of the same family", ip)
		}
		families[ip.Is4()] = true
	}
	for i, ip := range s.ExternalIPs {
		if err := checkServiceAddr(ip); err != nil {
			return fail(fmt.Sprintf("externalIPs[%d]", i), "%v", err)
		}
	}
	for i, ip := range s.LoadBalancerIPs {
		if err := checkServiceAddr(ip); err != nil {
			return fail(fmt.Sprintf("loadBalancerIPs[%d]", i), "%v", err)
		}
	}
	for i, p := range s.LoadBalancerSourceRanges {
		if !p.IsValid() {
			return fail(fmt.Sprintf("loadBalancerSourceRanges[%d]", i), "not a valid CIDR")
		}
	}
	for i, ep := range s.Endpoints {
		switch {
		case !ep.Addr.IsValid() || ep.Addr.IsUnspecified() || ep.Addr.IsMulticast():
			return fail(fmt.Sprintf("endpoints[%d].addr", i), "%v is not a unicast address", ep.Addr)
		case !families[ep.Addr.Unmap().Is4()]:
			return fail(fmt.Sprintf("endpoints[%d].addr", i), "%s has no cluster IP of its family", ep.Addr)
		case ep.Port == 0:
			return fail(fmt.Sprintf("endpoints[%d].port", i), "must be 1-65535")
		}
	}
	return nil
}

func checkServiceAddr(ip netip.Addr) error {
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
		return fmt.Errorf("%v is not a usable unicast address", ip)
	}
	if ip.Is4In6() {
		return fmt.Errorf("%s: write IPv4 addresses in their 4-byte form", ip)
	}
	return nil
}

// Validate checks the node's settings.
func (n *Node) Validate() error {
	fail := func(field, format string, args ...any) error {
		return &FieldError{Object: "node " + n.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case n.Scheduler != "" && !KnownScheduler(n.Scheduler):
		return fail("scheduler", "unknown IPVS scheduler %q", n.Scheduler)
	case n.MasqueradeMark&(n.MasqueradeMark-1) != 0:
		return fail("masqueradeMark", "%#x is not a single bit", n.MasqueradeMark)
	case n.TCPTimeout < 0 || n.TCPFinTimeout < 0 || n.UDPTimeout < 0:
		return fail("timeouts", "must not be negative")
	}
	for i, a := range n.Addresses {
		if !a.IsValid() {
			return fail(fmt.Sprintf("addresses[%d]", i), "not a valid address")
		}
	}
	for i, a := range n.NodeIPs {
		if !a.IsValid() {
			return fail(fmt.Sprintf("nodeIPs[%d]", i), "not a valid address")
		}
	}
	for _, f := range []struct {
		name     string
		prefixes []netip.Prefix
	}{{"nodePortAddresses", n.NodePortAddresses}, {"clusterCIDRs", n.ClusterCIDRs}, {"excludeCIDRs", n.ExcludeCIDRs}, {"externalIPRanges", n.ExternalIPRanges}} {
		for i, p := range f.prefixes {
			if !p.IsValid() {
				return fail(fmt.Sprintf("%s[%d]", f.name, i), "not a valid CIDR")
			}
		}
	}
	for i, p := range n.ProtectedPorts {
		if !ServiceProtocol(p.Protocol) || p.Port == 0 {
			return fail(fmt.Sprintf("protectedPorts[%d]", i), "want a port 1-65535 of TCP, UDP or SCTP, got %s", p)
		}
	}
	for i, name := range n.AllowedSchedulers {
		if !KnownScheduler(name) {
			return fail(fmt.Sprintf("allowedSchedulers[%d]", i), "unknown IPVS scheduler %q", name)
		}
	}
	return nil
}
