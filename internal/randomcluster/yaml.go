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
	if err := write("kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration", c.Config); err != nil {
		return nil, err
	}
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
