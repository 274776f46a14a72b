//go:build vmtest

package ipvs_test

import (
	"context"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/ipvsbench"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/mdlayher/netlink"
)

// BenchmarkCreate2000x4/floor-512 writes the requests that build
// ipvsbench.Table, encoded as this package would, 512 to a sendmsg on a
// bare mdlayher/netlink socket, each acknowledged: the batching floor the
// issue measured. The benchmark's other sub-benchmarks, moby/ipvs (the
// baseline), ipvsadm -R and Batch, are in daemon/compare/ipvs, whose
// module may require moby/ipvs; run together (make bench), they form one
// group for hack/benchratio.
func BenchmarkCreate2000x4(b *testing.B) {
	b.Run("floor-512", func(b *testing.B) {
		msgs := ipvs.RawCreateRequests(ipvsbench.Table())
		for range b.N {
			e := ipvsbench.Setup(b)
			b.StopTimer()
			nc, family := rawConn(b, e.NS)
			b.StartTimer()
			for start := 0; start < len(msgs); start += 512 {
				chunk := msgs[start:min(start+512, len(msgs))]
				for i := range chunk {
					chunk[i].Header.Type = netlink.HeaderType(family)
					chunk[i].Header.Sequence = 0
				}
				if _, err := nc.SendMessages(chunk); err != nil {
					b.Fatal(err)
				}
				for range chunk {
					if _, err := nc.Receive(); err != nil {
						b.Fatal(err)
					}
				}
			}
			e.Verify(b)
		}
		b.ReportMetric(float64(ipvsbench.Ops), "ops/op")
	})
}

// rawConn opens a bare generic netlink socket in ns and looks up the IPVS
// family's id.
func rawConn(b *testing.B, ns *testutil.NetNS) (*netlink.Conn, uint16) {
	lookup, err := nl.Dial(uapi.NETLINK_GENERIC, ns.FD())
	if err != nil {
		b.Fatal(err)
	}
	defer lookup.Close()
	family, err := lookup.GenlFamily(context.Background(), ipvs.GenlName)
	if err != nil {
		b.Fatal(err)
	}
	nc := testutil.Open(b, func() (*netlink.Conn, error) {
		return netlink.Dial(uapi.NETLINK_GENERIC, &netlink.Config{NetNS: ns.FD()})
	})
	if err := nc.SetReadBuffer(8 << 20); err != nil {
		b.Fatal(err)
	}
	return nc, family
}
