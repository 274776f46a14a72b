package randomcluster

import (
	"bytes"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kpconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// YAML writes the cluster as a multi-document YAML file, to reproduce a
// case: the KubeProxyConfiguration, the Node, then each Service named (all
// if names is empty) with its status and its EndpointSlices. The objects
// carry no TypeMeta (the API server's clients do not need one), so each
// document gets its apiVersion and kind here.
func (c *Cluster) YAML(names ...string) ([]byte, error) {
	var b bytes.Buffer
	write := func(apiVersion, kind string, obj any) error {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("randomcluster: %s as YAML: %w", kind, err)
		}
		fmt.Fprintf(&b, "---\napiVersion: %s\nkind: %s\n%s", apiVersion, kind, data)
		return nil
	}
	fmt.Fprintf(&b, "# randomcluster seed %d\n", c.Seed)
	cfg, err := c.ConfigYAML(nil)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "---\n%s", cfg)
	if err := write("v1", "Node", c.Node); err != nil {
		return nil, err
	}
	// Whole, whichever Services are named: a leftover of a Service left
	// out resolves to nothing.
	if c.Neighbours != nil {
		if err := write(NeighboursAPIVersion, "Neighbours", c.Neighbours); err != nil {
			return nil, err
		}
	}
	for _, s := range c.Services {
		if len(names) > 0 && !slices.Contains(names, s.Service.Name) {
			continue
		}
		if err := write("v1", "Service", s.Service); err != nil {
			return nil, err
		}
		for _, sl := range s.Slices {
			if err := write("discovery.k8s.io/v1", "EndpointSlice", sl); err != nil {
				return nil, err
			}
		}
	}
	return b.Bytes(), nil
}

// ConfigYAML returns the KubeProxyConfiguration as a file kube-proxy and
// ipvsplane read: the fields the generator set (zero values left out, so
// both programs apply their own defaults to the rest), with own merged
// over them: a YAML object of the settings that belong to the test
// (kubeconfig, hostnameOverride, bind addresses, sync periods, ...).
func (c *Cluster) ConfigYAML(own []byte) ([]byte, error) {
	data, err := yaml.Marshal(c.Config)
	if err != nil {
		return nil, fmt.Errorf("randomcluster: KubeProxyConfiguration as YAML: %w", err)
	}
	var generated, ours map[string]any
	if err := yaml.Unmarshal(data, &generated); err != nil {
		return nil, fmt.Errorf("randomcluster: KubeProxyConfiguration: %w", err)
	}
	if err := yaml.Unmarshal(own, &ours); err != nil {
		return nil, fmt.Errorf("randomcluster: the test's KubeProxyConfiguration settings: %w", err)
	}
	base := map[string]any{}
	if c.Neighbours != nil && c.Neighbours.InstallerConfig {
		if err := yaml.Unmarshal([]byte(kubeadmConfig), &base); err != nil {
			return nil, fmt.Errorf("randomcluster: the installer's KubeProxyConfiguration: %w", err)
		}
	}
	merged := merge(merge(base, prune(generated).(map[string]any)), ours)
	merged["apiVersion"], merged["kind"] = "kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration"
	return yaml.Marshal(merged)
}

// NeighboursAPIVersion is the apiVersion of the reproduction's Neighbours
// document.
const NeighboursAPIVersion = "randomcluster.ipvsplane.io/v1"

// kubeadmConfig is the kube-proxy configuration file as kubeadm writes it
// (its ConfigMap's config.conf: every field, zero values too), as an
// older kubeadm wrote it: with resourceContainer, udpIdleTimeout and
// conntrack.max, since removed, which kube-proxy reads with a warning.
// The generated settings and the test's own go over it.
const kubeadmConfig = `bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: ""
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 5
configSyncPeriod: 15m0s
conntrack:
  max: null
  maxPerCore: 32768
  min: 131072
  tcpCloseWaitTimeout: 1h0m0s
  tcpEstablishedTimeout: 24h0m0s
enableProfiling: false
featureGates: {}
healthzBindAddress: 0.0.0.0:10256
hostnameOverride: ""
iptables:
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 0s
  syncPeriod: 30s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  syncPeriod: 30s
metricsBindAddress: 127.0.0.1:10249
mode: ""
nodePortAddresses: null
oomScoreAdj: -999
portRange: ""
resourceContainer: /kube-proxy
udpIdleTimeout: 250ms
`

// prune drops zero values (nil, "", "0", "0s", false, 0, empty lists and
// objects) from a decoded YAML value; it returns nil if nothing is left.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, child := range x {
			if p := prune(child); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		return x
	case string:
		if x == "" || x == "0s" || x == "0" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	case nil:
		return nil
	}
	return v
}

// merge sets over's values into base, objects recursively.
func merge(base, over map[string]any) map[string]any {
	for k, v := range over {
		if bm, ok := base[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				base[k] = merge(bm, om)
				continue
			}
		}
		base[k] = v
	}
	return base
}

// ParseYAML reads a case that YAML wrote back, to run it again: the
// cluster of env with the KubeProxyConfiguration, the Node, and the
// Services with their EndpointSlices (each slice belongs to the Service
// before it).
func ParseYAML(data []byte, env Env) (*Cluster, error) {
	c := &Cluster{Env: env}
	if _, err := fmt.Sscanf(string(data), "# randomcluster seed %d", &c.Seed); err != nil {
		return nil, fmt.Errorf("randomcluster: the case has no seed line: %w", err)
	}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("randomcluster: document %d: %w", i, err)
		}
		var err error
		switch head.Kind {
		case "":
			continue
		case "KubeProxyConfiguration":
			c.Config = &kpconfig.KubeProxyConfiguration{}
			err = yaml.Unmarshal(doc, c.Config)
		case "Node":
			c.Node = &corev1.Node{}
			err = yaml.Unmarshal(doc, c.Node)
		case "Neighbours":
			c.Neighbours = &Neighbours{}
			err = yaml.UnmarshalStrict(doc, &struct {
				APIVersion, Kind string
				*Neighbours      `json:",inline"`
			}{Neighbours: c.Neighbours})
		case "Service":
			s := &Service{Service: &corev1.Service{}}
			err = yaml.Unmarshal(doc, s.Service)
			c.Services = append(c.Services, s)
		case "EndpointSlice":
			if len(c.Services) == 0 {
				return nil, fmt.Errorf("randomcluster: document %d: an EndpointSlice before any Service", i)
			}
			sl := &discoveryv1.EndpointSlice{}
			err = yaml.Unmarshal(doc, sl)
			last := c.Services[len(c.Services)-1]
			last.Slices = append(last.Slices, sl)
		default:
			return nil, fmt.Errorf("randomcluster: document %d: unknown kind %q", i, head.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("randomcluster: document %d (%s): %w", i, head.Kind, err)
		}
	}
	if c.Config == nil || c.Node == nil {
		return nil, fmt.Errorf("randomcluster: the case lacks its KubeProxyConfiguration or Node")
	}
	// As generated: without TypeMeta.
	c.Config.TypeMeta, c.Node.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	for _, s := range c.Services {
		s.Service.TypeMeta = metav1.TypeMeta{}
		for _, sl := range s.Slices {
			sl.TypeMeta = metav1.TypeMeta{}
		}
	}
	return c, nil
}
