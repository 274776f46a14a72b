//go:build vmtest

package dataplane

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// maglevNode is one node of an ECMP group in front of a load balancer:
// its own namespace with its dataplane, a client namespace that reaches
// it (every node's client has the same address, so a flow is the same
// 5-tuple whichever node it arrives at), and a namespace with every
// backend's address behind it.
type maglevNode struct {
	node, client, backends *testutil.NetNS
	dp                     *Dataplane
}

// The load balancer's address and the client's, the same at every node;
// the backends answer UDP on maglevPort with their own address.
var (
	maglevVIP      = "10.96.0.53"
	maglevClient   = "192.168.0.2"
	maglevBackends = []string{"10.244.0.11", "10.244.0.12", "10.244.0.13", "10.244.0.14"}
)

const maglevPort = 5353

func newMaglevNode(t *testing.T) *maglevNode {
	t.Helper()
	m := &maglevNode{node: testutil.NewNetNS(t), client: testutil.NewNetNS(t), backends: testutil.NewNetNS(t)}
	m.node.Veth(t, "n-c", m.client, "c0")
	m.node.Veth(t, "n-b", m.backends, "b0")
	m.node.IP(t, "addr", "add", "192.168.0.1/24", "dev", "n-c")
	m.node.IP(t, "addr", "add", "10.244.0.1/24", "dev", "n-b")
	m.client.IP(t, "addr", "add", maglevClient+"/24", "dev", "c0")
	m.client.IP(t, "route", "add", "default", "via", "192.168.0.1")
	for _, b := range maglevBackends {
		m.backends.IP(t, "addr", "add", b+"/24", "dev", "b0")
		serveUDP(t, m.backends, fmt.Sprintf("%s:%d", b, maglevPort), b)
	}
	m.backends.IP(t, "route", "add", "default", "via", "10.244.0.1")
	m.dp = newDataplane(t, m.node)
	return m
}

// maglevState is the load balancer with the given backends, scheduled by
// Maglev hashing over the client's address and port.
func maglevState(backends []string) *State {
	node := vmNode()
	node.Scheduler = "mh"
	s := svc("default", "dns", "", UDP, 53, maglevVIP)
	for _, b := range backends {
		s.Endpoints = append(s.Endpoints, ready(b, maglevPort, "node-b"))
	}
	return &State{Node: node, Services: []ServicePort{s}}
}

// backendsOf sends one datagram of each flow (client source ports from
// first on) through the node and returns the backend that answered each.
func (m *maglevNode) backendsOf(t *testing.T, first, flows int) []string {
	t.Helper()
	out := make([]string, flows)
	var mu sync.Mutex
	err := testutil.Parallel(context.Background(), 16, 0, flows, func(_ context.Context, i int) error {
		var got string
		err := m.client.Do(func() error {
			local := &net.UDPAddr{IP: net.ParseIP(maglevClient), Port: first + i}
			c, err := net.DialUDP("udp", local, &net.UDPAddr{IP: net.ParseIP(maglevVIP), Port: 53})
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, 64)
			for range 3 { // a datagram lost to a slow guest is sent again
				c.SetDeadline(time.Now().Add(2 * time.Second))
				c.Write([]byte("which"))
				n, err := c.Read(buf)
				if err == nil {
					got = string(buf[:n])
					return nil
				}
			}
			return fmt.Errorf("flow from port %d: no answer", first+i)
		})
		mu.Lock()
		out[i] = got
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Maglev hashing (mh) gives ECMP-fed load balancers consistency: the same
// Service programmed on two nodes sends the same client 5-tuple to the
// same backend on both, so a flow that a route change moves to another
// node keeps its backend; and removing a backend moves its own flows and
// few others (Maglev's minimal disruption), measured against a node that
// learns the smaller backend list fresh.
func TestMaglevConsistentAcrossNodes(t *testing.T) {
	testutil.RequireVM(t)
	const flows, first = 400, 20000
	a, b := newMaglevNode(t), newMaglevNode(t)
	mustSync(t, a.dp, maglevState(maglevBackends))
	// Node b learns the backends in another order, over two syncs, as a
	// node that saw the endpoints arrive one by one.
	mustSync(t, b.dp, maglevState([]string{maglevBackends[3], maglevBackends[1]}))
	mustSync(t, b.dp, maglevState([]string{maglevBackends[2], maglevBackends[0], maglevBackends[3], maglevBackends[1]}))

	onA, onB := a.backendsOf(t, first, flows), b.backendsOf(t, first, flows)
	share := map[string]int{}
	for i := range onA {
		share[onA[i]]++
		if onA[i] != onB[i] {
			t.Errorf("flow from port %d: backend %s through node a, %s through node b", first+i, onA[i], onB[i])
		}
	}
	t.Logf("%d flows, the same backend through both nodes; shares %v", flows, share)
	if len(share) != len(maglevBackends) {
		t.Errorf("the flows reached %d of %d backends: %v", len(share), len(maglevBackends), share)
	}

	// One backend leaves. Node a drains it (weight 0 while flows last);
	// a third node learns the three left fresh. New flows (other source
	// ports) agree on both, and the flows a knew keep their backend on
	// the fresh node unless theirs left.
	left := maglevBackends[:3]
	mustSync(t, a.dp, maglevState(left))
	c := newMaglevNode(t)
	mustSync(t, c.dp, maglevState(left))
	newOnA, newOnC := a.backendsOf(t, first+flows, flows), c.backendsOf(t, first+flows, flows)
	for i := range newOnA {
		if newOnA[i] != newOnC[i] {
			t.Errorf("new flow from port %d: backend %s through node a (draining %s), %s through node c", first+flows+i, newOnA[i], maglevBackends[3], newOnC[i])
		}
	}
	onC := c.backendsOf(t, first, flows)
	moved, stayed, gone := 0, 0, 0
	for i := range onA {
		switch {
		case onA[i] == maglevBackends[3]:
			gone++
		case onC[i] == onA[i]:
			stayed++
		default:
			moved++
		}
		if onC[i] == maglevBackends[3] {
			t.Errorf("flow from port %d reached the removed backend through node c", first+i)
		}
	}
	frac := float64(moved) / float64(moved+stayed)
	t.Logf("backend %s removed: its %d flows moved; of the other %d flows %d moved (%.1f%%)", maglevBackends[3], gone, moved+stayed, moved, 100*frac)
	// Maglev's tables trade a few moved flows for balance; a hash that
	// reassigned by modulo would move about three quarters of them.
	if frac > 0.15 {
		t.Errorf("%.1f%% of the flows whose backend stayed moved; Maglev should move few", 100*frac)
	}
}
