//go:build vmtest

package dataplane

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
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
func faultServices() []model.ServicePort {
	services := append(vmServices(), fiftyServices()...)
	for i := range 300 {
		s := model.ServicePort{
			Name:       model.ServicePortName{Namespace: "faults", Name: fmt.Sprintf("svc-%03d", i), Port: "p"},
			Protocol:   []inet.Protocol{inet.TCP, inet.UDP}[i%2],
			Port:       80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)})},
		}
		if i%10 == 0 {
			s.NodePort = uint16(31000 + i)
		}
		for e := range 3 {
			s.Endpoints = append(s.Endpoints, fixture.Ready(netip.AddrFrom4([4]byte{10, 244, byte(10 + e), byte(i)}).String(), 8080, "node-b"))
		}
		services = append(services, s)
	}
	return services
}

// changedServices removes a third of the services, moves endpoints and
// adds new services, so that a sync deletes, updates and creates.
func changedServices() []model.ServicePort {
	var out []model.ServicePort
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
		s := fixture.Svc("faults", fmt.Sprintf("new-%d", i), "", inet.TCP, 443, netip.AddrFrom4([4]byte{10, 101, 0, byte(i)}).String())
		s.ExternalIPs = []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 101, byte(i)})}
		s.Endpoints = []model.Endpoint{fixture.Ready("10.244.9.2", 8443, "node-b")}
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
		services []model.ServicePort
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
		state := &model.State{Node: vmNode(), Services: step.services}
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
			ops += res.Plan.Len()
			failed = len(res.Errors)
			if failed == 0 && res.Plan.Len() == 0 {
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
		if res := mustSync(t, fd, state); res.Plan.Len() != 0 {
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

// A service whose scheduler the kernel lacks is programmed with the
// node's: the dataplane tries the scheduler once with a probe, remembers
// the answer, and reports the fallback on every sync while it lasts.
func TestDataplaneKernelLacksScheduler(t *testing.T) {
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ipvsadm")
	const sched = "dh"
	hideScheduler(t, sched)
	ns := testutil.NewNetNS(t)
	d := newDataplane(t, ns)
	services := faultServices()[:100]
	bad := fixture.Svc("faults", "bad-scheduler", "", inet.TCP, 80, "10.102.0.1")
	bad.Scheduler = sched
	bad.Endpoints = []model.Endpoint{fixture.Ready("10.244.9.2", 8080, "node-b")}
	state := &model.State{Node: vmNode(), Services: append(services, bad)}
	want := plan.Build(&model.State{Node: vmNode(), Services: append(slices.Clone(services), svcWithout(bad))}, nftrules.Render)

	for round := range 2 {
		res, err := d.Sync(context.Background(), state)
		if err != nil {
			t.Fatal(err)
		}
		var se *model.SchedulerError
		if len(res.Errors) != 1 || !errors.As(res.Errors[0], &se) || !errors.Is(se, ErrSchedulerNotSupported) || se.Service != bad.Name {
			t.Fatalf("sync %d: errors %v; want the bad service's scheduler fallback alone", round, res.Errors)
		}
	}
	out := ns.Run(t, "ipvsadm", "-Sn")
	if n := strings.Count(out, "-A "); n != len(want.Kernel.Virtual) {
		t.Errorf("%d virtual servers programmed, want %d", n, len(want.Kernel.Virtual))
	}
	if !strings.Contains(out, "-A -t 10.102.0.1:80 -s "+want.Kernel.Virtual[plan.VirtualKey{Addr: fixture.IP("10.102.0.1"), Port: 80, Protocol: inet.TCP}].Scheduler) {
		t.Errorf("the bad service's virtual server does not have the node's scheduler:\n%s", out)
	}
	if strings.Contains(out, "198.51.100.0") {
		t.Errorf("the scheduler probe was left behind:\n%s", out)
	}
}

// svcWithout returns a service port without its scheduler.
func svcWithout(s model.ServicePort) model.ServicePort {
	s.Scheduler = ""
	return s
}

// A sync whose rules cannot be written creates no new virtual server and
// binds no new address, which would draw traffic without its masquerade
// and firewall rules; what was programmed keeps serving. The next sync
// that writes the rules programs the rest.
func TestDataplaneRulesFailureHoldsBack(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node)
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{webService()}}
	mustSync(t, d, state)

	// A node setting that changes the rules, and a new Service, in a sync
	// whose rules transaction fails.
	state.Node.MasqueradeAll = true
	extra := fixture.Svc("default", "extra", "", inet.TCP, 81, "10.96.0.30")
	extra.Endpoints = webService().Endpoints
	state.Services = append(state.Services, extra)
	failing := fault.With(context.Background(), func(pkg, req string) error {
		if pkg == "nftables" && req == "flush" {
			return errors.New("injected: the rules transaction fails")
		}
		return nil
	})
	res, err := d.Sync(failing, state)
	if err != nil {
		t.Fatal(err)
	}
	var held *HeldBackError
	if !res.RulesFailed || !slices.ContainsFunc(res.Errors, func(e error) bool { return errors.As(e, &held) }) {
		t.Fatalf("rules failed %v, errors %v: want the failure and what it held back", res.RulesFailed, res.Errors)
	}
	if out := n.node.Run(t, "ipvsadm", "-Ln"); strings.Contains(out, "10.96.0.30:81") {
		t.Errorf("the new Service's virtual server was created without its rules:\n%s", out)
	}
	if out := n.node.Run(t, "ip", "-o", "addr", "show", "dev", DefaultDevice); strings.Contains(out, "10.96.0.30") {
		t.Errorf("the new Service's address was bound without its rules:\n%s", out)
	}
	if reply, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
		t.Errorf("the Service programmed before stopped answering: %q, %v", reply, err)
	}

	res = mustSync(t, d, state)
	if res.RulesFailed {
		t.Error("rules failed again without a fault")
	}
	if reply, err := n.client.DialTCP("", "10.96.0.30:81", 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
		t.Errorf("the new Service after the rules were written: %q, %v", reply, err)
	}
}
