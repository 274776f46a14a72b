package conntracktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/conntracktest"
	"github.com/ipvsplane/ipvsplane/inet"
	"golang.org/x/sys/unix"
)

// udpFlow is a UDP entry from client:sport to svc that NAT sent to
// backend.
func udpFlow(client string, sport uint16, svc, backend string) conntrack.Flow {
	c, s, b := netip.MustParseAddr(client), netip.MustParseAddrPort(svc), netip.MustParseAddrPort(backend)
	return conntrack.Flow{
		Orig:    conntrack.Tuple{Protocol: inet.UDP, Src: c, SrcPort: sport, Dst: s.Addr(), DstPort: s.Port()},
		Reply:   conntrack.Tuple{Protocol: inet.UDP, Src: b.Addr(), SrcPort: b.Port(), Dst: c, DstPort: sport},
		Timeout: time.Minute,
	}
}

// outcome names a call's result by what a caller can test: the count and
// the errno.
func outcome(n int, err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return fmt.Sprint(n)
	case errors.As(err, &errno):
		return fmt.Sprintf("%d %s", n, unix.ErrnoName(errno))
	}
	return fmt.Sprintf("%d %v", n, err)
}

// scenario runs the calls a service proxy makes, and the refusals around
// them, on c, and returns their outcomes and the table left, printed.
func scenario(t *testing.T, c *conntrack.Conn) []string {
	t.Helper()
	ctx := context.Background()
	flows := []conntrack.Flow{
		udpFlow("10.0.0.2", 40000, "10.96.0.10:53", "10.244.1.5:5353"),
		udpFlow("10.0.0.3", 40000, "10.96.0.10:53", "10.244.1.5:5353"),
		udpFlow("10.0.0.2", 40001, "10.96.0.10:53", "10.244.2.7:5353"),
		udpFlow("10.0.0.2", 40002, "10.96.0.11:53", "10.244.1.5:5353"),
		udpFlow("fd00::2", 40000, "[fd00:96::10]:53", "[fd00:244::5]:5353"),
		udpFlow("fd00::2", 40001, "[fd00:96::11]:54", "[fd00:244::5]:5353"),
	}
	flows[2].Mark = 0x4000
	zoned := udpFlow("10.0.0.9", 40000, "10.96.0.10:53", "10.244.1.5:5353")
	zoned.Zone = 5
	tcp := udpFlow("10.0.0.2", 40000, "10.96.0.10:80", "10.244.1.5:8080")
	tcp.Orig.Protocol, tcp.Reply.Protocol = inet.TCP, inet.TCP
	tcp.Status = conntrack.StatusConfirmed | conntrack.StatusSeenReply | conntrack.StatusAssured | conntrack.StatusSrcNAT
	var out []string
	step := func(name string, n int, err error) { out = append(out, name+": "+outcome(n, err)) }

	step("create", 0, c.Create(ctx, append(flows, zoned, tcp)...))
	step("create again", 0, c.Create(ctx, flows[0]))
	noTimeout := udpFlow("10.0.0.4", 1, "10.96.0.10:53", "10.244.1.5:5353")
	noTimeout.Timeout = 0
	step("create without timeout", 0, c.Create(ctx, noTimeout))
	unconfirmed := udpFlow("10.0.0.4", 2, "10.96.0.10:53", "10.244.1.5:5353")
	unconfirmed.Status = conntrack.StatusAssured
	step("create unconfirmed", 0, c.Create(ctx, unconfirmed))
	clash := udpFlow("10.244.1.5", 5353, "10.0.0.2:40000", "10.96.0.10:53")
	step("create over a reply tuple", 0, c.Create(ctx, clash))

	got, err := c.Get(ctx, conntrack.Flow{Orig: flows[0].Reply})
	step("get by reply tuple", int(got.Orig.SrcPort), err)
	_, err = c.Get(ctx, conntrack.Flow{Orig: flows[0].Orig, Zone: 5})
	step("get in another zone", 0, err)

	n, err := c.Count(ctx, conntrack.All())
	step("count all", n, err)
	n, err = c.Count(ctx, conntrack.Filter{Mark: 0x4000, MarkMask: 0xffff})
	step("count by mark", n, err)
	zone := uint16(5)
	n, err = c.Count(ctx, conntrack.Filter{Zone: &zone})
	step("count zone 5", n, err)

	n, err = c.DeleteMatching(ctx, conntrack.ByEndpoint(inet.UDP,
		netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("10.244.1.5:0")))
	step("delete by endpoint", n, err)
	n, err = c.DeleteMatching(ctx, conntrack.ByDestinationPort(inet.IPv6, inet.UDP, 53))
	step("delete by destination port", n, err)
	n, err = c.DeleteMatching(ctx, conntrack.ByStaleEndpoints(inet.UDP,
		netip.MustParseAddrPort("10.96.0.11:53"), []netip.AddrPort{netip.MustParseAddrPort("10.244.2.7:5353")}))
	step("delete stale endpoints", n, err)

	stale, err := c.Get(ctx, conntrack.Flow{Orig: tcp.Orig})
	step("get tcp", 0, err)
	stale.ID++
	step("delete a stale ID", 0, c.Delete(ctx, stale))
	step("delete missing", 0, c.Delete(ctx, flows[0]))
	step("flush ipv6", 0, c.Flush(ctx, inet.IPv6))

	left, err := c.Dump(ctx, conntrack.All())
	step("dump", len(left), err)
	return append(out, conntracktest.Format(left))
}

