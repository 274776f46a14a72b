//go:build vmtest

package dataplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
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
// the backends answer UDP on maglevPort with their own address (and the
// client address they see).
var (
	maglevVIP      = "10.96.0.53"
	maglevClient   = "192.168.0.2"
	maglevBackends = []string{"10.244.0.11", "10.244.0.12", "10.244.0.13", "10.244.0.14"}
)

const maglevPort = 5353

func newMaglevNode(t *testing.T) *maglevNode {
	t.Helper()
	m := &maglevNode{node: testutil.NewNetNS(t), client: testutil.NewNetNS(t), backends: testutil.NewNetNS(t)}
	m.node.Link(t, "n-c", m.client, "c0", "192.168.0.1/24", maglevClient+"/24")
	m.node.Veth(t, "n-b", m.backends, "b0")
	m.node.IP(t, "addr", "add", "10.244.0.1/24", "dev", "n-b")
	for _, b := range maglevBackends {
		m.backends.IP(t, "addr", "add", b+"/24", "dev", "b0")
		m.backends.ServeUDP(t, fmt.Sprintf("%s:%d", b, maglevPort), b)
	}
	m.backends.IP(t, "route", "add", "default", "via", "10.244.0.1")
	m.dp = newDataplane(t, m.node)
	return m
}

// hashedState is the load balancer with the given backends, its
// scheduler hashing the client's address and port.
func hashedState(sched string, flags model.SchedulerFlags, backends []string) *model.State {
	s := fixture.Svc("default", "dns", "", inet.UDP, 53, maglevVIP)
	s.Scheduler, s.SchedulerFlags = sched, flags
	for _, b := range backends {
		s.Endpoints = append(s.Endpoints, fixture.Ready(b, maglevPort, "node-b"))
	}
	return &model.State{Node: vmNode(), Services: []model.ServicePort{s}}
}

// backendsOf sends one datagram of each flow (client source ports from
// first on) through the node and returns the backend that answered each.
func (m *maglevNode) backendsOf(t *testing.T, first, flows int) []string {
	t.Helper()
	out := make([]string, flows)
	var mu sync.Mutex
	err := testutil.Parallel(context.Background(), 16, 0, flows, func(_ context.Context, i int) error {
		var got string
		err := func() error {
			c, err := m.client.DialUDP(fmt.Sprintf("%s:%d", maglevClient, first+i), maglevVIP+":53")
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
					got, _, _ = strings.Cut(string(buf[:n]), " ")
					return nil
				}
			}
			return fmt.Errorf("flow from port %d: no answer", first+i)
		}()
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

// hashingRun is what a hashing scheduler did with the same flows through
// several nodes.
type hashingRun struct {
	// share counts the flows per backend through the first node.
	share map[string]int
	// across counts the flows that reached another backend through a
	// node that learned the same backends in another order; afterDrain
	// the new flows that did through a draining node and a fresh one.
	across, afterDrain int
	// moved and others count, of the flows whose backend did not leave,
	// those a fresh node with one backend fewer sends elsewhere.
	moved, others int
}

// runHashing measures a hashing scheduler over flows through nodes that
// program the same Service: node a from the start, node b learning the
// backends in another order over two syncs, then, once a backend left,
// node a draining it and a fresh node c without it.
func runHashing(t *testing.T, sched string, flags model.SchedulerFlags) hashingRun {
	const flows, first = 400, 20000
	r := hashingRun{share: map[string]int{}}
	a, b := newMaglevNode(t), newMaglevNode(t)
	mustSync(t, a.dp, hashedState(sched, flags, maglevBackends))
	mustSync(t, b.dp, hashedState(sched, flags, []string{maglevBackends[3], maglevBackends[1]}))
	mustSync(t, b.dp, hashedState(sched, flags, []string{maglevBackends[2], maglevBackends[0], maglevBackends[3], maglevBackends[1]}))
	onA, onB := a.backendsOf(t, first, flows), b.backendsOf(t, first, flows)
	for i := range onA {
		r.share[onA[i]]++
		if onA[i] != onB[i] {
			r.across++
		}
	}
	left := maglevBackends[:3]
	mustSync(t, a.dp, hashedState(sched, flags, left))
	c := newMaglevNode(t)
	mustSync(t, c.dp, hashedState(sched, flags, left))
	newOnA, newOnC := a.backendsOf(t, first+flows, flows), c.backendsOf(t, first+flows, flows)
	for i := range newOnA {
		if newOnA[i] != newOnC[i] {
			r.afterDrain++
		}
	}
	onC := c.backendsOf(t, first, flows)
	for i := range onA {
		if onC[i] == maglevBackends[3] {
			t.Errorf("%s: flow from port %d reached the removed backend through node c", sched, first+i)
		}
		if onA[i] != maglevBackends[3] {
			r.others++
			if onC[i] != onA[i] {
				r.moved++
			}
		}
	}
	t.Logf("%s: 400 flows, shares %v; %d reach another backend through a node that learned the backends in another order; "+
		"with a backend gone, %d of 400 new flows differ between a draining node and a fresh one, and %d of the %d other flows move (%.1f%%)",
		sched, r.share, r.across, r.afterDrain, r.moved, r.others, 100*float64(r.moved)/float64(r.others))
	return r
}

// Maglev hashing (mh) gives ECMP-fed load balancers consistency: the same
// Service programmed on several nodes sends the same client 5-tuple to the
// same backend on all, whatever order each node learned the backends in,
// so a flow that a route change moves to another node keeps its backend;
// and removing a backend moves its own flows and few others (Maglev's
// minimal disruption). Source hashing (sh), measured the same way in the
// same run, is the baseline.
func TestMaglevConsistentAcrossNodes(t *testing.T) {
	testutil.RequireVM(t)
	mh := runHashing(t, "mh", model.MHPort)
	sh := runHashing(t, "sh", model.SHPort)
	if len(mh.share) != len(maglevBackends) || mh.across != 0 || mh.afterDrain != 0 {
		t.Errorf("mh: shares %v, %d flows differ across nodes, %d after the drain; want every backend used and none", mh.share, mh.across, mh.afterDrain)
	}
	// Maglev's tables trade a few moved flows for balance.
	if mh.moved*10 > mh.others || mh.moved >= sh.moved {
		t.Errorf("mh moved %d of %d flows whose backend stayed (sh: %d); Maglev should move few, and fewer than sh", mh.moved, mh.others, sh.moved)
	}
}
