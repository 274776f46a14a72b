package watcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// describe names a parsed object for comparisons: "12 Service ns/name".
func describe(o Object) string {
	switch obj := o.Object.(type) {
	case *v1.Service:
		return fmt.Sprintf("%d Service %s/%s", o.Line, obj.Namespace, obj.Name)
	case *discoveryv1.EndpointSlice:
		return fmt.Sprintf("%d EndpointSlice %s/%s", o.Line, obj.Namespace, obj.Name)
	case *v1.Node:
		return fmt.Sprintf("%d Node %s", o.Line, obj.Name)
	}
	return fmt.Sprintf("%d %T", o.Line, o.Object)
}

func TestParseManifests(t *testing.T) {
	const svc = "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n"
	tests := []struct {
		name string
		data string
		want []string
		// errs are the errors' texts.
		errs []string
	}{{
		name: "several documents, comments and empty documents",
		data: "# leading comment\n---\n" + fmt.Sprintf(svc, "a") + "---\n---\n# only a comment\n--- # separator with a comment\n\n" +
			fmt.Sprintf(svc, "b"),
		want: []string{"3 Service default/a", "12 Service default/b"},
	}, {
		name: "document without a leading separator and a trailing one",
		data: fmt.Sprintf(svc, "a") + "---\n",
		want: []string{"1 Service default/a"},
	}, {
		name: "JSON",
		data: `{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s", "namespace": "ns"}, "addressType": "IPv4"}`,
		want: []string{"1 EndpointSlice ns/s"},
	}, {
		name: "List and typed list",
		data: "apiVersion: v1\nkind: List\nitems:\n- " + "apiVersion: v1\n  kind: Node\n  metadata: {name: node-1}\n" +
			"- apiVersion: v1\n  kind: ServiceList\n  items:\n  - {apiVersion: v1, kind: Service, metadata: {name: x, namespace: ns}}\n",
		want: []string{"1 Node node-1", "1 Service ns/x"},
	}, {
		name: "other kinds ignored",
		data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2}\n---\napiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\n",
	}, {
		name: "CRLF line ends",
		data: "apiVersion: v1\r\nkind: Service\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: Node\r\nmetadata: {name: node-1}\r\n",
		want: []string{"1 Service default/a", "5 Node node-1"},
	}, {
		name: "invalid YAML located in the file",
		data: fmt.Sprintf(svc, "a") + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n   namespace: x\n---\n" + fmt.Sprintf(svc, "c"),
		want: []string{"1 Service default/a", "12 Service default/c"},
		errs: []string{"m.yaml:10: not valid YAML: yaml: line 6: mapping values are not allowed in this context"},
	}, {
		name: "unknown field",
		data: "\n\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\nspec: {clusterIP: 10.96.0.1, prots: []}\n",
		errs: []string{`m.yaml:3: Service ns/a: json: unknown field "prots"`},
	}, {
		name: "wrong type",
		data: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: eighty}]}\n",
		errs: []string{`m.yaml:1: Service a: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32`},
	}, {
		name: "not an object",
		data: "- just\n- a list\n---\nname: no kind\n---\nplain scalar\n",
		errs: []string{
			"m.yaml:1: not a Kubernetes object: json: cannot unmarshal array into Go value of type watcher.header",
			"m.yaml:4: not a Kubernetes object: apiVersion and kind must be set",
			"m.yaml:6: not a Kubernetes object: json: cannot unmarshal string into Go value of type watcher.header",
		},
	}, {
		name: "bad list item",
		data: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node-1}}\n- {kind: Service}\n",
		want: []string{"1 Node node-1"},
		errs: []string{"m.yaml:1: Service: items[1]: not a Kubernetes object: apiVersion and kind must be set"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := ParseManifests("m.yaml", []byte(tt.data))
			var got []string
			for _, o := range objs {
				got = append(got, describe(o))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("objects %q, want %q", got, tt.want)
			}
			var gotErrs []string
			for _, err := range errs {
				if !errors.Is(err, model.ErrInvalid) {
					t.Errorf("error %v does not match model.ErrInvalid", err)
				}
				gotErrs = append(gotErrs, err.Error())
			}
			if !slices.Equal(gotErrs, tt.errs) {
				t.Errorf("errors:\n%q\nwant:\n%q", gotErrs, tt.errs)
			}
		})
	}
}

// The example manifests in testdata convert without errors into the
// service ports they describe.
func TestExampleManifests(t *testing.T) {
	tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}})
	files, err := filepath.Glob("testdata/manifests/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, errs := ParseManifests(f, data)
		for _, err := range errs {
			t.Error(err)
		}
		for _, o := range objs {
			if err := apply(tr, o.Object); err != nil {
				t.Errorf("%s:%d: %v", f, o.Line, err)
			}
		}
	}
	u := tr.Sync()
	var got []string
	for _, sp := range u.State.Services {
		got = append(got, fmt.Sprintf("%s %s:%d np=%d lb=%v eps=%d", sp.Name, sp.Protocol, sp.Port, sp.NodePort, sp.LoadBalancerIPs, len(sp.Endpoints)))
	}
	want := []string{
		"demo/api:https tcp:443 np=30443 lb=[198.51.100.10] eps=1",
		"demo/shop tcp:80 np=30080 lb=[] eps=2",
		"demo/web:http tcp:80 np=0 lb=[] eps=2",
		"kube-system/dns:dns udp:53 np=0 lb=[] eps=1",
		"kube-system/dns:dns-tcp tcp:53 np=0 lb=[] eps=1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("service ports:\n%q\nwant:\n%q", got, want)
	}
	if n := u.State.Node; n.Zone != "zone-a" || !slices.Equal(n.NodeIPs, addrs("192.168.122.10")) {
		t.Errorf("node %+v", n)
	}
	checkValid(t, u.State.Services)
}

// apply gives a parsed object to the tracker.
func apply(tr *Tracker, obj runtime.Object) error {
	return tr.SetObject(obj, time.Time{})
}
