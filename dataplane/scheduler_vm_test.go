//go:build vmtest

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

// dialEcho opens a long-lived TCP connection from ns through a service to
// an echo server, closed when the test ends.
func dialEcho(t *testing.T, ns *testutil.NetNS, addr string) *testutil.EchoConn {
	t.Helper()
	return testutil.Open(t, func() (*testutil.EchoConn, error) { return ns.DialEcho(addr, 2*time.Second) })
}

// echoTimeout is how long a line's echo may take.
const echoTimeout = 3 * time.Second

// hasModule reports whether the running kernel has a module.
func hasModule(t *testing.T, name string) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	_, err := os.Stat(filepath.Join("/lib/modules", release, "kernel/net/netfilter/ipvs", name+".ko"))
	return err == nil
}

// virtualLine returns the ipvsadm -Sn line of a virtual server.
func virtualLine(t *testing.T, ns *testutil.NetNS, vs string) string {
	t.Helper()
	for _, l := range strings.Split(ns.Run(t, "ipvsadm", "-Sn"), "\n") {
		if strings.HasPrefix(l, "-A -t "+vs+" ") {
			return l
		}
	}
	t.Fatalf("no virtual server %s", vs)
	return ""
}

// A Service's scheduler and flags (its annotations) reach the kernel, and
// a change of them edits the virtual server in place: the open
// connection keeps working, the virtual server's counters go on.
func TestPerServiceSchedulerInPlace(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node)
	n.b1.ServeEcho(t, "10.244.1.2:9090")
	n.b2.ServeEcho(t, "10.244.2.2:9090")
	s := fixture.Svc("default", "echo", "", inet.TCP, 90, "10.96.0.90")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 9090, "node-a"), fixture.Ready("10.244.2.2", 9090, "node-b")}
	s.Scheduler = "rr"
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{s}}
	mustSync(t, d, state)
	conn := dialEcho(t, n.client, "10.96.0.90:90")
	if err := conn.Echo("first", echoTimeout); err != nil {
		t.Fatal(err)
	}

	for i, step := range []struct {
		sched string
		flags model.SchedulerFlags
		want  string // what ipvsadm -Sn prints after the address
	}{
		{"mh", model.MHFallback | model.MHPort, "-s mh -b mh-fallback,mh-port"},
		{"sh", model.SHPort, "-s sh -b sh-port"},
		{"sh", model.SchedFlag1 | model.SchedFlag2, "-s sh -b sh-fallback,sh-port"},
		{"lc", 0, "-s lc"},
	} {
		state.Services[0].Scheduler, state.Services[0].SchedulerFlags = step.sched, step.flags
		res := mustSync(t, d, state)
		plan := res.Plan.String()
		if res.Plan.Len() != 1 || !strings.Contains(plan, "edit") {
			t.Errorf("step %d (%s): want one in-place edit, got:\n%s", i, step.want, plan)
		}
		if l := virtualLine(t, n.node, "10.96.0.90:90"); !strings.HasSuffix(strings.TrimSpace(l), step.want) {
			t.Errorf("step %d: the kernel has %q, want %q at its end", i, l, step.want)
		}
		if err := conn.Echo(fmt.Sprintf("after %s", step.want), echoTimeout); err != nil {
			t.Errorf("step %d (%s): the open connection broke: %v", i, step.want, err)
		}
	}
	// twos is in the kernel from 6.7 on: on the kernels before, the
	// Service falls back to the node's scheduler and says so.
	state.Services[0].Scheduler, state.Services[0].SchedulerFlags = "twos", 0
	res, err := d.Sync(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	var se *model.SchedulerError
	line := virtualLine(t, n.node, "10.96.0.90:90")
	if hasModule(t, "ip_vs_twos") {
		if len(res.Errors) > 0 || !strings.HasSuffix(strings.TrimSpace(line), "-s twos") {
			t.Errorf("twos on a kernel that has it: %q, errors %v", line, res.Errors)
		}
	} else if len(res.Errors) != 1 || !errors.As(res.Errors[0], &se) || !strings.HasSuffix(strings.TrimSpace(line), "-s "+se.Fallback) {
		t.Errorf("twos on a kernel without it: %q, errors %v; want the node's scheduler and one SchedulerError", line, res.Errors)
	}
	if err := conn.Echo("after twos", echoTimeout); err != nil {
		t.Errorf("twos: the open connection broke: %v", err)
	}

	// The connection counter counts since the virtual server was made
	// (the kernel folds its per-CPU counters in every 2 s): 0 would mean
	// it was made again after the connection opened.
	var conns string
	for range 10 {
		for _, l := range strings.Split(n.node.Run(t, "ipvsadm", "-Ln", "--stats", "--exact", "-t", "10.96.0.90:90"), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "TCP" {
				conns = f[2]
			}
		}
		if conns != "0" {
			break
		}
		time.Sleep(time.Second)
	}
	if conns != "1" {
		t.Errorf("the virtual server counts %s connections, want the 1 opened before the changes", conns)
	}
}

// A Service's own drain bound (its ipvsplane.io/drain-timeout) replaces
// the node's for its real servers: a removed endpoint with an open
// connection goes after the Service's bound, while another Service's,
// under the node's bound, stays.
func TestPerServiceDrainTimeout(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node) // the node's bound: 10 s
	n.b2.ServeEcho(t, "10.244.2.2:9090")
	short := fixture.Svc("default", "short", "", inet.TCP, 91, "10.96.0.91")
	short.DrainTimeout = time.Second
	long := fixture.Svc("default", "long", "", inet.TCP, 92, "10.96.0.92")
	for _, s := range []*model.ServicePort{&short, &long} {
		s.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.2", 9090, "node-b")}
	}
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{short, long}}
	mustSync(t, d, state)
	for _, addr := range []string{"10.96.0.91:91", "10.96.0.92:92"} {
		if err := dialEcho(t, n.client, addr).Echo("hold", echoTimeout); err != nil {
			t.Fatal(err)
		}
	}
	state.Services[0].Endpoints, state.Services[1].Endpoints = nil, nil
	mustSync(t, d, state)
	time.Sleep(2 * time.Second)
	mustSync(t, d, state)
	out := n.node.Run(t, "ipvsadm", "-Sn")
	if strings.Contains(out, "-a -t 10.96.0.91:91 -r 10.244.2.2:9090") {
		t.Errorf("the real server of the Service with a 1 s bound is still draining after 2 s:\n%s", out)
	}
	if !strings.Contains(out, "-a -t 10.96.0.92:92 -r 10.244.2.2:9090") {
		t.Errorf("the real server under the node's 10 s bound went after 2 s:\n%s", out)
	}
}
