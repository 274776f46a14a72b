package dataplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"golang.org/x/sys/unix"
)

// newFakeDataplane returns a Dataplane on a new dataplanetest.Node,
// closed when the test ends. cfg may be nil.
func newFakeDataplane(t testing.TB, cfg *dataplane.Config) (*dataplane.Dataplane, *dataplanetest.Node) {
	t.Helper()
	n, err := dataplanetest.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := n.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d, n
}

// syncOK syncs state and fails the test on any failure.
func syncOK(t *testing.T, d *dataplane.Dataplane, ctx context.Context, state *model.State) *dataplane.Result {
	t.Helper()
	res, err := d.Sync(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("sync: %v", e)
	}
	return res
}

// checkKernel reads the fake kernel through fresh connections, as a
// restarted ipvsplane would, and fails the test unless a first sync would
// find nothing to do but reconcile conntrack, as every first sync does:
// the kernel holds all that state asks.
func checkKernel(t *testing.T, n *dataplanetest.Node, state *model.State) {
	t.Helper()
	d, err := n.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pl, errs, err := d.DryRun(context.Background(), state)
	if err != nil || len(errs) > 0 {
		t.Fatalf("reading the kernel: %v %v", err, errs)
	}
	if ops := dataplane.StateOps(pl); len(ops) != 0 {
		t.Errorf("the kernel does not hold the state; a first sync would do:\n%s\nIPVS:\n%s\nipsets:\n%s\nlinks:\n%s\nnftables:\n%s",
			pl, n.IPVS.Dump(), n.Sets.Dump(), n.Links.Dump(), n.Rules.Dump())
	}
}

// onlyFailure returns the operation of a sync's one failure, which must
// carry errno.
func onlyFailure(t *testing.T, res *dataplane.Result, errno unix.Errno) plan.Op {
	t.Helper()
	var oe *dataplane.OpError
	if len(res.Errors) != 1 || !errors.As(res.Errors[0], &oe) || !errors.Is(oe, errno) {
		t.Fatalf("errors %v: want one failed operation, with %v", res.Errors, errno)
	}
	return oe.Op
}

// newRereadingDataplane is a dataplane on the fakes whose periodic reread
// is due a minute after the last full read, on a clock the test moves
// (*now), and which signals read when a reread ends.
func newRereadingDataplane(t *testing.T) (*dataplane.Dataplane, *dataplanetest.Node, *time.Time, chan struct{}) {
	t.Helper()
	now := time.Unix(1_800_000_000, 0)
	read := make(chan struct{}, 1)
	d, n := newFakeDataplane(t, &dataplane.Config{ResyncInterval: time.Minute, Now: func() time.Time { return now },
		KernelRead: func() { read <- struct{}{} }})
	return d, n, &now, read
}
