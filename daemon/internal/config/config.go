// Package config reads kube-proxy's configuration file (a
// KubeProxyConfiguration, with a section of ipvsplane's own) as kube-proxy
// does: its defaults, strict then lenient decoding, its validation, and
// the fields set that ipvsplane does not act on; and resolves it, with
// the host name and the node's addresses, into the daemon's Settings.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dummy"
	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The apiVersion and kind of kube-proxy's configuration file.
const (
	configAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	configKind       = "KubeProxyConfiguration"
)

// Default returns kube-proxy's defaults for the fields ipvsplane uses.
func Default() *kubeproxy.KubeProxyConfiguration {
	cfg := &kubeproxy.KubeProxyConfiguration{}
	applyDefaults(cfg)
	return cfg
}

// applyDefaults fills in the fields left empty, as kube-proxy does after
// reading its file: a file that spells out an empty value gets the default.
func applyDefaults(cfg *kubeproxy.KubeProxyConfiguration) {
	setString := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	setDuration := func(p *metav1.Duration, v time.Duration) {
		if p.Duration == 0 {
			p.Duration = v
		}
	}
	setString(&cfg.APIVersion, configAPIVersion)
	setString(&cfg.Kind, configKind)
	setString((*string)(&cfg.Mode), "ipvs")
	setString(&cfg.BindAddress, "0.0.0.0")
	healthzHost, metricsHost := defaultHosts(cfg.BindAddress)
	setString(&cfg.HealthzBindAddress, net.JoinHostPort(healthzHost, strconv.Itoa(HealthzPort)))
	setString(&cfg.MetricsBindAddress, net.JoinHostPort(metricsHost, strconv.Itoa(MetricsPort)))
	cfg.HealthzBindAddress = AppendPortIfNeeded(cfg.HealthzBindAddress, HealthzPort)
	cfg.MetricsBindAddress = AppendPortIfNeeded(cfg.MetricsBindAddress, MetricsPort)
	setString((*string)(&cfg.DetectLocalMode), "ClusterCIDR")
	setString(&cfg.ClientConnection.ContentType, "application/vnd.kubernetes.protobuf")
	if cfg.ClientConnection.QPS == 0 {
		cfg.ClientConnection.QPS = 5
	}
	if cfg.ClientConnection.Burst == 0 {
		cfg.ClientConnection.Burst = 10
	}
	if cfg.IPTables.MasqueradeBit == nil {
		bit := int32(14)
		cfg.IPTables.MasqueradeBit = &bit
	}
	// Fields of other modes and of kube-proxy's process that ipvsplane
	// does not use, defaulted all the same: /configz shows what
	// kube-proxy's shows for the same file.
	if cfg.IPTables.LocalhostNodePorts == nil {
		cfg.IPTables.LocalhostNodePorts = new(true)
	}
	if cfg.NFTables.MasqueradeBit == nil {
		cfg.NFTables.MasqueradeBit = new(int32(14))
	}
	if cfg.OOMScoreAdj == nil {
		cfg.OOMScoreAdj = new(int32(-999))
	}
	setString(&cfg.Logging.Format, "text")
	if cfg.Logging.FlushFrequency.Duration.Duration == 0 {
		cfg.Logging.FlushFrequency.Duration.Duration = 5 * time.Second
		cfg.Logging.FlushFrequency.SerializeAsString = true
	}
	c := &cfg.Conntrack
	if c.MaxPerCore == nil {
		c.MaxPerCore = new(int32(32 * 1024))
	}
	if c.Min == nil {
		c.Min = new(int32(128 * 1024))
	}
	if c.TCPEstablishedTimeout == nil {
		c.TCPEstablishedTimeout = &metav1.Duration{Duration: 24 * time.Hour}
	}
	if c.TCPCloseWaitTimeout == nil {
		c.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Hour}
	}
	setDuration(&cfg.ConfigSyncPeriod, 15*time.Minute)
	setDuration(&cfg.IPVS.SyncPeriod, 30*time.Second)
	// kube-proxy gives IPVS mode no minimum (its iptables and nftables
	// modes get 1 s): every change is programmed at once, which
	// incremental syncs make cheap.
}

// defaultHosts returns the hosts of the default /healthz and /metrics
// addresses for bindAddress, as kube-proxy's defaulting does: IPv4's
// unless bindAddress is not an IPv4 address (kubeadm writes "::" on IPv6
// clusters), then IPv6's.
func defaultHosts(bindAddress string) (healthz, metrics string) {
	if netutils.ParseIPSloppy(bindAddress).To4() != nil {
		return "0.0.0.0", "127.0.0.1"
	}
	return "::", "::1"
}

// kube-proxy's ports of /healthz and /metrics.
const (
	HealthzPort = 10256
	MetricsPort = 10249
)

