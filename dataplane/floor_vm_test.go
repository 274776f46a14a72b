//go:build vmtest

package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// The floor of a full sync: the netlink writes the dataplane's first sync
// makes (virtual and real servers, set entries, addresses, the nftables
// tables), captured once, replayed pre-encoded in as few writes as the
// kernel takes, without reads and without acknowledgements. hack/benchratio
// prints the dataplane's first sync as a multiple of it.
func BenchmarkFullSyncFloor(b *testing.B) {
	testutil.RequireVM(b)
	for _, n := range benchSizes(b, 1000, 10000) {
		b.Run(fmt.Sprintf("services=%d", n), func(group *testing.B) {
			state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(n, 10)}
			c := captureSync(group, state)
			// The floor first: hack/benchratio takes a group's first
			// sub-benchmark as the baseline. The group owns their
			// namespaces (see benchInitialSync).
			group.Run("floor", func(b *testing.B) { benchFloor(b, group, c) })
			group.Run("dataplane", func(b *testing.B) { benchInitialSync(b, group, state, floorBinding) })
		})
	}
}

// floorBinding binds the service addresses as local routes: bound as
// addresses, the kernel's walk of the device's address list would be most
// of both the floor and the sync at 100,000 services (BenchmarkBindAll)
// and hide the rest.
const floorBinding = dummy.BindLocalRoutes

// floorCapture is what a sync wrote, and what the kernel held after it.
type floorCapture struct {
	writes []floorWrite
	// captured counts the skbs the tap kept, reads included; messages
	// the requests the writes hold.
	captured, messages int
	after              kernelCounts
}

// kernelCounts is what a sync left in the kernel, counted. The set
// references are the nftables rules' (xt_set) and IPVS's none, so they
// tell that the rules are in place.
type kernelCounts struct {
	services, reals, sets, entries, setRefs int
}

// captureSync runs a first sync of state in a fresh namespace with a
// netlink tap, and returns its writes in the order the kernel took them.
func captureSync(b *testing.B, state *model.State) *floorCapture {
	ctx := context.Background()
	family, err := ipvsFamily(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ns := testutil.NewNetNS(b)
	tap, err := openTap(b, ns, family)
	if err != nil {
		b.Fatalf("netlink tap: %v", err)
	}
	// The tap is open before New, so that a write New made would be
	// replayed too.
	d, err := New(&Config{NetNS: ns.FD(), Binding: floorBinding})
	if err != nil {
		tap.close()
		b.Fatal(err)
	}
	res, err := d.Sync(ctx, state)
	c, tapErr := tap.stop()
	d.Close()
	if err = errors.Join(err, tapErr); err != nil {
		b.Fatal(err)
	}
	if len(res.Errors) > 0 {
		b.Fatalf("capture sync: %d errors, first: %v", len(res.Errors), res.Errors[0])
	}
	if c.after, err = countKernel(ctx, ns); err != nil {
		b.Fatalf("after the capture sync: %v", err)
	}
	c.writes = mergeWrites(c.writes, floorMaxWrite)
	for _, w := range c.writes {
		c.messages += countMessages(w.b)
	}
	return c
}

// floorMaxWrite bounds the replay's merged writes, as the dataplane's own
// (internal/nl's maxWrite); a larger captured skb is written as it was.
const floorMaxWrite = 1 << 20

// ipvsFamily is the IPVS generic netlink family's id, the same in every
// namespace.
func ipvsFamily(ctx context.Context) (uint16, error) {
	c, err := nl.Dial(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return 0, fmt.Errorf("generic netlink socket: %w", err)
	}
	defer c.Close()
	id, err := c.GenlFamily(ctx, "IPVS")
	if err != nil {
		return 0, fmt.Errorf("IPVS generic netlink family: %w", err)
	}
	return id, nil
}

// countKernel counts the virtual and real servers, the sets, their
// entries and references in a namespace.
func countKernel(ctx context.Context, ns *testutil.NetNS) (kernelCounts, error) {
	var k kernelCounts
	c, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		return k, err
	}
	defer c.Close()
	table, err := c.Table(ctx)
	if err != nil {
		return k, fmt.Errorf("reading the IPVS table: %w", err)
	}
	k.services = len(table)
	for _, vs := range table {
		k.reals += len(vs.Destinations)
	}
	sets, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		return k, err
	}
	defer sets.Close()
	names, err := sets.Names(ctx)
	if err != nil {
		return k, fmt.Errorf("listing the sets: %w", err)
	}
	k.sets = len(names)
	for _, name := range names {
		h, err := sets.Header(ctx, name)
		if err != nil {
			return k, fmt.Errorf("reading set %s: %w", name, err)
		}
		k.entries += int(h.Entries)
		k.setRefs += int(h.References)
	}
	return k, nil
}

// countMessages counts the netlink messages in a write.
func countMessages(b []byte) int {
	n := 0
	for len(b) >= nl.HeaderLen {
		l := nl.Align(int(binary.NativeEndian.Uint32(b[0:4])))
		if l < nl.HeaderLen || l > len(b) {
			break
		}
		n++
		b = b[l:]
	}
	return n
}

// benchFloor times the replay of a capture's writes, each run in a fresh
// namespace that lives until owner's test ends.
func benchFloor(b *testing.B, owner testing.TB, c *floorCapture) {
	size := 0
	for _, w := range c.writes {
		size += len(w.b)
	}
	for i := range b.N {
		b.StopTimer()
		ns := testutil.NewNetNS(owner)
		// The capture's namespace had the tap before the dataplane's
		// device: the same link here, down, gives the device the same
		// index, which its addresses name.
		addNlmon(b, ns)
		socks, err := openReplaySockets(ns)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		err = socks.write(c.writes)
		b.StopTimer()
		err = errors.Join(err, socks.drain())
		socks.close()
		if err != nil {
			b.Fatalf("replay: %v", err)
		}
		if i == 0 {
			checkReplay(b, ns, c)
		}
	}
	b.ReportMetric(float64(len(c.writes)), "writes")
	b.ReportMetric(float64(c.messages), "messages")
	b.ReportMetric(float64(size), "bytes")
	// The dataplane's own sendmsgs, reads included, for comparison.
	b.ReportMetric(float64(c.captured), "sync-sendmsgs")
}

// checkReplay fails the benchmark unless the replay left as much in the
// kernel as the dataplane's sync did: a write the tap missed shows here.
func checkReplay(b *testing.B, ns *testutil.NetNS, c *floorCapture) {
	k, err := countKernel(context.Background(), ns)
	if err != nil {
		b.Fatalf("after the replay: %v", err)
	}
	if k != c.after {
		b.Fatalf("the replay left %+v, the sync %+v", k, c.after)
	}
}

// nlmonName names the netlink tap in a benchmark's namespaces.
const nlmonName = "nlmon0"

// addNlmon creates a netlink monitor link, down, in a namespace (the
// kernel module nlmon).
func addNlmon(t testing.TB, ns *testutil.NetNS) {
	ns.IP(t, "link", "add", nlmonName, "type", "nlmon")
}
