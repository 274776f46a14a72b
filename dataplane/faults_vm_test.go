//go:build vmtest

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// injector fails a fraction of the kernel changes the dataplane sends,
// through a fault.Hook on the sync's context, with ENOBUFS, EBUSY or ENOMEM in turn. Reads are
// left alone: a failed read fails the whole reading of the kernel, which
// the dataplane retries whole, and a read of a large table is hundreds of
// requests.
type injector struct {
	mu       sync.Mutex
	rng      *rand.Rand
	rate     float64
	on       bool
	asked    int
	injected map[unix.Errno]int
}

func newInjector(rate float64) *injector {
	return &injector{rng: rand.New(rand.NewPCG(9, 9)), rate: rate, on: true, injected: map[unix.Errno]int{}}
}

// isChange reports whether a request changes the kernel.
func isChange(pkg, req string) bool {
	switch pkg {
	case "ipvs":
		return !strings.HasPrefix(req, "get")
	case "ipset":
		return req == "create" || req == "add" || req == "delete" || req == "destroy" || req == "flush"
	case "dummy":
		return req == "ensure" || req == "bind" || req == "unbind" || req == "delete"
	case "conntrack":
		return req == "delete"
	}
	return pkg == "nftables"
}

func (f *injector) fault(pkg, req string) error {
	if !isChange(pkg, req) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return nil
	}
	f.asked++
	if f.rng.Float64() >= f.rate {
		return nil
	}
	errno := []unix.Errno{unix.ENOBUFS, unix.EBUSY, unix.ENOMEM}[f.rng.IntN(3)]
	f.injected[errno]++
	return errno
}

func (f *injector) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
}

// faultServices is a few hundred services of every shape.
func faultServices() []ServicePort {
	services := append(vmServices(), fiftyServices()...)
	for i := range 300 {
		s := ServicePort{
			Name:       ServicePortName{Namespace: "faults", Name: fmt.Sprintf("svc-%03d", i), Port: "p"},
			Protocol:   []Protocol{TCP, UDP}[i%2],
			Port:       80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)})},
		}
		if i%10 == 0 {
			s.NodePort = uint16(31000 + i)
		}
		for e := range 3 {
			s.Endpoints = append(s.Endpoints, ready(netip.AddrFrom4([4]byte{10, 244, byte(10 + e), byte(i)}).String(), 8080, "node-b"))
		}
		services = append(services, s)
	}
	return services
}

// changedServices removes a third of the services, moves endpoints and
// adds new services, so that a sync deletes, updates and creates.
func changedServices() []ServicePort {
	var out []ServicePort
	for i, s := range faultServices() {
		switch {
		case i%3 == 0:
			continue
		case i%3 == 1 && len(s.Endpoints) > 1:
			s.Endpoints = slices.Clone(s.Endpoints[1:])
		}
		out = append(out, s)
	}
	for i := range 40 {
		s := svc("faults", fmt.Sprintf("new-%d", i), "", TCP, 443, netip.AddrFrom4([4]byte{10, 101, 0, byte(i)}).String())
		s.ExternalIPs = []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 101, byte(i)})}
		s.Endpoints = []Endpoint{ready("10.244.9.2", 8443, "node-b")}
		out = append(out, s)
	}
	return out
}

// kernelSnapshot is what the CLI tools print of a namespace, in an order
// that does not depend on the order of programming: IPVS in ipvsadm's
// save format, the sets in ipset's, the device's addresses and the rule
// tables.
func kernelSnapshot(t *testing.T, ns *testutil.NetNS) map[string]string {
	t.Helper()
	sorted := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	var addrs []string
	for _, line := range strings.Split(ns.Run(t, "ip", "-o", "addr", "show", "dev", DefaultDevice), "\n") {
		if f := strings.Fields(line); len(f) > 3 {
			addrs = append(addrs, f[2]+" "+f[3])
		}
	}
	slices.Sort(addrs)
	return map[string]string{
		"ipvsadm -Sn": sorted(ns.Run(t, "ipvsadm", "-Sn")),
		// A hash set's seed is random.
		"ipset save":    sorted(initval.ReplaceAllString(ns.Run(t, "ipset", "save"), "")),
		"ip addr":       strings.Join(addrs, "\n"),
		"nft list":      ns.Run(t, "nft", "list", "ruleset"),
		"ipset list -n": sorted(ns.Run(t, "ipset", "list", "-n")),
	}
}

var initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

func compareSnapshots(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if got[k] != want[k] {
			g, w := strings.Split(got[k], "\n"), strings.Split(want[k], "\n")
			var missing, extra []string
			for _, l := range w {
				if !slices.Contains(g, l) {
					missing = append(missing, l)
				}
			}
			for _, l := range g {
				if !slices.Contains(w, l) {
					extra = append(extra, l)
				}
			}
			t.Errorf("%s: %s differs from a clean run's: missing %q, extra %q", what, k, missing, extra)
		}
	}
}

// boundWithoutVirtual lists the addresses on the device that no virtual
// server uses: a VIP left bound by a half-done change.
func boundWithoutVirtual(t *testing.T, snap map[string]string) []string {
	var out []string
	for _, a := range strings.Split(snap["ip addr"], "\n") {
		f := strings.Fields(a)
		if len(f) < 2 {
			continue
		}
		ip, _, _ := strings.Cut(f[1], "/")
		if p, err := netip.ParseAddr(ip); err == nil && p.Is6() {
			ip = "[" + ip + "]"
		}
		if !strings.Contains(snap["ipvsadm -Sn"], " "+ip+":") {
			out = append(out, f[1])
		}
	}
	return out
}

// With a fifth of the kernel changes failing with ENOBUFS, EBUSY or
// ENOMEM, syncs still converge, and the kernel ends up exactly as a clean
// run leaves it: no address bound without its virtual server, no set or
// entry left over. Both a first sync and a sync that deletes, updates and
// creates are checked.
func TestDataplaneConvergesUnderInjectedFaults(t *testing.T) {
	testutil.RequireVM(t)
	for _, p := range []string{"ipvsadm", "ipset", "ip", "nft"} {
		testutil.RequireProgram(t, p)
	}
	const rate = 0.2
	steps := []struct {
		name     string
		services []ServicePort
	}{
		{"first sync", faultServices()},
		{"changes", changedServices()},
	}

	clean := testutil.NewNetNS(t)
	cd := newDataplane(t, clean)
	faulty := testutil.NewNetNS(t)
	inj := newInjector(rate)
	fd, err := New(&Config{NetNS: faulty.FD(), DrainTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	ctx := fault.With(context.Background(), inj.fault)

	for _, step := range steps {
		state := &State{Node: vmNode(), Services: step.services}
		mustSync(t, cd, state)
		// Drained real servers go at the next sync, once their (no)
		// connections are seen.
		mustSync(t, cd, state)
		want := kernelSnapshot(t, clean)

		inj.set(true)
		start := time.Now()
		syncs, retries, ops, failed := 0, 0, 0, 0
		for syncs < 30 {
			syncs++
			res, err := fd.Sync(ctx, state)
			if err != nil {
				t.Logf("sync %d: %v", syncs, err)
				continue
			}
			retries += res.Retries
			ops += len(res.Plan.Ops)
			failed = len(res.Errors)
			if failed == 0 && len(res.Plan.Ops) == 0 {
				break
			}
		}
		took := time.Since(start)
		inj.mu.Lock()
		asked, injected := inj.asked, fmt.Sprint(inj.injected)
		inj.mu.Unlock()
		inj.set(false)
		t.Logf("%s: %d services, fault rate %.0f%%: %d of %d kernel changes failed %s; converged in %d syncs, %d retry rounds, %d operations planned, %v",
			step.name, len(step.services), rate*100, sumInjected(inj), asked, injected, syncs, retries, ops, took.Round(time.Millisecond))
		if failed != 0 {
			t.Fatalf("%s: not converged after %d syncs: %d errors left", step.name, syncs, failed)
		}

		// A full read of the kernel without faults finds nothing to do.
		fd.Resync()
		if res := mustSync(t, fd, state); len(res.Plan.Ops) != 0 {
			t.Errorf("%s: after converging, a full sync still plans:\n%s", step.name, res.Plan)
		}
		got := kernelSnapshot(t, faulty)
		compareSnapshots(t, step.name, got, want)
		if left := boundWithoutVirtual(t, got); len(left) > 0 {
			t.Errorf("%s: addresses bound without a virtual server: %v", step.name, left)
		}
		inj.mu.Lock()
		inj.asked, inj.injected = 0, map[unix.Errno]int{}
		inj.mu.Unlock()
	}
}

func sumInjected(f *injector) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.injected {
		n += c
	}
	return n
}

// hideScheduler makes the guest's kernel lack the IPVS scheduler sched:
// the guest autoloads modules from its own disposable /lib/modules, so
// moving the module's file away makes loading it fail. The test fails if
// the module is loaded already.
func hideScheduler(t *testing.T, sched string) {
	t.Helper()
	files, _ := filepath.Glob("/lib/modules/*/kernel/net/netfilter/ipvs/ip_vs_" + sched + ".ko*")
	testutil.Require(t, len(files) == 1, "the guest's module ip_vs_"+sched)
	if loaded, err := os.ReadFile("/proc/modules"); err != nil || strings.Contains(string(loaded), "ip_vs_"+sched+" ") {
		t.Fatalf("ip_vs_%s is loaded already (%v)", sched, err)
	}
	hidden := files[0] + ".hidden"
	if err := os.Rename(files[0], hidden); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(hidden, files[0]) })
}

