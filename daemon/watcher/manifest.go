package watcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Object is one object read from a manifest file.
type Object struct {
	// Line is the line its document starts on, counting from 1.
	Line int
	// Object is a *v1.Service, a *discoveryv1.EndpointSlice or a
	// *v1.Node.
	Object runtime.Object
}

// ParseManifests reads the YAML or JSON documents of a manifest file
// (separated by "---" lines) and returns the Services, EndpointSlices and
// Nodes in them, also those inside a List. Objects of other kinds are
// ignored. A namespaced object without a namespace is in "default", as
// kubectl would put it. A document that cannot be read, or that has
// fields the API does not know, is reported as an [*InvalidError] with the
// file and line and left out; the other documents are still returned.
func ParseManifests(file string, data []byte) ([]Object, []error) {
	var objs []Object
	var errs []error
	for _, doc := range splitDocuments(data) {
		o, e := decodeDocument(file, doc)
		objs = append(objs, o...)
		errs = append(errs, e...)
	}
	return objs, errs
}

// document is one YAML document and the line it starts on.
type document struct {
	line int
	data []byte
}

// splitDocuments cuts a stream at its "---" lines. A separator line is
// kept, blanked, in the document it opens, so that the YAML parser's line
// numbers stay those of the file.
func splitDocuments(data []byte) []document {
	var docs []document
	cur := document{line: 1}
	line := 0
	for len(data) > 0 {
		line++
		next, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if isSeparator(next) {
			docs = append(docs, cur)
			cur = document{line: line, data: append(bytes.Repeat([]byte(" "), 3), next[3:]...)}
			cur.data = append(cur.data, '\n')
			continue
		}
		cur.data = append(cur.data, next...)
		cur.data = append(cur.data, '\n')
	}
	return append(docs, cur)
}

func isSeparator(line []byte) bool {
	return bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r')
}

// yamlLine finds the line number in a YAML parser's error.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// header is what every object says about itself.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func decodeDocument(file string, doc document) ([]Object, []error) {
	// Report the line of the first content, not of a separator or a
	// comment above it.
	// (YAML also breaks lines at a lone CR, so a document can hold content
	// after what looks like a comment here: stay within the document.)
	last := doc.line + max(bytes.Count(doc.data, []byte("\n")), 1) - 1
	first := doc.line
	for _, l := range strings.Split(string(doc.data), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		first++
	}
	first = min(first, last)
	// JSON is YAML, but reading it as JSON skips the slow conversion.
	j, err := doc.data, error(nil)
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		j, err = yaml.YAMLToJSON(doc.data)
	}
	if err != nil {
		line := first
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			// The parser may point past the end, at the line it hoped for.
			line = min(doc.line+n-1, last)
		}
		return nil, []error{&InvalidError{File: file, Line: line, Reason: "not valid YAML: " + err.Error(), Err: err}}
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return nil, nil
	}
	objs, errs := decodeObject(j, "")
	for i := range objs {
		objs[i].Line = first
	}
	for _, e := range errs {
		if ie, ok := asInvalid(e); ok {
			ie.File, ie.Line = file, first
		}
	}
	return objs, errs
}

// decodeObject decodes one object, or the items of a list; field is the
// path of the object in its document ("items[2]") for errors.
func decodeObject(j []byte, field string) ([]Object, []error) {
	fail := func(h header, format string, args ...any) []error {
		return []error{&InvalidError{Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name, Field: field, Reason: fmt.Sprintf(format, args...)}}
	}
	var h header
	if err := json.Unmarshal(j, &h); err != nil {
		return nil, fail(h, "not a Kubernetes object: %v", err)
	}
	if h.APIVersion == "" || h.Kind == "" {
		return nil, fail(h, "not a Kubernetes object: apiVersion and kind must be set")
	}
	var obj runtime.Object
	switch {
	case h.APIVersion == "v1" && h.Kind == "Service":
		obj = &v1.Service{}
	case h.APIVersion == "discovery.k8s.io/v1" && h.Kind == "EndpointSlice":
		obj = &discoveryv1.EndpointSlice{}
	case h.APIVersion == "v1" && h.Kind == "Node":
		obj = &v1.Node{}
	case strings.HasSuffix(h.Kind, "List"):
		return decodeList(j, field, h)
	default:
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		errs := fail(h, "%v", err)
		errs[0].(*InvalidError).Err = err
		return nil, errs
	}
	if o, ok := obj.(interface {
		GetNamespace() string
		SetNamespace(string)
	}); ok && h.Kind != "Node" && o.GetNamespace() == "" {
		o.SetNamespace("default")
	}
	return []Object{{Object: obj}}, nil
}

func decodeList(j []byte, field string, h header) ([]Object, []error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &list); err != nil {
		return nil, []error{&InvalidError{Kind: h.Kind, Field: prefix(field) + "items", Reason: err.Error(), Err: err}}
	}
	var objs []Object
	var errs []error
	for i, item := range list.Items {
		o, e := decodeObject(item, fmt.Sprintf("%sitems[%d]", prefix(field), i))
		objs = append(objs, o...)
		errs = append(errs, e...)
	}
	return objs, errs
}

// prefix returns a field path ready to have a child appended.
func prefix(field string) string {
	if field == "" {
		return ""
	}
	return field + "."
}