// AppendPortIfNeeded completes a bind address that is a bare IP with
// port, as kube-proxy's defaulting and its deprecated port flags do; any
// other value is left for validation to judge.
func AppendPortIfNeeded(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if netutils.ParseIPSloppy(addr) == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// File is the --config file: kube-proxy's KubeProxyConfiguration, and a
// section for ipvsplane's own settings.
type File struct {
	kubeproxy.KubeProxyConfiguration `json:",inline"`
	IPVSPlane                        Own `json:"ipvsplane"`
}

// Own is the file's ipvsplane section: settings kube-proxy has
// no field for, each with a flag of the same name. kube-proxy refuses a
// file that has it, as it refuses any field it does not know.
type Own struct {
	// ServiceTrafficMetrics exports each service port's traffic (see
	// traffic.Collector); off by default, as it costs a dump of the virtual
	// servers every ServiceTrafficMetricsInterval.
	ServiceTrafficMetrics         bool            `json:"serviceTrafficMetrics,omitempty"`
	ServiceTrafficMetricsInterval metav1.Duration `json:"serviceTrafficMetricsInterval,omitempty"`
	// DrainTimeout bounds how long a real server whose endpoint left
	// drains (dataplane.Config.DrainTimeout); a Service's
	// ipvsplane.io/drain-timeout annotation overrides it.
	DrainTimeout metav1.Duration `json:"drainTimeout,omitempty"`
	// ServiceAddressBinding is how service addresses are bound to
	// kube-ipvs0: "address" (kube-proxy's way) or "local-route"
	// (dataplane.Config.Binding).
	ServiceAddressBinding string `json:"serviceAddressBinding,omitempty"`
	// ExternalIPRanges are the CIDRs external IPs are served from
	// (model.Node.ExternalIPRanges); empty serves every one, as
	// kube-proxy does.
	ExternalIPRanges []string `json:"externalIPRanges,omitempty"`
	// ProtectedPorts are the ports, as "10250/tcp", of the node's own
	// addresses that external IPs and load-balancer addresses do not
	// take (model.Node.ProtectedPorts), besides the daemon's own
	// /healthz and /metrics ports. The kubelet's port by default; an
	// empty list (not omitted: it is the default then) protects the
	// daemon's alone.
	ProtectedPorts []string `json:"protectedPorts"`
	// AllowedSchedulers are the IPVS schedulers a Service may name
	// (model.Node.AllowedSchedulers); empty allows any.
	AllowedSchedulers []string `json:"allowedSchedulers,omitempty"`
}

// KubeletPort is the kubelet's API port, protected by default.
const KubeletPort = 10250

// DefaultOwn returns the ipvsplane section's defaults.
func DefaultOwn() Own {
	return Own{
		ServiceTrafficMetricsInterval: metav1.Duration{Duration: traffic.DefaultInterval},
		DrainTimeout:                  metav1.Duration{Duration: dataplane.DefaultDrainTimeout},
		ServiceAddressBinding:         dummy.BindAddresses.String(),
		ProtectedPorts:                []string{strconv.Itoa(KubeletPort) + "/tcp"},
	}
}

// Equal reports whether two sections hold the same settings; a list
// given empty and one left out are the same.
func (o Own) Equal(p Own) bool {
	return o.ServiceTrafficMetrics == p.ServiceTrafficMetrics &&
		o.ServiceTrafficMetricsInterval == p.ServiceTrafficMetricsInterval &&
		o.DrainTimeout == p.DrainTimeout && o.ServiceAddressBinding == p.ServiceAddressBinding &&
		slices.Equal(o.ExternalIPRanges, p.ExternalIPRanges) &&
		slices.Equal(o.ProtectedPorts, p.ProtectedPorts) &&
		slices.Equal(o.AllowedSchedulers, p.AllowedSchedulers)
}

// Notes are what loading a configuration file has to report once.
type Notes struct {
	// Ignored lists the fields set that ipvsplane does not act on.
	Ignored []string
	// Lenient is strict decoding's error when the file was read
	// leniently instead, as kube-proxy reads it: unknown, removed or
	// repeated fields (udpIdleTimeout, resourceContainer, ...) that older
	// installers wrote.
	Lenient error
	// Info lists what the file says that ipvsplane reads otherwise than
	// kube-proxy, worth a line at info level.
	Info []string
}

// Load reads a KubeProxyConfiguration file over kube-proxy's defaults.
func Load(path string) (*File, Notes, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Notes{}, err
	}
	return parse(path, data)
}

