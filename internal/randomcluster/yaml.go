package randomcluster

import (
	"bytes"
	"fmt"
	"slices"

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
	merged := merge(prune(generated).(map[string]any), ours)
	merged["apiVersion"], merged["kind"] = "kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration"
	return yaml.Marshal(merged)
}

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
