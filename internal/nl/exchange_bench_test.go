package nl

import (
	"context"
	"testing"

	"github.com/mdlayher/netlink"
)

// Many dumps in one exchange, as a read of the IPVS table sends one per
// virtual server: the kernel runs one dump at a time per socket, so each
// is a write of its own, and the exchange's cost must grow linearly.
func BenchmarkExchangeDumps(b *testing.B) {
	c := NewConn(Serve(func(reqs []netlink.Message) []netlink.Message {
		var out []netlink.Message
		for _, r := range reqs {
			out = append(out, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: r.Header.Sequence}, Data: make([]byte, 4)})
		}
		return out
	}), 1<<20, 1<<20)
	reqs := make([]*Request, 10000)
	b.ReportAllocs()
	for b.Loop() {
		for i := range reqs {
			reqs[i] = &Request{Type: 16, Flags: netlink.Dump}
		}
		if err := c.Exchange(context.Background(), reqs...); err != nil {
			b.Fatal(err)
		}
	}
}
