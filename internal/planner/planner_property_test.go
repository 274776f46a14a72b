package planner

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// A port that names one virtual server twice (its node port on a node
// address it also lists as an external IP) and loses one of the two claims
// to another port must never end up among its own losing claimants: the
// next change of it panicked in the index, on every node listing that
// address.
func TestPortNamingOneVirtualServerTwice(t *testing.T) {
	nodeIP := fixture.Node().Addresses[0].String()
	b := fixture.Svc("t", "b", "", inet.TCP, 30080, "10.96.0.20")
	b.NodePort = 30080
	b.ExternalIPs = fixture.IPs(nodeIP)
	b.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 8080, "node-a")}
	a := fixture.Svc("t", "a", "", inet.TCP, 30080, "10.96.0.21")
	a.ExternalIPs = fixture.IPs(nodeIP)
	a.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.7", 8080, "node-b")}
	contested := VirtualKey{Addr: fixture.IP(nodeIP), Port: 30080, Protocol: inet.TCP}

	p := NewPlanner(nftrules.Render)
	p.Update(&model.State{Node: fixture.Node(), Services: []model.ServicePort{a, b}})
	restarted := b
	restarted.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.6", 8080, "node-a")}
	p.UpdateChanges([]model.Change{{Name: b.Name, Port: &restarted}})
	// b's node port beats a's external IP, whatever the order.
	if _, owners := p.Desired(); owners[contested] != b.Name {
		t.Errorf("%s is %v's, want %v's", contested, owners[contested], b.Name)
	}
	p.UpdateChanges([]model.Change{{Name: b.Name}})
	if desired, owners := p.Desired(); owners[contested] != a.Name || desired.Reals[contested][0].Addr != fixture.IP("10.244.2.7") {
		t.Errorf("after b left, %s is %v's with %v", contested, owners[contested], desired.Reals[contested])
	}
}

// The planner's incremental updates end exactly where a full build of the
// same final state ends, whatever the changes and their order, and never
// panic: random small clusters whose service ports claim each other's
// addresses (cluster, external, load-balancer and node-port claims, the
// API server's service among them), changed in random batches with
// removals and re-adds. IPVSPLANE_PLANNER_STATES sets how many random
// runs (default 2,000); make fuzz explores further (FuzzPlannerMatchesBuild).
func TestPlannerMatchesBuildOnRandomStates(t *testing.T) {
	runs := 2000
	if v := os.Getenv("IPVSPLANE_PLANNER_STATES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("IPVSPLANE_PLANNER_STATES=%q: %v", v, err)
		}
		runs = n
	}
	for seed := range uint64(runs) {
		if msg := checkPlannerRun(newChooser(nil, seed)); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
	}
}

func FuzzPlannerMatchesBuild(f *testing.F) {
	for seed := range uint64(8) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], seed)
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var seed uint64
		if len(data) >= 8 {
			seed = binary.LittleEndian.Uint64(data)
		}
		if msg := checkPlannerRun(newChooser(data, seed)); msg != "" {
			t.Fatal(msg)
		}
	})
}

