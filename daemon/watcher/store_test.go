package watcher

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The store passes objects through and works out, on a relist, which
// known objects are gone.
func TestForwardStore(t *testing.T) {
	svc := func(name string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	var events []string
	s := newForwardStore(
		func(o runtime.Object) { events = append(events, "set "+o.(*v1.Service).Name) },
		func(namespace, name string, o runtime.Object) {
			e := "del " + namespace + "/" + name
			if o == nil {
				e += " (unknown state)"
			}
			events = append(events, e)
		})
	placeholders := map[string]any{}
	stream := func(names ...string) error {
		for _, n := range names {
			p, err := s.Transformer()(svc(n))
			if err != nil {
				return err
			}
			if _, ok := p.(*v1.Service); ok {
				return fmt.Errorf("%s kept whole", n)
			}
			placeholders[n] = p
		}
		return nil
	}
	steps := []struct {
		do     func() error
		want   []string
		synced bool
	}{
		{func() error { return s.Add(svc("a")) }, []string{"set a"}, false},
		{func() error { return s.Replace([]any{svc("a"), svc("b")}, "1") }, []string{"set a", "set b"}, true},
		{func() error { return s.Update(svc("b")) }, []string{"set b"}, true},
		{func() error { return s.Add(svc("c")) }, []string{"set c"}, true},
		{func() error { return s.Delete(svc("a")) }, []string{"del default/a"}, true},
		{func() error { return s.Replace([]any{svc("c")}, "2") }, []string{"set c", "del default/b (unknown state)"}, true},
		{func() error { return s.Resync() }, nil, true},
		{func() error { return s.Replace(nil, "3") }, []string{"del default/c (unknown state)"}, true},
		// A streamed listing: each object is handed on as it arrives and
		// the reflector keeps its placeholder; Replace reconciles keys.
		{func() error { return stream("d", "e") }, []string{"set d", "set e"}, true},
		{func() error { return s.Replace([]any{placeholders["d"]}, "4") }, []string{"del default/e (unknown state)"}, true},
		// A stream that failed after handing on f, then a listing
		// without it.
		{func() error { return stream("f") }, []string{"set f"}, true},
		{func() error { return s.Replace([]any{svc("g")}, "5") }, []string{"set g", "del default/d (unknown state)", "del default/f (unknown state)"}, true},
		// A placeholder taken again is not handed on twice.
		{func() error { _, err := s.Transformer()(placeholders["d"]); return err }, nil, true},
		{func() error { return s.Delete(placeholders["d"]) }, []string{"del default/d (unknown state)"}, true},
	}
	for i, st := range steps {
		events = nil
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		// Replace's deletions come after its objects, in map order.
		if i := slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, "del") }); i >= 0 {
			slices.Sort(events[i:])
		}
		if !slices.Equal(events, st.want) || s.HasSynced() != st.synced {
			t.Errorf("step %d: events %q synced %v, want %q synced %v", i, events, s.HasSynced(), st.want, st.synced)
		}
	}
	if err := s.Add("not an object"); err == nil {
		t.Error("a string taken as an object")
	}
	if _, err := s.Transformer()("not an object"); err == nil {
		t.Error("a string handed on as an object")
	}
}