// A service whose scheduler the kernel refuses fails alone: the others
// are programmed, the failure names the virtual server and keeps the
// errno, and it is not retried within the sync, as ENOENT is not
// transient.
func TestDataplaneKernelRejectsScheduler(t *testing.T) {
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ipvsadm")
	const sched = "dh"
	hideScheduler(t, sched)
	ns := testutil.NewNetNS(t)
	d := newDataplane(t, ns)
	services := faultServices()[:100]
	bad := svc("faults", "bad-scheduler", "", TCP, 80, "10.102.0.1")
	bad.Scheduler = sched
	bad.Endpoints = []Endpoint{ready("10.244.9.2", 8080, "node-b")}
	state := &State{Node: vmNode(), Services: append(services, bad)}
	good := Build(&State{Node: vmNode(), Services: services})

	for round := range 2 {
		res, err := d.Sync(context.Background(), state)
		if err != nil {
			t.Fatal(err)
		}
		// The virtual server's creation fails, and so do its real
		// servers' for want of it.
		if len(res.Errors) == 0 || res.Retries != 0 {
			t.Fatalf("sync %d: %d errors, %d retries; want the bad scheduler's, not retried: %v", round, len(res.Errors), res.Retries, res.Errors)
		}
		if err := res.Errors[0]; !errors.As(err, new(*OpError)) || !errors.Is(err, ipvs.ErrNoScheduler) || !errors.Is(err, unix.ENOENT) {
			t.Errorf("sync %d: the failure %v is not ErrNoScheduler with ENOENT", round, err)
		}
		for _, err := range res.Errors {
			if !strings.Contains(err.Error(), "10.102.0.1:80") {
				t.Errorf("sync %d: a failure that is not the bad service's: %v", round, err)
			}
		}
		t.Logf("sync %d: %d errors, the first: %v", round, len(res.Errors), res.Errors[0])
	}
	out := ns.Run(t, "ipvsadm", "-Sn")
	if n := strings.Count(out, "-A "); n != len(good.Kernel.Virtual) {
		t.Errorf("%d virtual servers programmed, want the %d of the good services", n, len(good.Kernel.Virtual))
	}
	reals := 0
	for _, rs := range good.Kernel.Reals {
		reals += len(rs)
	}
	if n := strings.Count(out, "-a "); n != reals {
		t.Errorf("%d real servers programmed, want the %d of the good services", n, reals)
	}
	if strings.Contains(out, "10.102.0.1") {
		t.Errorf("the bad service's virtual server exists:\n%s", out)
	}
	// Its address is bound as its cluster IP's always is: as with
	// kube-proxy, the node then answers it itself (a reset) rather than
	// dropping it.
	bound := strings.Contains(ns.Run(t, "ip", "-o", "addr", "show", "dev", DefaultDevice), " 10.102.0.1/32 ")
	t.Logf("%d virtual servers and %d real servers of the good services programmed; the bad one's address bound: %v", len(good.Kernel.Virtual), reals, bound)
}