// checkPlannerRun plays one random run and returns what went wrong, or "".
// Each step's plan is recorded in a fake kernel; after it, the planner's
// desired state, owners, drain bounds and errors must equal a fresh
// planner's for the same state, and a full plan against the kernel must
// find nothing left to do.
func checkPlannerRun(c *chooser) (msg string) {
	var steps []string
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("panic: %v\nsteps:\n%s", r, strings.Join(steps, "\n"))
		}
	}()
	node := c.node()
	current := map[model.ServicePortName]model.ServicePort{}
	for range c.intn(6) {
		sp := c.servicePort()
		current[sp.Name] = sp
	}
	p, kernel := NewPlanner(propertyRules), NewKernelState()
	scope, _ := p.Update(&model.State{Node: node, Services: portsOf(current)})
	steps = append(steps, "full: "+describePorts(current))
	recordPlan(p, kernel, scope)
	var foreign map[VirtualKey]bool
	for step := range 1 + c.intn(6) {
		if c.intn(4) == 0 {
			// Another program's virtual servers come and go; a
			// change that matters rebuilds, as the dataplane asks.
			foreign = c.foreign()
			steps = append(steps, fmt.Sprintf("step %d: foreign %v", step, slices.SortedFunc(maps.Keys(foreign), VirtualKey.compare)))
			if p.SetForeign(foreign) {
				scope, _ = p.Update(&model.State{Node: node, Services: portsOf(current)})
				recordPlan(p, kernel, scope)
			}
		}
		changes := c.changes(current)
		steps = append(steps, fmt.Sprintf("step %d: %s", step, describeChanges(changes)))
		if c.intn(4) == 0 {
			scope, _ = p.Update(&model.State{Node: node, Services: portsOf(current)})
			recordPlan(p, kernel, scope)
		} else {
			for len(changes) > 0 {
				n := 1 + c.intn(len(changes))
				scope, _ = p.UpdateChanges(changes[:n])
				recordPlan(p, kernel, scope)
				changes = changes[n:]
			}
		}
		if diff := compareWithFresh(p, kernel, &model.State{Node: node, Services: portsOf(current)}, foreign); diff != "" {
			return diff + "\nsteps:\n" + strings.Join(steps, "\n")
		}
	}
	return ""
}

// recordPlan records in kernel what a flawless apply of the scope's plan
// leaves.
func recordPlan(p *Planner, kernel *KernelState, scope Scope) {
	desired, owners := p.Desired()
	for op := range Diff(DiffInputs{Observed: kernel, Desired: desired, Services: owners, Scope: scope}).All() {
		kernel.Record(op)
	}
}

// compareWithFresh returns how p differs from a planner given s and
// another program's virtual servers (foreign) at once.
func compareWithFresh(p *Planner, kernel *KernelState, s *model.State, foreign map[VirtualKey]bool) string {
	fresh := NewPlanner(propertyRules)
	fresh.SetForeign(foreign)
	_, wantErrs := fresh.Update(s)
	want, wantOwners := fresh.Desired()
	got, gotOwners := p.Desired()
	if !reflect.DeepEqual(gotOwners, wantOwners) {
		return fmt.Sprintf("owners differ:\nincremental %v\nfull        %v", gotOwners, wantOwners)
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("desired states differ; a plan from the incremental to the full one:\n%s", Diff(DiffInputs{Observed: got, Desired: want, Services: wantOwners, Scope: FullScope}))
	}
	if a, b := p.DrainTimeouts(), fresh.DrainTimeouts(); !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("drain bounds differ: incremental %v, full %v", a, b)
	}
	if a, b := p.ClaimedByAnyone(), fresh.ClaimedByAnyone(); !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("claims by external or load-balancer addresses differ: incremental %v, full %v", a, b)
	}
	for i := range s.Services {
		name := s.Services[i].Name
		if a, b := p.Claims(name), fresh.Claims(name); !slices.Equal(a, b) {
			return fmt.Sprintf("%s's claims differ: incremental %v, full %v", name, a, b)
		}
	}
	_, gotErrs := p.UpdateChanges(nil)
	if a, b := fmt.Sprint(gotErrs), fmt.Sprint(wantErrs); a != b {
		return fmt.Sprintf("errors differ:\nincremental %s\nfull        %s", a, b)
	}
	if rest := Diff(DiffInputs{Observed: kernel, Desired: want, Services: wantOwners, Scope: FullScope}); rest.Len() > 0 {
		return "a full plan after the incremental ones finds:\n" + rest.String()
	}
	return ""
}

// propertyRules stands for the rules, which depend on the node alone:
// rendering them costs most of a small run.
func propertyRules(*model.Node) string { return "rules" }

