package ipsettest_test

import (
	"context"
	"testing"

	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
)

// HasIndex answers by the index Conn.Index reads, and a destroyed set's
// index is free.
func TestHasIndex(t *testing.T) {
	ctx := context.Background()
	k := ipsettest.New()
	c, err := k.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, ipset.Set{Name: name, Type: ipset.HashIP}, 0); err != nil {
			t.Fatal(err)
		}
	}
	b, err := c.Index(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !k.HasIndex(b) || k.HasIndex(b+1) {
		t.Errorf("HasIndex(%d) = %v, HasIndex(%d) = %v; want true, false", b, k.HasIndex(b), b+1, k.HasIndex(b+1))
	}
	if err := c.Destroy(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if k.HasIndex(b) {
		t.Errorf("HasIndex(%d) after the set was destroyed", b)
	}
}
