//go:build hosttest

package ipvs

import (
	"context"
	"errors"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

// On the host kernel, which has no IPVS, Dial reports ErrNotSupported with
// the family lookup's ENOENT; on one that has it, the connection works.
func TestDialHost(t *testing.T) {
	ns := testutil.NewNetNS(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.ENOENT) {
			t.Fatalf("Dial: %v, want ErrNotSupported and ENOENT", err)
		}
		t.Logf("as expected without IPVS: %v", err)
		return
	}
	defer c.Close()
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
}