// chooser makes a run's choices: from data while it lasts (so the fuzzer
// steers them), then from a generator seeded by seed.
type chooser struct {
	data []byte
	rng  *rand.Rand
}

func newChooser(data []byte, seed uint64) *chooser {
	if len(data) >= 8 {
		data = data[8:]
	}
	return &chooser{data: data, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// intn returns a choice in [0, n); n must be positive.
func (c *chooser) intn(n int) int {
	if len(c.data) > 0 {
		b := c.data[0]
		c.data = c.data[1:]
		return int(b) % n
	}
	return c.rng.IntN(n)
}

func choose[T any](c *chooser, from []T) T { return from[c.intn(len(from))] }

// chooseSome returns up to max choices from `from`, repeats allowed.
func chooseSome[T any](c *chooser, from []T, max int) []T {
	var out []T
	for range c.intn(max + 1) {
		out = append(out, choose(c, from))
	}
	return out
}

// The run's small world: names that sort around default/kubernetes,
// addresses that are each other's cluster IPs, node addresses and
// external ones, and a few ports, so that claims collide often.
var (
	propertyNames = []model.ServicePortName{
		{Namespace: "default", Name: "kubernetes", Port: "https"},
		{Namespace: "kube-system", Name: "kube-dns", Port: "dns"},
		{Namespace: "kube-system", Name: "kube-dns", Port: "dns-tcp"},
		{Namespace: "billing", Name: "a"},
		{Namespace: "t", Name: "a"},
		{Namespace: "t", Name: "b", Port: "http"},
		{Namespace: "t", Name: "b", Port: "https"},
		{Namespace: "zz", Name: "web"},
	}
	propertyClusterIPs = []string{"10.96.0.1", "10.96.0.10", "10.96.0.20", "fd00:10:96::1", "fd00:10:96::20"}
	propertyOtherIPs   = []string{"192.168.0.10", "fd00:1::10", "203.0.113.5", "2001:db8::5"}
	propertyPorts      = []uint16{53, 443, 30080, 31000}
	propertyNodePorts  = []uint16{0, 0, 30080, 30443}
	propertyEndpoints  = []string{"10.244.1.5", "10.244.2.7", "10.244.3.9", "fd00:244::5"}
	propertyNodes      = []string{"node-a", "node-b"}
	propertySchedulers = []string{"", "", "wrr", "mh", "no-such-scheduler"}
)

// node returns the run's node: in a third of the runs, one that limits
// external IPs, protects a port of its addresses and allows a scheduler.
func (c *chooser) node() model.Node {
	n := fixture.Node()
	if c.intn(3) == 0 {
		n.ExternalIPRanges = fixture.Prefixes("192.168.0.0/16", "2001:db8::/64")
		n.ProtectedPorts = []model.ProtectedPort{{Protocol: inet.TCP, Port: 443}}
		n.AllowedSchedulers = []string{"wrr"}
	}
	return n
}

// foreign returns up to three random virtual servers of the run's
// addresses and ports, as another program's.
func (c *chooser) foreign() map[VirtualKey]bool {
	all := append(slices.Clone(propertyClusterIPs), propertyOtherIPs...)
	out := map[VirtualKey]bool{}
	for range c.intn(4) {
		out[VirtualKey{Addr: fixture.IP(choose(c, all)), Port: choose(c, propertyPorts), Protocol: choose(c, []inet.Protocol{inet.TCP, inet.UDP})}] = true
	}
	return out
}

// servicePort returns a random service port; some are invalid.
func (c *chooser) servicePort() model.ServicePort {
	sp := model.ServicePort{
		Name:     choose(c, propertyNames),
		Protocol: choose(c, []inet.Protocol{inet.TCP, inet.TCP, inet.UDP}),
		Port:     choose(c, propertyPorts),
		NodePort: choose(c, propertyNodePorts),
	}
	for _, ip := range chooseSome(c, propertyClusterIPs, 2) {
		if !slices.ContainsFunc(sp.ClusterIPs, func(a netip.Addr) bool { return a.Is6() == fixture.IP(ip).Is6() }) {
			sp.ClusterIPs = append(sp.ClusterIPs, fixture.IP(ip))
		}
	}
	all := append(slices.Clone(propertyClusterIPs), propertyOtherIPs...)
	sp.ExternalIPs = fixture.IPs(chooseSome(c, all, 3)...)
	sp.LoadBalancerIPs = fixture.IPs(chooseSome(c, all, 2)...)
	if c.intn(3) == 0 {
		sp.LoadBalancerSourceRanges = fixture.Prefixes(choose(c, []string{"192.168.0.0/16", "198.51.100.0/24", "fd00::/8"}))
	}
	sp.ExternalPolicy = choose(c, []model.TrafficPolicy{model.PolicyCluster, model.PolicyLocal})
	sp.InternalPolicy = choose(c, []model.TrafficPolicy{model.PolicyCluster, model.PolicyLocal})
	if sp.ExternalPolicy == model.PolicyLocal && c.intn(2) == 0 {
		sp.HealthCheckNodePort = choose(c, []uint16{31000, 31001})
	}
	sp.Scheduler = choose(c, propertySchedulers)
	if c.intn(4) == 0 {
		sp.SessionAffinity = 3 * time.Hour
	}
	if c.intn(4) == 0 {
		sp.DrainTimeout = time.Duration(1+c.intn(3)) * time.Minute
	}
	sp.Endpoints = c.endpoints()
	return sp
}

func (c *chooser) endpoints() []model.Endpoint {
	var eps []model.Endpoint
	for range c.intn(4) {
		ep := fixture.Ready(choose(c, propertyEndpoints), choose(c, []uint16{53, 8080}), choose(c, propertyNodes))
		ep.Ready = c.intn(4) > 0
		ep.Terminating = !ep.Ready && c.intn(2) == 0
		ep.Serving = ep.Ready || ep.Terminating
		eps = append(eps, ep)
	}
	return eps
}

// changes alters `current` at random and returns the changes, in a random
// order, with noise that ends where current does: a port added or
// changed and then removed again, or removed and then put back.
func (c *chooser) changes(current map[model.ServicePortName]model.ServicePort) []model.Change {
	var changes []model.Change
	for range 1 + c.intn(4) {
		name := choose(c, propertyNames)
		prev, had := current[name]
		switch c.intn(4) {
		case 0:
			delete(current, name)
			changes = append(changes, model.Change{Name: name})
		case 1:
			if had {
				// An endpoint change: the commonest.
				prev.Endpoints = c.endpoints()
				current[name] = prev
				changes = append(changes, model.Change{Name: name, Port: ptr(prev)})
				continue
			}
			fallthrough
		default:
			sp := c.servicePort()
			sp.Name = name
			current[name] = sp
			changes = append(changes, model.Change{Name: name, Port: ptr(sp)})
		}
		if c.intn(3) == 0 {
			// The same name again, ending where current is.
			if sp, ok := current[name]; ok {
				changes = append(changes, model.Change{Name: name}, model.Change{Name: name, Port: ptr(sp)})
			} else {
				other := c.servicePort()
				other.Name = name
				changes = append(changes, model.Change{Name: name, Port: ptr(other)}, model.Change{Name: name})
			}
		}
	}
	return c.interleave(changes)
}

// interleave returns changes in a random order that keeps each name's
// changes in the order they were made.
func (c *chooser) interleave(changes []model.Change) []model.Change {
	var names []model.ServicePortName
	queues := map[model.ServicePortName][]model.Change{}
	for _, ch := range changes {
		if queues[ch.Name] == nil {
			names = append(names, ch.Name)
		}
		queues[ch.Name] = append(queues[ch.Name], ch)
	}
	out := make([]model.Change, 0, len(changes))
	for len(names) > 0 {
		i := c.intn(len(names))
		q := queues[names[i]]
		out = append(out, q[0])
		if queues[names[i]] = q[1:]; len(q) == 1 {
			names = slices.Delete(names, i, i+1)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func portsOf(m map[model.ServicePortName]model.ServicePort) []model.ServicePort {
	out := make([]model.ServicePort, 0, len(m))
	for _, name := range slices.SortedFunc(func(yield func(model.ServicePortName) bool) {
		for n := range m {
			if !yield(n) {
				return
			}
		}
	}, compareNames) {
		out = append(out, m[name])
	}
	return out
}

func describePorts(m map[model.ServicePortName]model.ServicePort) string {
	var parts []string
	for _, sp := range portsOf(m) {
		parts = append(parts, describePort(&sp))
	}
	return strings.Join(parts, "; ")
}

func describeChanges(changes []model.Change) string {
	var parts []string
	for _, ch := range changes {
		if ch.Port == nil {
			parts = append(parts, "remove "+ch.Name.String())
			continue
		}
		parts = append(parts, describePort(ch.Port))
	}
	return strings.Join(parts, "; ")
}

func describePort(sp *model.ServicePort) string {
	return fmt.Sprintf("%s %s/%d cluster %v node %d ext %v lb %v eps %d", sp.Name, sp.Protocol, sp.Port, sp.ClusterIPs, sp.NodePort, sp.ExternalIPs, sp.LoadBalancerIPs, len(sp.Endpoints))
}

// A model that names one service port twice is built as if the later
// came alone, even when the earlier held a virtual server another port
// claims too.
func TestBuildWithAPortNamedTwice(t *testing.T) {
	first := fixture.Svc("t", "a", "", inet.TCP, 80, "10.96.0.10")
	other := fixture.Svc("s", "z", "", inet.TCP, 80, "10.96.0.20")
	other.ExternalIPs = fixture.IPs("10.96.0.10")
	again := fixture.Svc("t", "a", "", inet.TCP, 80, "10.96.0.30")
	d := Build(&model.State{Node: fixture.Node(), Services: []model.ServicePort{first, other, again}}, propertyRules)
	if owner := d.Services[VirtualKey{Addr: fixture.IP("10.96.0.10"), Port: 80, Protocol: inet.TCP}]; owner != other.Name {
		t.Errorf("10.96.0.10:80 is %v's, want %v's", owner, other.Name)
	}
}

// BenchmarkUnrelatedChangeAmongConflicts measures a one-endpoint change of
// a Service while a tenant's 10,000 Services each claim another's
// cluster IP as an external IP: the conflicts are reported at every sync,
// and must not be listed and sorted again when none changed.
func BenchmarkUnrelatedChangeAmongConflicts(b *testing.B) {
	var services []model.ServicePort
	for i := range 10000 {
		owner := fixture.Svc("team", fmt.Sprintf("svc-%05d", i), "", inet.TCP, 80, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
		tenant := fixture.Svc("tenant", fmt.Sprintf("claim-%05d", i), "", inet.TCP, 80, fmt.Sprintf("10.97.%d.%d", i/250, i%250+1))
		tenant.ExternalIPs = owner.ClusterIPs
		services = append(services, owner, tenant)
	}
	web := fixture.Svc("default", "web", "", inet.TCP, 80, "10.99.0.10")
	services = append(services, web)
	p := NewPlanner(propertyRules)
	if _, errs := p.Update(&model.State{Node: fixture.Node(), Services: services}); len(errs) != 10000 {
		b.Fatalf("%d errors, want 10,000 conflicts", len(errs))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		web.Endpoints = []model.Endpoint{fixture.Ready(fmt.Sprintf("10.244.1.%d", i%200+1), 8080, "node-a")}
		p.UpdateChanges([]model.Change{{Name: web.Name, Port: &web}})
	}
}
