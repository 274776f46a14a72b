package watcher

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// FuzzParseManifests feeds arbitrary files to the parser and what it
// returns to the tracker: nothing may panic, every error must locate
// itself in the file, and nothing the conversion lets through may be
// rejected by the dataplane.
func FuzzParseManifests(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		objs, errs := ParseManifests("f.yaml", data)
		for _, err := range errs {
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.File != "f.yaml" || ie.Line < 1 || ie.Line > lines {
				t.Fatalf("error not located in the file's %d lines: %v", lines, err)
			}
		}
		tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}})
		for _, o := range objs {
			if o.Line < 1 || o.Line > lines {
				t.Fatalf("object at line %d of %d", o.Line, lines)
			}
			if err := apply(tr, o.Object); err != nil && !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("conversion error is not an InvalidError: %v", err)
			}
		}
		u := tr.Sync()
		if err := u.State.Node.Validate(); err != nil {
			t.Fatalf("node rejected by the dataplane: %v", err)
		}
		for i := range u.State.Services {
			if err := u.State.Services[i].Validate(); err != nil {
				t.Fatalf("service port rejected by the dataplane: %v", err)
			}
		}
	})
}
