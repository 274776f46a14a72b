package controlplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// StartTimeout bounds how long New and Shared wait for a control plane to
// become ready; a cold start on a loaded two-core machine takes up to a
// minute.
const StartTimeout = 3 * time.Minute

// New starts a control plane for one test, configured by cfg (nil for the
// default), and stops it at t.Cleanup. A
// missing etcd or kube-apiserver skips the test, or fails it under CI=true
// (see testutil.Require).
func New(t testing.TB, cfg *Config) *ControlPlane {
	t.Helper()
	requirePrograms(t)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Close() })
	return cp
}

func requirePrograms(t testing.TB) {
	t.Helper()
	_, err := EtcdProgram()
	testutil.Require(t, err == nil, "etcd (run hack/build-kube)")
	_, err = KubeProgram("kube-apiserver")
	testutil.Require(t, err == nil, "kube-apiserver "+KubeVersion+" (run hack/build-kube)")
}

// Shared is one control plane for all the tests of a package that ask for
// it, started by the first. The package's TestMain closes it after the
// tests:
//
//	var cp controlplane.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		cp.Close()
//		os.Exit(code)
//	}
//
// Its zero value is ready for use.
type Shared struct {
	// Config configures the control plane when the first Get starts it;
	// nil for the default.
	Config *Config

	mu  sync.Mutex
	cp  *ControlPlane
	err error
}

// Get returns the shared control plane, starting it on the first call. A
// start that failed fails every later Get too, without trying again.
func (s *Shared) Get(t testing.TB) *ControlPlane {
	t.Helper()
	requirePrograms(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cp == nil && s.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		s.cp, s.err = Start(ctx, s.Config)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.cp
}

// Close stops the shared control plane, if it was started.
func (s *Shared) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cp != nil {
		_ = s.cp.Close()
		s.cp = nil
	}
}
