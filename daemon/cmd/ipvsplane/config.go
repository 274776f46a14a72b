package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dummy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The apiVersion and kind of kube-proxy's configuration file.
const (
	configAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	configKind       = "KubeProxyConfiguration"
)

// defaultConfig returns kube-proxy's defaults for the fields ipvsplane
// uses.
func defaultConfig() *kubeproxy.KubeProxyConfiguration {
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
	setString(&cfg.HealthzBindAddress, "0.0.0.0:10256")
	setString(&cfg.MetricsBindAddress, "127.0.0.1:10249")
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

// configFile is the --config file: kube-proxy's KubeProxyConfiguration,
// and a section for ipvsplane's own settings.
type configFile struct {
	kubeproxy.KubeProxyConfiguration `json:",inline"`
	IPVSPlane                        ipvsplaneConfig `json:"ipvsplane"`
}

// ipvsplaneConfig is the file's ipvsplane section: settings kube-proxy has
// no field for, each with a flag of the same name. kube-proxy refuses a
// file that has it, as it refuses any field it does not know.
type ipvsplaneConfig struct {
	// ServiceTrafficMetrics exports each service port's traffic (see
	// serviceTraffic); off by default, as it costs a dump of the virtual
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
}

// defaultOwnConfig are the ipvsplane section's defaults.
func defaultOwnConfig() ipvsplaneConfig {
	return ipvsplaneConfig{
		ServiceTrafficMetricsInterval: metav1.Duration{Duration: defaultTrafficInterval},
		DrainTimeout:                  metav1.Duration{Duration: defaultDrainTimeout},
		ServiceAddressBinding:         dummy.BindAddresses.String(),
	}
}

// loadConfig reads a KubeProxyConfiguration file over kube-proxy's
// defaults. Unknown fields are an error, as they are for kube-proxy; known
// fields that ipvsplane does not use are returned as notes, to be reported
// once.
func loadConfig(path string) (*configFile, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parseConfig(path, data)
}

// parseConfig is loadConfig on the file's content.
func parseConfig(path string, data []byte) (*configFile, []string, error) {
	cfg := &configFile{}
	if err := decodeStrict(data, cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.APIVersion != configAPIVersion || cfg.Kind != configKind {
		return nil, nil, fmt.Errorf("%s: want apiVersion %s, kind %s; got %q, %q", path, configAPIVersion, configKind, cfg.APIVersion, cfg.Kind)
	}
	applyDefaults(&cfg.KubeProxyConfiguration)
	def := defaultOwnConfig()
	if cfg.IPVSPlane.ServiceTrafficMetricsInterval.Duration == 0 {
		cfg.IPVSPlane.ServiceTrafficMetricsInterval = def.ServiceTrafficMetricsInterval
	}
	if cfg.IPVSPlane.DrainTimeout.Duration == 0 {
		cfg.IPVSPlane.DrainTimeout = def.DrainTimeout
	}
	if cfg.IPVSPlane.ServiceAddressBinding == "" {
		cfg.IPVSPlane.ServiceAddressBinding = def.ServiceAddressBinding
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, ignoredFields(raw), nil
}

// decodeStrict decodes YAML or JSON into v as kube-proxy decodes its
// configuration file: field names match exactly (encoding/json would take
// "MODE" for "mode"), and an unknown or repeated field is an error.
func decodeStrict(data []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
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
