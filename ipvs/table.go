package ipvs

import (
	"context"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"sync"
)

// VirtualServer is a service with its destinations.
type VirtualServer struct {
	Service      Service
	Destinations []Destination
}

// Table reading: the kernel lists destinations one service at a time, and
// runs one dump at a time per socket, each costing a write and two reads.
// Past peerThreshold services, Table spreads the dumps over tableSockets
// sockets in the same namespace: the kernel still serializes the dumps
// themselves, but the system calls and decoding around them overlap.
const (
	tableSockets  = 4
	peerThreshold = 64
)

// Table lists every service with its destinations.
func (c *Conn) Table(ctx context.Context) ([]VirtualServer, error) {
	svcs, err := c.Services(ctx)
	if err != nil {
		return nil, err
	}
	reqs := make([]*nl.Request, len(svcs))
	for i, s := range svcs {
		attrs, err := serviceAttrs(s)
		if err != nil {
			return nil, queryError("list destinations", s.String(), err)
		}
		reqs[i] = c.genlRequest(reqDump, cmdGetDest, attrs)
	}
	if err := c.runSpread(ctx, reqs); err != nil {
		return nil, queryError("list destinations", "", err)
	}
	table := make([]VirtualServer, len(svcs))
	for i, s := range svcs {
		if reqs[i].Err != nil {
			return nil, queryError("list destinations", s.String(), reqs[i].Err)
		}
		replies, err := genlPayloads(reqs[i].Replies)
		if err != nil {
			return nil, queryError("list destinations", s.String(), err)
		}
		ds, err := decodeDestinations(s, replies)
		if err != nil {
			return nil, err
		}
		table[i] = VirtualServer{Service: s, Destinations: ds}
	}
	return table, nil
}

// runSpread runs the requests over this Conn and, for many of them, peer
// sockets; without peers (no SIOCGSKNS, or no right to enter the
// namespace) it runs them all here.
func (c *Conn) runSpread(ctx context.Context, reqs []*nl.Request) error {
	conns := []*nl.Conn{c.nl}
	if len(reqs) >= peerThreshold {
		for range tableSockets - 1 {
			p, err := c.nl.DialPeer()
			if err != nil {
				break
			}
			defer p.Close()
			conns = append(conns, p)
		}
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(conns))
		per  = (len(reqs) + len(conns) - 1) / len(conns)
	)
	for i, pc := range conns {
		lo, hi := min(i*per, len(reqs)), min((i+1)*per, len(reqs))
		wg.Go(func() { errs[i] = pc.Exchange(ctx, reqs[lo:hi]...) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
