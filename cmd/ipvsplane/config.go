package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbase "k8s.io/component-base/config/v1alpha1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The apiVersion and kind of kube-proxy's configuration file.
const (
	configAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	configKind       = "KubeProxyConfiguration"
)

// defaultConfig returns kube-proxy's defaults for the fields ipvsplane
// uses, as kube-proxy fills them in for IPVS mode.
func defaultConfig() *kubeproxy.KubeProxyConfiguration {
	bit := int32(14)
	return &kubeproxy.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: configAPIVersion, Kind: configKind},
		Mode:               "ipvs",
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		ConfigSyncPeriod:   metav1.Duration{Duration: 15 * time.Minute},
		DetectLocalMode:    "ClusterCIDR",
		ClientConnection: componentbase.ClientConnectionConfiguration{
			ContentType: "application/vnd.kubernetes.protobuf",
			QPS:         5,
			Burst:       10,
		},
		IPTables:           kubeproxy.KubeProxyIPTablesConfiguration{MasqueradeBit: &bit},
		IPVS: kubeproxy.KubeProxyIPVSConfiguration{
			SyncPeriod:    metav1.Duration{Duration: 30 * time.Second},
			MinSyncPeriod: metav1.Duration{Duration: time.Second},
		},
	}
}

// loadConfig reads a KubeProxyConfiguration file over kube-proxy's
// defaults. Unknown fields are an error, as they are for kube-proxy; known
// fields that ipvsplane does not use are returned as notes, to be reported
// once.
func loadConfig(path string) (*kubeproxy.KubeProxyConfiguration, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg := defaultConfig()
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.APIVersion != configAPIVersion || cfg.Kind != configKind {
		return nil, nil, fmt.Errorf("%s: want apiVersion %s, kind %s; got %q, %q", path, configAPIVersion, configKind, cfg.APIVersion, cfg.Kind)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, ignoredFields(raw), nil
}

// usedFields are the configuration fields ipvsplane acts on; a field under
// a prefix listed here is used. Everything else that a file sets to a
// value other than its zero value is reported as ignored.
var usedFields = []string{
	"apiVersion", "kind",
	"clientConnection.kubeconfig", "clientConnection.qps", "clientConnection.burst",
	"clientConnection.contentType", "clientConnection.acceptContentTypes",
	"hostnameOverride", "healthzBindAddress", "metricsBindAddress",
	"mode", "clusterCIDR", "nodePortAddresses", "configSyncPeriod",
	"detectLocalMode", "detectLocal.",
	"iptables.masqueradeAll", "iptables.masqueradeBit",
	"ipvs.",
	"logging.format", "logging.verbosity",
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
		return x == "" || x == "0s"
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	}
	return false
}