func TestScenario(t *testing.T) {
	k := conntracktest.New(nil)
	c := k.Dial()
	defer c.Close()
	got := scenario(t, c)
	want := []string{
		"create: 0",
		"create again: 0 EEXIST",
		"create without timeout: 0 EINVAL",
		"create unconfirmed: 0 EBUSY",
		"create over a reply tuple: 0 EEXIST",
		"get by reply tuple: 40000",
		"get in another zone: 0 ENOENT",
		"count all: 8",
		"count by mark: 1",
		"count zone 5: 1",
		"delete by endpoint: 3",
		"delete by destination port: 1",
		"delete stale endpoints: 1",
		"get tcp: 0",
		"delete a stale ID: 0 ENOENT",
		"delete missing: 0 ENOENT",
		"flush ipv6: 0",
		"dump: 2",
		"tcp 10.0.0.2:40000->10.96.0.10:80 reply 10.244.1.5:8080->10.0.0.2:40000 status 0xe\n" +
			"udp 10.0.0.2:40001->10.96.0.10:53 reply 10.244.2.7:5353->10.0.0.2:40001 status 0x8 mark 0x4000\n",
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("outcomes:\n%s\nwant:\n%s", fmt.Sprintf("%q", got), fmt.Sprintf("%q", want))
	}
	if got, want := k.Dump(), got[len(got)-1]; got != want {
		t.Errorf("Kernel.Dump:\n%s\nthe Conn's dump:\n%s", got, want)
	}
}

// Time runs in the table: the timeout left shrinks and an entry whose time
// is up is gone. In a synctest bubble the table's clock is the bubble's.
func TestTimeoutsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := conntracktest.New(nil)
		f := udpFlow("10.0.0.2", 40000, "10.96.0.10:53", "10.244.1.5:5353")
		f.Timeout = time.Second
		long := udpFlow("10.0.0.2", 40001, "10.96.0.10:53", "10.244.1.5:5353")
		if err := k.Add(f, long); err != nil {
			t.Fatal(err)
		}
		if left := k.Flows()[1].Timeout; left > time.Minute || left < 58*time.Second {
			t.Errorf("timeout left %v, want just under a minute", left)
		}
		time.Sleep(1100 * time.Millisecond) // instant: the bubble's clock
		c := k.Dial()
		defer c.Close()
		n, err := c.Count(context.Background(), conntrack.All())
		if err != nil || n != 1 {
			t.Errorf("Count after the first timeout = %d, %v; want 1", n, err)
		}
	})
}

// Add refuses what the kernel could not hold.
func TestAddRefusesClash(t *testing.T) {
	k := conntracktest.New(nil)
	f := udpFlow("10.0.0.2", 40000, "10.96.0.10:53", "10.244.1.5:5353")
	if err := k.Add(f); err != nil {
		t.Fatal(err)
	}
	if err := k.Add(conntrack.Flow{Orig: f.Reply}); err == nil {
		t.Error("Add of an entry whose tuple is another's reply tuple succeeded")
	}
	if err := k.Add(conntrack.Flow{Orig: conntrack.Tuple{Src: f.Orig.Src}}); err == nil {
		t.Error("Add of an incomplete tuple succeeded")
	}
}

// With small socket buffers the deletes of many entries are cut into many
// writes, and every entry still goes.
func TestSmallBuffers(t *testing.T) {
	ctx := context.Background()
	k := conntracktest.New(&conntracktest.Options{ReadBuffer: 16 << 10, WriteBuffer: 4 << 10})
	service := netip.AddrPortFrom(netip.MustParseAddr("10.96.0.10"), 53)
	endpoint := netip.AddrPortFrom(netip.MustParseAddr("10.244.0.5"), 53)
	for i := range 2000 {
		client := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		flow := conntrack.Flow{
			Orig:  conntrack.Tuple{Protocol: inet.UDP, Src: client, SrcPort: 1000, Dst: service.Addr(), DstPort: service.Port()},
			Reply: conntrack.Tuple{Protocol: inet.UDP, Src: endpoint.Addr(), SrcPort: endpoint.Port(), Dst: client, DstPort: 1000},
		}
		if err := k.Add(flow); err != nil {
			t.Fatal(err)
		}
	}
	c := k.Dial()
	defer c.Close()
	n, err := c.DeleteMatching(ctx, conntrack.ByEndpoint(inet.UDP, service, endpoint))
	if err != nil || n != 2000 || len(k.Flows()) != 0 {
		t.Fatalf("deleted %d, %v; %d left", n, err, len(k.Flows()))
	}
}
