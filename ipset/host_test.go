//go:build hosttest

package ipset

import (
	"context"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// dialNS makes a fresh namespace and a Conn in it.
func dialNS(t *testing.T) (*testutil.NetNS, *Conn) {
	t.Helper()
	ns := testutil.NewNetNS(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return ns, c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