// parse is Load on the file's content.
func parse(path string, data []byte) (*File, Notes, error) {
	var notes Notes
	cfg := &File{}
	lenient, err := decodeConfig(data, cfg)
	if err != nil {
		return nil, notes, fmt.Errorf("%s: %w", path, err)
	}
	notes.Lenient = lenient
	if cfg.APIVersion != configAPIVersion || cfg.Kind != configKind {
		return nil, notes, fmt.Errorf("%s: want apiVersion %s, kind %s; got %q, %q", path, configAPIVersion, configKind, cfg.APIVersion, cfg.Kind)
	}
	if cfg.Mode == "" {
		// kubeadm writes mode: "", which kube-proxy takes as iptables.
		notes.Info = append(notes.Info, `mode is empty (kube-proxy's iptables mode); ipvsplane does not read mode and always programs IPVS`)
	}
	applyDefaults(&cfg.KubeProxyConfiguration)
	def := DefaultOwn()
	if cfg.IPVSPlane.ServiceTrafficMetricsInterval.Duration == 0 {
		cfg.IPVSPlane.ServiceTrafficMetricsInterval = def.ServiceTrafficMetricsInterval
	}
	if cfg.IPVSPlane.DrainTimeout.Duration == 0 {
		cfg.IPVSPlane.DrainTimeout = def.DrainTimeout
	}
	if cfg.IPVSPlane.ServiceAddressBinding == "" {
		cfg.IPVSPlane.ServiceAddressBinding = def.ServiceAddressBinding
	}
	if cfg.IPVSPlane.ProtectedPorts == nil {
		// Left out or null; an empty list protects none.
		cfg.IPVSPlane.ProtectedPorts = def.ProtectedPorts
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, notes, fmt.Errorf("%s: %w", path, err)
	}
	notes.Ignored = ignoredFields(raw)
	return cfg, notes, nil
}

// decodeConfig decodes YAML or JSON into cfg as kube-proxy's loadConfig
// does: strictly first (field names match exactly, as encoding/json would
// take "MODE" for "mode"; an unknown or repeated field is an error), and
// when only strictness failed, leniently, returning strict decoding's
// error to be logged. Syntax and type errors fail either way. ipvsplane's
// own section stays strict: kube-proxy's leniency is for files older
// installers wrote, which have no such section.
func decodeConfig(data []byte, cfg *File) (lenient, err error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var strict []error
	// Strict YAML refuses only a repeated key beyond lenient YAML.
	if _, err := yaml.YAMLToJSONStrict(data); err != nil {
		strict = append(strict, err)
	}
	fields, err := kjson.UnmarshalStrict(j, cfg)
	if err != nil {
		return nil, locateDecodeError(data, err)
	}
	strict = append(strict, fields...)
	if len(strict) == 0 {
		return nil, nil
	}
	if err := checkOwnSection(data, fields); err != nil {
		return nil, err
	}
	*cfg = File{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, cfg); err != nil {
		return nil, locateDecodeError(data, err)
	}
	return errors.Join(strict...), nil
}

// checkOwnSection refuses an unknown or repeated field of the ipvsplane
// section, given the strict JSON decoding's field errors.
func checkOwnSection(data []byte, fields []error) error {
	for _, f := range fields {
		if strings.Contains(f.Error(), `"ipvsplane.`) {
			return f
		}
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		// Lenient YAML read it; strict YAML's error stands as the
		// warning.
		return nil
	}
	top := doc.Content[0]
	seen := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "ipvsplane" {
			continue
		}
		if seen {
			return fmt.Errorf("line %d: field ipvsplane already set", top.Content[i].Line)
		}
		seen = true
		// yaml.v3 refuses a repeated key in a mapping it decodes.
		var section map[string]any
		if err := top.Content[i+1].Decode(&section); err != nil {
			return fmt.Errorf("ipvsplane: %w", err)
		}
	}
	return nil
}

// usedFields are the configuration fields ipvsplane acts on; a field under
// a prefix listed here is used. Everything else that a file sets to a
// value other than its zero value is reported as ignored.
var usedFields = []string{
	"apiVersion", "kind",
	"clientConnection.kubeconfig", "clientConnection.qps", "clientConnection.burst",
	"clientConnection.contentType", "clientConnection.acceptContentTypes",
	"hostnameOverride", "healthzBindAddress", "metricsBindAddress", "enableProfiling",
	"mode", "clusterCIDR", "nodePortAddresses", "configSyncPeriod",
	"detectLocalMode", "detectLocal.",
	"iptables.masqueradeAll", "iptables.masqueradeBit",
	"ipvs.", "conntrack.",
	"logging.format", "logging.verbosity",
	"ipvsplane.",
}

// ignoredFields lists the fields set in a configuration file that
// ipvsplane does not act on, with their values, in a stable order.
func ignoredFields(raw map[string]any) []string {
	var notes []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, child := range m {
				walk(prefix+k+".", child)
			}
			return
		}
		field := strings.TrimSuffix(prefix, ".")
		if isZero(v) || slices.ContainsFunc(usedFields, func(u string) bool {
			return field == u || (strings.HasSuffix(u, ".") && strings.HasPrefix(field, u))
		}) {
			return
		}
		value, _ := json.Marshal(v)
		notes = append(notes, fmt.Sprintf("%s: %s", field, value))
	}
	walk("", raw)
	slices.Sort(notes)
	return notes
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == "" || x == "0s" || x == "0"
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	}
	return false
}
