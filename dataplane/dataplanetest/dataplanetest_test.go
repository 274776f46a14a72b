package dataplanetest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// A node without IPv6 is served IPv4 alone, and an old kernel gets
// kube-proxy's conn_reuse_mode.
func TestOptions(t *testing.T) {
	n, err := dataplanetest.New(t.TempDir(), &dataplanetest.Options{WithoutIPv6: true, Release: "5.4.0-150-generic"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := n.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.IPv6() {
		t.Error("a node without IPv6 is served IPv6")
	}
	if err := d.InitNode(context.Background(), &model.Node{Name: "node-a"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(n.ProcSys, "net/ipv4/vs/conn_reuse_mode"))
	if err != nil || strings.TrimSpace(string(got)) != "0" {
		t.Errorf("conn_reuse_mode %q, %v", got, err)
	}

	dual, err := dataplanetest.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := dual.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if !d2.IPv6() {
		t.Error("a dual-stack node is not served IPv6")
	}
}
