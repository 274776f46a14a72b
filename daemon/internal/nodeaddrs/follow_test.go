package nodeaddrs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestFollowAddresses(t *testing.T) {
	reads := [][]netip.Addr{
		{netip.MustParseAddr("192.0.2.1")},
		nil, // a failed read keeps the last addresses
		{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []netip.Addr, len(reads))
	i := 0
	read := func(context.Context) ([]netip.Addr, error) {
		defer func() { i++ }()
		if i >= len(reads) {
			cancel()
			return nil, errors.New("done")
		}
		if reads[i] == nil {
			return nil, errors.New("netlink: interrupted")
		}
		return reads[i], nil
	}
	done := make(chan struct{})
	go func() {
		Follow(ctx, zap.NewNop(), time.Millisecond, read, func(a []netip.Addr) { got <- a })
		close(done)
	}()
	<-done
	close(got)
	var sets [][]netip.Addr
	for a := range got {
		sets = append(sets, a)
	}
	if len(sets) != 2 || !slices.Equal(sets[0], reads[0]) || !slices.Equal(sets[1], reads[2]) {
		t.Errorf("set %v, want the two successful reads", sets)
	}
}
