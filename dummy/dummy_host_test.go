//go:build hosttest

package dummy

import (
	"context"
	"errors"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The development machines' kernel has no dummy driver: Ensure must say so
// with ErrNotSupported, and a kernel that has one must simply work.
func TestEnsureReportsMissingDriver(t *testing.T) {
	ns := testutil.NewNetNS(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Ensure(context.Background(), "kube-ipvs0")
	switch {
	case err == nil:
		if _, err := dev.Addresses(context.Background()); err != nil {
			t.Error(err)
		}
	case errors.Is(err, ErrNotSupported):
		t.Logf("as expected on a kernel without the driver: %v", err)
	default:
		t.Fatalf("Ensure: %v, want success or ErrNotSupported", err)
	}
}
