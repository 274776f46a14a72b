//go:build hosttest

package watcher_test

import (
	"os"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// controlPlane is the real etcd and kube-apiserver the host tests share:
// it starts with the first test that asks and stops after the last.
var controlPlane controlplane.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	controlPlane.Close()
	os.Exit(code)
}
