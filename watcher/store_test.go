package watcher

import (
	"slices"
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
	}
	for i, st := range steps {
		events = nil
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !slices.Equal(events, st.want) || s.HasSynced() != st.synced {
			t.Errorf("step %d: events %q synced %v, want %q synced %v", i, events, s.HasSynced(), st.want, st.synced)
		}
	}
	if err := s.Add("not an object"); err == nil {
		t.Error("a string taken as an object")
	}
}
