package watcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// FilesConfig configures [WatchFiles].
type FilesConfig struct {
	// Dir holds the manifests: files named *.yaml, *.yml or *.json, or
	// links to such files (hidden files and subdirectories are not read).
	// A ConfigMap volume works: its atomic updates are followed.
	Dir     string
	Tracker *Tracker
	// OnError, if set, receives each document or object that could not
	// be used (an [*InvalidError] with file and line) and each failure to
	// read or watch a file.
	OnError func(error)
}

// settle is how long a file must be quiet before it is read again: an
// editor's save or a copy arrives as several events, and reading the file
// half-written would briefly remove its objects.
const settle = 50 * time.Millisecond

// WatchFiles feeds the tracker from a directory of manifests (see
// [ParseManifests]) and keeps it up to date as files are written, renamed
// and removed, until ctx is done. After the first reading of the directory
// it marks Services and EndpointSlices synced. The trigger time of a
// change is the file's modification time. An object defined in two files
// is the one read last; if that file stops defining it, the other file's
// holds again. It returns ctx's error, or an error if the
// directory cannot be watched.
func WatchFiles(ctx context.Context, cfg FilesConfig) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", cfg.Dir, err)
	}
	defer w.Close()
	// Watch before the first reading, so no change falls between them.
	if err := w.Add(cfg.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", cfg.Dir, err)
	}
	src := &filesSource{cfg: cfg, files: map[string]map[objectKey]bool{}, owner: map[objectKey]string{}}
	if err := src.readAll(false); err != nil {
		return err
	}
	cfg.Tracker.MarkSynced(Services)
	cfg.Tracker.MarkSynced(EndpointSlices)

	pending := map[string]bool{}
	rescan := false
	timer := time.NewTimer(settle)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return ctx.Err()
			}
			switch base := filepath.Base(ev.Name); {
			case ev.Has(fsnotify.Chmod):
			case strings.HasPrefix(base, ".."):
				// A ConfigMap volume swaps its "..data" link to update
				// all files at once: the visible names are links into it.
				rescan = true
				timer.Reset(settle)
			case manifestName(base):
				pending[ev.Name] = true
				timer.Reset(settle)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return ctx.Err()
			}
			src.report(fmt.Errorf("watch %s: %w", cfg.Dir, err))
			// Events were lost: read everything again.
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				rescan = true
				timer.Reset(settle)
			}
		case <-timer.C:
			if rescan {
				if err := src.readAll(true); err != nil {
					src.report(err)
				}
			} else {
				for _, path := range slices.Sorted(maps.Keys(pending)) {
					src.read(path, true)
				}
			}
			clear(pending)
			rescan = false
		}
	}
}

// objectKey names an object a file defines.
type objectKey struct{ kind, namespace, name string }

func compareObjectKeys(a, b objectKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

type filesSource struct {
	cfg FilesConfig
	// files holds what each file defined when last read; owner says
	// which file an object was last read from.
	files map[string]map[objectKey]bool
	owner map[objectKey]string
}

func (s *filesSource) report(err error) {
	if s.cfg.OnError != nil {
		s.cfg.OnError(err)
	}
}

func manifestName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readAll reads every manifest of the directory and forgets the files no
// longer there.
func (s *filesSource) readAll(changed bool) error {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("read manifests: %w", err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		path := filepath.Join(s.cfg.Dir, e.Name())
		// Follow links: a ConfigMap volume's files are links.
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && manifestName(e.Name()) {
			present[path] = true
			s.read(path, changed)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		if !present[path] {
			s.read(path, changed)
		}
	}
	return nil
}

// read reads one file again and updates the tracker with what it added,
// changed and no longer defines.
func (s *filesSource) read(path string, changed bool) {
	objs, trigger, ok := s.load(path, changed)
	if !ok {
		return
	}
	keys := make(map[objectKey]bool, len(objs))
	for _, o := range objs {
		k := s.set(path, o, trigger)
		keys[k] = true
		s.owner[k] = path
	}
	reread := s.forget(path, keys)
	if len(keys) == 0 {
		delete(s.files, path)
	} else {
		s.files[path] = keys
	}
	for _, other := range slices.Compact(slices.Sorted(slices.Values(reread))) {
		s.read(other, changed)
	}
}

// load reads and parses one file, reporting its problems; a missing file
// defines nothing. ok is false when the file cannot be read: what it
// defined is kept, as it may be readable again soon. A change's trigger
// time is the file's modification time, or now for a removed file; the
// first reading has none, since its changes are not new.
func (s *filesSource) load(path string, changed bool) (objs []Object, trigger time.Time, ok bool) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if changed {
			trigger = time.Now()
		}
		return nil, trigger, true
	case err != nil:
		s.report(fmt.Errorf("read manifests: %w", err))
		return nil, trigger, false
	}
	if info, err := os.Stat(path); err == nil && changed {
		trigger = info.ModTime()
	}
	objs, errs := ParseManifests(path, data)
	for _, err := range errs {
		s.report(err)
	}
	return objs, trigger, true
}

// set hands one object of the file at path to the tracker, reporting the
// problems it has located in the file, and returns its key.
func (s *filesSource) set(path string, o Object, trigger time.Time) objectKey {
	var k objectKey
	switch obj := o.Object.(type) {
	case *v1.Service:
		k = objectKey{"Service", obj.Namespace, obj.Name}
	case *discoveryv1.EndpointSlice:
		k = objectKey{"EndpointSlice", obj.Namespace, obj.Name}
	case *v1.Node:
		k = objectKey{"Node", "", obj.Name}
	}
	// Each entry left out is located, not only the first.
	var errs []error
	for _, err := range Unjoin(s.cfg.Tracker.SetObject(o.Object, trigger)) {
		if ie, ok := asInvalid(err); ok {
			located := *ie
			located.File, located.Line = path, o.Line
			err = &located
		}
		errs = append(errs, err)
	}
	switch len(errs) {
	case 0:
	case 1:
		s.report(errs[0])
	default:
		s.report(errors.Join(errs...))
	}
	return k
}

// forget deletes from the tracker the objects the file at path defined
// and no longer does (keys are those it defines now), and returns the
// other files that define some of them: those hold now, and are read
// again.
func (s *filesSource) forget(path string, keys map[objectKey]bool) (reread []string) {
	tr := s.cfg.Tracker
	for _, k := range slices.SortedFunc(maps.Keys(s.files[path]), compareObjectKeys) {
		if keys[k] || s.owner[k] != path {
			continue
		}
		delete(s.owner, k)
		if other := s.definedElsewhere(k, path); other != "" {
			reread = append(reread, other)
			continue
		}
		switch k.kind {
		case "Service":
			tr.DeleteService(k.namespace, k.name)
		case "EndpointSlice":
			tr.DeleteEndpointSlice(k.namespace, k.name)
		case "Node":
			tr.DeleteNode(k.name)
		}
	}
	return reread
}

// definedElsewhere returns a file other than path that defines k.
func (s *filesSource) definedElsewhere(k objectKey, path string) string {
	for _, other := range slices.Sorted(maps.Keys(s.files)) {
		if other != path && s.files[other][k] {
			return other
		}
	}
	return ""
}
