//go:build vmtest

package e2e

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kubeProxyFlow is a long-lived flow through a service: a TCP connection
// that sends a numbered line every 50 ms and checks that its echo comes
// back, or a UDP socket that does the same with datagrams. It counts
// round trips and remembers the first failure and the longest silence.
type kubeProxyFlow struct {
	name string
	mu   sync.Mutex
	ok   int
	lost int // UDP datagrams whose echo did not come back
	err  error
	last time.Time
	gap  time.Duration
	stop chan struct{}
	done chan struct{}
	// local is the flow's client address and port, to find it in IPVS.
	local string
}

// flowInterval is how often a flow sends; flowTimeout is how long a flow
// waits for an echo before it counts it lost: long, because an emulated
// guest stalls for seconds while a proxy starts, for every flow at once.
const (
	flowInterval = 50 * time.Millisecond
	flowTimeout  = 10 * time.Second
)

// startTCPFlow connects from ns to addr and starts sending.
func startTCPFlow(t *testing.T, ns *testutil.NetNS, name, addr string) *kubeProxyFlow {
	t.Helper()
	c, err := ns.DialEcho(addr, 10*time.Second)
	if err != nil {
		t.Fatalf("flow %s to %s: %v", name, addr, err)
	}
	return startFlow(t, name, c, func(seq int) (bool, error) {
		if err := c.Echo(fmt.Sprintf("%s %d", name, seq), flowTimeout); err != nil {
			return false, fmt.Errorf("line %d: %w", seq, err)
		}
		return true, nil
	})
}

// startUDPFlow sends datagrams from ns to addr from one socket.
func startUDPFlow(t *testing.T, ns *testutil.NetNS, name, addr string) *kubeProxyFlow {
	t.Helper()
	c, err := ns.DialUDP("", addr)
	if err != nil {
		t.Fatalf("flow %s to %s: %v", name, addr, err)
	}
	buf := make([]byte, 512)
	return startFlow(t, name, c, func(seq int) (bool, error) {
		msg := fmt.Sprintf("%s %d", name, seq)
		if _, err := c.Write([]byte(msg)); err != nil {
			return false, fmt.Errorf("send %d: %w", seq, err)
		}
		c.SetReadDeadline(time.Now().Add(flowTimeout))
		// Skip late echoes of earlier datagrams.
		for {
			n, err := c.Read(buf)
			if err != nil {
				return false, nil
			}
			if string(buf[:n]) == msg {
				return true, nil
			}
		}
	})
}

// startFlow runs a flow on c, which it closes at the flow's end: every
// flowInterval a round trip, which comes back (ok), is lost (neither ok
// nor an error) or fails, which ends the flow.
func startFlow(t *testing.T, name string, c net.Conn, roundTrip func(seq int) (ok bool, err error)) *kubeProxyFlow {
	f := &kubeProxyFlow{name: name, stop: make(chan struct{}), done: make(chan struct{}), last: time.Now(), local: c.LocalAddr().String()}
	go func() {
		defer close(f.done)
		defer c.Close()
		tick := time.NewTicker(flowInterval)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
			switch ok, err := roundTrip(seq); {
			case err != nil:
				f.fail(err)
				return
			case ok:
				f.success()
			default:
				f.mu.Lock()
				f.lost++
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(f.end)
	return f
}

func (f *kubeProxyFlow) success() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.gap = max(f.gap, now.Sub(f.last))
	f.ok++
	f.last = now
}

func (f *kubeProxyFlow) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// newPhase starts measuring the longest silence afresh, so that it belongs
// to what the test does next.
func (f *kubeProxyFlow) newPhase() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gap = 0
}

// end stops the flow and waits for it.
func (f *kubeProxyFlow) end() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// flowResult is what a flow saw so far.
type flowResult struct {
	ok, lost int
	err      error
	// last is when the last round trip ended; gap the longest silence.
	last time.Time
	gap  time.Duration
}

func (f *kubeProxyFlow) result() flowResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return flowResult{ok: f.ok, lost: f.lost, err: f.err, last: f.last, gap: f.gap}
}

// echoOnce opens a new connection from ns to addr and checks one echo.
func echoOnce(ns *testutil.NetNS, addr string) error {
	c, err := ns.DialEcho(addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Echo("new", 5*time.Second)
}

// ipvsConnections returns, from `ipvsadm -Lnc`, the IPVS connection
// entries of the given client addresses ("192.168.50.2:41234"), as
// "PROTO CLIENT -> VIRTUAL -> REAL".
func ipvsConnections(t *testing.T, clients []string) map[string]string {
	t.Helper()
	want := map[string]bool{}
	for _, c := range clients {
		want[c] = true
	}
	out := map[string]string{}
	// pro expire state       source             virtual            destination
	for _, l := range lines(runTool(t, "ipvsadm", "-Lnc")) {
		f := strings.Fields(l)
		if len(f) == 6 && want[f[3]] {
			out[f[3]] = f[0] + " " + f[3] + " -> " + f[4] + " -> " + f[5]
		}
	}
	return out
}

// realServerStats returns, from `ipvsadm -Ln --stats`, the connection
// count each real server of each virtual server has had
// ("TCP 10.96.0.10:80 -> 10.244.1.2:8080" to its Conns): the counter is
// the server's since it was created, so a drop means it was recreated.
func realServerStats(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	vs := ""
	for _, l := range lines(runTool(t, "ipvsadm", "-Ln", "--stats", "--exact")) {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
			vs = f[0] + " " + f[1]
		case len(f) >= 3 && f[0] == "->" && vs != "":
			var n uint64
			fmt.Sscan(f[2], &n)
			out[vs+" -> "+f[1]] = n
		}
	}
	return out
}
