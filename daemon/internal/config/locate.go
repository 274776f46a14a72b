package config

import (
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// locateDecodeError names the field, and its line, whose value failed
// to decode with err (a wrong type, a duration that does not parse):
// the JSON decoder names neither the line nor, for a value's own
// unmarshaler, the field. It decodes each field of the file alone, going
// down into the first one that fails. err is returned as it is when no
// single field fails alone.
func locateDecodeError(data []byte, err error) error {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return err
	}
	path, key := failingField(doc.Content[0], nil)
	if key == nil {
		return err
	}
	return fmt.Errorf("line %d: field %s: %w", key.Line, strings.Join(path, "."), err)
}

// failingField returns the path and key of the deepest field of mapping
// m (at path) that fails to decode alone, or nil.
func failingField(m *yamlv3.Node, path []string) ([]string, *yamlv3.Node) {
	if m.Kind != yamlv3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		p := append(path[:len(path):len(path)], key.Value)
		if decodesAlone(p, value) {
			continue
		}
		if deeper, k := failingField(value, p); k != nil {
			return deeper, k
		}
		return p, key
	}
	return nil, nil
}

// decodesAlone reports whether a file holding only value at path
// decodes. A value that cannot stand alone (an alias of an anchor
// elsewhere) is taken to decode: it cannot be blamed.
func decodesAlone(path []string, value *yamlv3.Node) bool {
	n := value
	for i := len(path) - 1; i >= 0; i-- {
		key := &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: path[i]}
		n = &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map", Content: []*yamlv3.Node{key, n}}
	}
	data, err := yamlv3.Marshal(n)
	if err != nil {
		return true
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return true
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(j, &File{}) == nil
}
