//go:build hosttest

package ipset

import (
	"net/netip"
	"testing"
)

func TestSmoke(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testContext(t)
	t.Log("protocol", c.Protocol())
	if err := c.Create(ctx, Set{Name: "s", Type: HashIPPort}, Exclusive); err != nil {
		t.Fatal(err)
	}
	es := []Entry{{Addr: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 80}, {Addr: netip.MustParseAddr("10.0.0.2"), Proto: UDP, Port: 53}}
	if err := c.AddEntries(ctx, "s", es, Exclusive); err != nil {
		t.Fatal(err)
	}
	err := c.AddEntries(ctx, "s", append([]Entry{{Addr: netip.MustParseAddr("10.0.0.3"), Proto: TCP, Port: 80}}, es...), Exclusive)
	t.Log(err)
	h, got, err := c.List(ctx, "s")
	t.Log(h, got, err)
	idx, err := c.Index(ctx, "s")
	t.Log(idx, err)
	t.Log(c.Create(ctx, Set{Name: "x", Type: "hash:foo"}, Exclusive))
	t.Log(ns.Run(t, "ipset", "save"))
}
