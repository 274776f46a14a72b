package planner

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// manyServices returns n ClusterIP+NodePort services with two endpoints.
func manyServices(n int) []model.ServicePort {
	var out []model.ServicePort
	for i := range n {
		s := fixture.Svc("ns", fmt.Sprintf("svc-%05d", i), "http", inet.TCP, 80, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
		s.NodePort = uint16(30000 + i%2000)
		if i >= 2000 {
			s.NodePort = 0
		}
		s.Endpoints = []model.Endpoint{
			fixture.Ready(fmt.Sprintf("10.244.%d.%d", i/250, i%250+1), 8080, "node-a"),
			fixture.Ready(fmt.Sprintf("10.245.%d.%d", i/250, i%250+1), 8080, "node-b"),
		}
		out = append(out, s)
	}
	return out
}

// syncAll plans against the fake kernel and records the plan in it, as a
// flawless apply would.
func syncAll(t *testing.T, p *Planner, kernel *KernelState, s *model.State) *Plan {
	t.Helper()
	scope, errs := p.Update(s)
	for _, err := range errs {
		t.Logf("left out: %v", err)
	}
	desired, owners := p.Desired()
	plan := Diff(DiffInputs{Observed: kernel, Desired: desired, Services: owners, Scope: scope})
	for op := range plan.All() {
		kernel.Record(op)
	}
	return plan
}

// incrementalChange is a change to manyServices(3000) and the plan it
// makes.
type incrementalChange struct {
	name   string
	change func(services []model.ServicePort) []model.ServicePort
	want   []string
	// thenFull is what a full plan finds after the incremental one.
	thenFull []string
}

// incrementalChanges are the changes TestIncrementalPlansTouchOnlyTheChange
// makes, one at a time.
func incrementalChanges() []incrementalChange {
	return append(endpointChanges(), serviceChanges()...)
}

// endpointChanges are the incremental changes to endpoints.
func endpointChanges() []incrementalChange {
	return []incrementalChange{
		{
			name: "add one endpoint",
			change: func(s []model.ServicePort) []model.ServicePort {
				s[1500].Endpoints = append(s[1500].Endpoints, fixture.Ready("10.246.0.1", 8080, "node-c"))
				return s
			},
			want: []string{
				"ipvs add TCP 10.96.6.1:80 -> 10.246.0.1:8080 weight 1",
				"ipvs add TCP 192.168.0.10:31500 -> 10.246.0.1:8080 weight 1",
			},
		},
		{
			// The fake kernel's real servers hold no connections: as
			// kube-proxy's GracefulDeleteRS, an idle one is deleted at
			// once (TestDiffRealsRemoval drains a busy one).
			name: "remove one idle endpoint deletes it",
			change: func(s []model.ServicePort) []model.ServicePort {
				s[7].Endpoints = s[7].Endpoints[:1]
				return s
			},
			want: []string{
				"ipvs del TCP 10.96.0.8:80 -> 10.245.0.8:8080",
				"ipvs del TCP 192.168.0.10:30007 -> 10.245.0.8:8080",
			},
		},
	}
}

// serviceChanges are the incremental changes to whole service ports.
func serviceChanges() []incrementalChange {
	return []incrementalChange{
		{
			name: "add one service",
			change: func(s []model.ServicePort) []model.ServicePort {
				extra := fixture.Svc("ns", "new", "", inet.TCP, 443, "10.97.0.1")
				extra.Endpoints = []model.Endpoint{fixture.Ready("10.247.0.1", 8443, "node-b")}
				return append(s, extra)
			},
			want: []string{
				"ipset add KUBE-CLUSTER-IP 10.97.0.1,tcp:443",
				"ipset add KUBE-IPVS-IPS 10.97.0.1",
				"ipset add KUBE-IPVSPLANE-OWNED 10.97.0.1,tcp:443",
				"ipvs add TCP 10.97.0.1:443 rr (ns/new)",
				"ipvs add TCP 10.97.0.1:443 -> 10.247.0.1:8443 weight 1",
				"addr bind 10.97.0.1",
			},
		},
		{
			name: "remove one service",
			change: func(s []model.ServicePort) []model.ServicePort {
				return append(s[:2500], s[2501:]...)
			},
			want: []string{
				"ipvs del TCP 10.96.10.1:80",
				"addr unbind 10.96.10.1",
				"ipset del KUBE-CLUSTER-IP 10.96.10.1,tcp:80",
				"ipset del KUBE-IPVS-IPS 10.96.10.1",
				"ipset del KUBE-IPVSPLANE-OWNED 10.96.10.1,tcp:80",
				"ipset del KUBE-LOOP-BACK 10.244.10.1,tcp:8080,10.244.10.1",
			},
		},
		{
			name: "change a port",
			change: func(s []model.ServicePort) []model.ServicePort {
				s[2600].Port = 81
				return s
			},
			want: []string{
				"ipset add KUBE-CLUSTER-IP 10.96.10.101,tcp:81",
				"ipset add KUBE-IPVSPLANE-OWNED 10.96.10.101,tcp:81",
				"ipvs add TCP 10.96.10.101:81 rr (ns/svc-02600:http)",
				"ipvs add TCP 10.96.10.101:81 -> 10.244.10.101:8080 weight 1",
				"ipvs add TCP 10.96.10.101:81 -> 10.245.10.101:8080 weight 1",
				"ipvs del TCP 10.96.10.101:80",
				"ipset del KUBE-CLUSTER-IP 10.96.10.101,tcp:80",
				"ipset del KUBE-IPVSPLANE-OWNED 10.96.10.101,tcp:80",
			},
		},
		{
			name: "change affinity",
			change: func(s []model.ServicePort) []model.ServicePort {
				s[2700].SessionAffinity = 10800 * time.Second
				return s
			},
			want: []string{
				"ipvs edit TCP 10.96.10.201:80 rr persistent 10800s (ns/svc-02700:http)",
			},
		},
	}
}

func TestIncrementalPlansTouchOnlyTheChange(t *testing.T) {
	const n = 3000
	for _, tt := range incrementalChanges() {
		t.Run(tt.name, func(t *testing.T) {
			p, kernel := NewPlanner(nftrules.Render), NewKernelState()
			state := &model.State{Node: fixture.Node(), Services: manyServices(n)}
			if ops := syncAll(t, p, kernel, state).Len(); ops < 4*n {
				t.Fatalf("the first sync planned only %d operations", ops)
			}
			state.Services = tt.change(manyServices(n))
			got := strings.Split(strings.TrimSpace(syncAll(t, p, kernel, state).String()), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			// The incremental result must match a from-scratch build.
			scratch := Build(state, nftrules.Render)
			rest := strings.Fields(Diff(DiffInputs{Observed: kernel, Desired: scratch.Kernel, Services: scratch.Services, Scope: FullScope}).String())
			if want := strings.Fields(strings.Join(tt.thenFull, "\n")); !reflect.DeepEqual(rest, want) {
				t.Errorf("after the incremental sync, a full plan finds:\n%s\nwant:\n%s", rest, want)
			}
		})
	}
}

func TestUnchangedModelPlansNothing(t *testing.T) {
	p, kernel := NewPlanner(nftrules.Render), NewKernelState()
	state := &model.State{Node: fixture.Node(), Services: manyServices(100)}
	syncAll(t, p, kernel, state)
	if plan := syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: manyServices(100)}); plan.Len() != 0 {
		t.Errorf("an unchanged model planned:\n%s", plan)
	}
}

func TestInvalidAndConflictingServicesAreLeftOut(t *testing.T) {
	good := fixture.Svc("ns", "good", "", inet.TCP, 80, "10.96.0.1")
	twin := fixture.Svc("ns", "twin", "", inet.TCP, 80, "10.96.0.1")
	badPort := fixture.Svc("ns", "bad-port", "", inet.TCP, 0, "10.96.0.2")
	badEndpoint := fixture.Svc("ns", "bad-endpoint", "", inet.TCP, 80, "10.96.0.3")
	badEndpoint.Endpoints = []model.Endpoint{fixture.Ready("fd00::1", 80, "node-a")}
	badScheduler := fixture.Svc("ns", "bad-scheduler", "", inet.UDP, 53, "10.96.0.4")
	badScheduler.Scheduler = "fastest"

	p, kernel := NewPlanner(nftrules.Render), NewKernelState()
	state := &model.State{Node: fixture.Node(), Services: []model.ServicePort{twin, badPort, good, badEndpoint, badScheduler}}
	scope, errs := p.Update(state)
	want := []string{
		"service ns/bad-endpoint: field endpoints[0].addr: fd00::1 has no cluster IP of its family",
		"service ns/bad-port: field port: must be 1-65535",
		"service ns/twin: virtual server TCP 10.96.0.1:80 is served by ns/good, which claims it first; the rest of ns/twin is programmed",
		// An unknown scheduler never leaves a port out.
		"service ns/bad-scheduler: scheduler \"fastest\": " + model.ErrUnknownScheduler.Error() + "; it uses the node's scheduler rr",
	}
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !errors.Is(errs[0], model.ErrInvalid) {
		t.Errorf("%v does not match ErrInvalid", errs[0])
	}
	desired, owners := p.Desired()
	plan := Diff(DiffInputs{Observed: kernel, Desired: desired, Services: owners, Scope: scope})
	for op := range plan.All() {
		kernel.Record(op)
	}
	if !strings.Contains(plan.String(), "ipvs add TCP 10.96.0.1:80 rr (ns/good)") {
		t.Errorf("the valid service was not programmed:\n%s", plan)
	}
	if !strings.Contains(plan.String(), "ipvs add UDP 10.96.0.4:53 rr (ns/bad-scheduler)") {
		t.Errorf("the service with an unknown scheduler was not programmed with the node's:\n%s", plan)
	}

	// Once the owner goes, the conflicting port takes over.
	state.Services = []model.ServicePort{twin}
	_, errs = p.Update(state)
	if len(errs) != 0 {
		t.Errorf("errors after the conflict went away: %v", errs)
	}
	if _, owners := p.Desired(); owners[VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}].Name != "twin" {
		t.Errorf("the freed virtual server was not taken over")
	}
}

// equalNode must compare every field, or a settings change would go
// unnoticed.
func TestEqualNodeComparesEveryField(t *testing.T) {
	base := fixture.Node()
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		changed := fixture.Node()
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Uint8, reflect.Uint32:
			f.SetUint(f.Uint() + 1)
		case reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Slice:
			f.Set(reflect.Append(reflect.MakeSlice(f.Type(), 0, 1), reflect.Zero(f.Type().Elem())))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		if equalNode(&base, &changed) {
			t.Errorf("equalNode misses a change of %s", typ.Field(i).Name)
		}
	}
}

// Tracked changes plan exactly what comparing whole models does.
func TestUpdateChangesMatchesUpdate(t *testing.T) {
	byModel, byChanges := NewPlanner(nftrules.Render), NewPlanner(nftrules.Render)
	kernelA, kernelB := NewKernelState(), NewKernelState()
	state := &model.State{Node: fixture.Node(), Services: manyServices(500)}
	syncAll(t, byModel, kernelA, state)
	syncAll(t, byChanges, kernelB, state)

	next := manyServices(500)
	next[10].Endpoints = next[10].Endpoints[:1]
	next[20].Port = 8080
	removed := next[30].Name
	next = append(next[:30], next[31:]...)
	added := fixture.Svc("ns", "added", "", inet.UDP, 53, "10.97.0.53")
	next = append(next, added)

	planA := syncAll(t, byModel, kernelA, &model.State{Node: fixture.Node(), Services: next})
	scope, errs := byChanges.UpdateChanges([]model.Change{
		{Name: next[10].Name, Port: &next[10]},
		{Name: next[20].Name, Port: &next[20]},
		{Name: removed},
		{Name: added.Name, Port: &added},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	desired, owners := byChanges.Desired()
	planB := Diff(DiffInputs{Observed: kernelB, Desired: desired, Services: owners, Scope: scope})
	if planA.String() != planB.String() {
		t.Errorf("Update planned:\n%s\nUpdateChanges planned:\n%s", planA, planB)
	}
}

// A change of any field of a service port or its endpoints must change its
// fingerprint, or the planner would miss it.
func TestFingerprintCoversEveryField(t *testing.T) {
	seed := maphash.MakeSeed()
	base := func() model.ServicePort {
		s := fixture.Shapes()["etp-local"][0]
		s.Endpoints[0].Hints = &model.Hints{ForZones: []string{"zone-a"}, ForNodes: []string{"node-a"}}
		s.Endpoints[0].Zone = "zone-a"
		s.ExternalIPs = fixture.IPs("198.51.100.1")
		s.LoadBalancerSourceRanges = fixture.Prefixes("192.0.2.0/24")
		s.BadSettings = []model.BadSetting{{Field: "ipvsplane.io/drain-timeout", Value: "soon", Reason: "not a duration"}}
		return s
	}
	b := base()
	want := hashPort(seed, &b).fingerprint
	mutate := func(f reflect.Value, name string) {
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(f.Uint() + 1)
		case reflect.Int64:
			f.SetInt(f.Int() + int64(time.Second))
		case reflect.Slice:
			f.Set(f.Slice(0, 0))
		case reflect.Struct:
			if f.Type() == reflect.TypeOf(netip.Addr{}) {
				f.Set(reflect.ValueOf(netip.MustParseAddr("10.1.2.3")))
				return
			}
			t.Fatalf("field %s: struct %s not covered by this test", name, f.Type())
		default:
			t.Fatalf("field %s: kind %s not covered by this test", name, f.Kind())
		}
	}
	typ := reflect.TypeOf(model.ServicePort{})
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if name == "Name" {
			for j := range reflect.TypeOf(model.ServicePortName{}).NumField() {
				s := base()
				mutate(reflect.ValueOf(&s.Name).Elem().Field(j), "Name."+reflect.TypeOf(model.ServicePortName{}).Field(j).Name)
				if hashPort(seed, &s).fingerprint == want {
					t.Errorf("a change of Name field %d leaves the fingerprint", j)
				}
			}
			continue
		}
		s := base()
		mutate(reflect.ValueOf(&s).Elem().Field(i), name)
		if hashPort(seed, &s).fingerprint == want {
			t.Errorf("a change of %s leaves the fingerprint", name)
		}
	}
	etyp := reflect.TypeOf(model.Endpoint{})
	for i := range etyp.NumField() {
		s := base()
		if etyp.Field(i).Name == "Hints" {
			htyp := reflect.TypeOf(model.Hints{})
			for j := range htyp.NumField() {
				s := base()
				mutate(reflect.ValueOf(s.Endpoints[0].Hints).Elem().Field(j), "Endpoints[0].Hints."+htyp.Field(j).Name)
				if hashPort(seed, &s).fingerprint == want {
					t.Errorf("a change of Hints.%s leaves the fingerprint", htyp.Field(j).Name)
				}
			}
			continue
		}
		mutate(reflect.ValueOf(&s.Endpoints[0]).Elem().Field(i), "Endpoints[0]."+etyp.Field(i).Name)
		if hashPort(seed, &s).fingerprint == want {
			t.Errorf("a change of Endpoint.%s leaves the fingerprint", etyp.Field(i).Name)
		}
	}
}

// One pass hashes a port's endpoints for both: the fingerprint tells
// apart endpoints that differ only in order, across families too, while
// the hash of a family's endpoints (conntrack's) changes with that
// family's alone, and is 0 for none.
func TestHashPortEndpoints(t *testing.T) {
	seed := maphash.MakeSeed()
	v4, v4b, v6 := fixture.Ready("10.244.0.1", 53, "node-a"), fixture.Ready("10.244.0.2", 53, "node-a"), fixture.Ready("fd00:244::1", 53, "node-a")
	hash := func(eps ...model.Endpoint) portHashes {
		s := fixture.Svc("default", "dns", "", inet.UDP, 53, "10.96.0.10", "fd00::10")
		s.Endpoints = eps
		return hashPort(seed, &s)
	}
	base := hash(v4, v6, v4b)
	if got := hash(v6, v4, v4b); got.fingerprint == base.fingerprint || got.endpoints != base.endpoints {
		t.Errorf("families interleaved otherwise: fingerprint %x (was %x), endpoints %x (were %x)", got.fingerprint, base.fingerprint, got.endpoints, base.endpoints)
	}
	if got := hash(v4b, v6, v4); got.fingerprint == base.fingerprint ||
		got.endpoints.Get(inet.IPv4) == base.endpoints.Get(inet.IPv4) || got.endpoints.Get(inet.IPv6) != base.endpoints.Get(inet.IPv6) {
		t.Errorf("IPv4 endpoints reordered: fingerprint %x (was %x), endpoints %x (were %x)", got.fingerprint, base.fingerprint, got.endpoints, base.endpoints)
	}
	if got := hash(v4, v4b); got.endpoints.Get(inet.IPv4) != base.endpoints.Get(inet.IPv4) || got.endpoints.Get(inet.IPv6) != 0 {
		t.Errorf("IPv6 endpoint gone: endpoints %x (were %x)", got.endpoints, base.endpoints)
	}
	if got := hash(); got.endpoints != (inet.PerFamily[uint64]{}) {
		t.Errorf("no endpoint: endpoints %x", got.endpoints)
	}
}

// An address and a set entry that several service ports put in stay until
// the last of them goes.
func TestSharedAddressStaysUntilTheLastPortGoes(t *testing.T) {
	http := fixture.Svc("ns", "web", "http", inet.TCP, 80, "10.96.0.10")
	https := fixture.Svc("ns", "web", "https", inet.TCP, 443, "10.96.0.10")
	other := fixture.Svc("ns", "other", "", inet.TCP, 80, "10.96.0.11")
	p, kernel := NewPlanner(nftrules.Render), NewKernelState()
	syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: []model.ServicePort{http, https, other}})
	steps := []struct {
		name     string
		services []model.ServicePort
		want     []string
	}{
		{"one of two ports goes", []model.ServicePort{https, other}, []string{
			"ipvs del TCP 10.96.0.10:80",
			"ipset del KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
			"ipset del KUBE-IPVSPLANE-OWNED 10.96.0.10,tcp:80",
		}},
		{"the port comes back", []model.ServicePort{http, https, other}, []string{
			"ipset add KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
			"ipset add KUBE-IPVSPLANE-OWNED 10.96.0.10,tcp:80",
			"ipvs add TCP 10.96.0.10:80 rr (ns/web:http)",
		}},
		{"both ports go", []model.ServicePort{other}, []string{
			"ipvs del TCP 10.96.0.10:80",
			"ipvs del TCP 10.96.0.10:443",
			"addr unbind 10.96.0.10",
			"ipset del KUBE-CLUSTER-IP 10.96.0.10,tcp:80 10.96.0.10,tcp:443",
			"ipset del KUBE-IPVS-IPS 10.96.0.10",
			"ipset del KUBE-IPVSPLANE-OWNED 10.96.0.10,tcp:80 10.96.0.10,tcp:443",
		}},
	}
	for _, step := range steps {
		got := strings.Split(strings.TrimSpace(syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: step.services}).String()), "\n")
		if !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: plan:\n%s\nwant:\n%s", step.name, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
		scratch := Build(&model.State{Node: fixture.Node(), Services: step.services}, nftrules.Render)
		if rest := Diff(DiffInputs{Observed: kernel, Desired: scratch.Kernel, Services: scratch.Services, Scope: FullScope}); rest.Len() > 0 {
			t.Errorf("%s: a full plan afterwards finds:\n%s", step.name, rest)
		}
	}
}

// Two services claiming one virtual server: everything that does not
// collide is programmed for both, and the collision goes to the better
// claim whatever the order of arrival: a cluster IP beats another
// service's external IP naming it, even one whose name sorts first. When
// the owner goes, the other takes over.
func TestConflictingClaimsAreDecidedByKindThenName(t *testing.T) {
	web := fixture.Svc("zz", "web", "", inet.TCP, 80, "10.96.0.10")
	web.NodePort = 30080
	web.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 8080, "node-a")}
	evil := fixture.Svc("aa", "evil", "", inet.TCP, 80, "10.96.0.20")
	evil.ExternalIPs = fixture.IPs("10.96.0.10")
	evil.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.7", 8080, "node-b")}
	contested := VirtualKey{Addr: fixture.IP("10.96.0.10"), Port: 80, Protocol: inet.TCP}
	evilOwn := VirtualKey{Addr: fixture.IP("10.96.0.20"), Port: 80, Protocol: inet.TCP}
	nodePort := VirtualKey{Addr: fixture.IP("192.168.0.10"), Port: 30080, Protocol: inet.TCP}
	wantErr := "service aa/evil: virtual server TCP 10.96.0.10:80 is served by zz/web, which claims it first; the rest of aa/evil is programmed"

	for _, order := range [][]model.ServicePort{{web, evil}, {evil, web}} {
		p := NewPlanner(nftrules.Render)
		p.Update(&model.State{Node: fixture.Node()})
		var errs []error
		for _, s := range order {
			_, errs = p.UpdateChanges([]model.Change{{Name: s.Name, Port: &s}})
		}
		desired, owners := p.Desired()
		if owners[contested] != web.Name || desired.Reals[contested][0].Addr != fixture.IP("10.244.1.5") {
			t.Errorf("%s first: %s is %v's, real servers %v", order[0].Name, contested, owners[contested], desired.Reals[contested])
		}
		if owners[evilOwn] != evil.Name || owners[nodePort] != web.Name {
			t.Errorf("%s first: the uncontested virtual servers: %v", order[0].Name, owners)
		}
		if len(errs) != 1 || errs[0].Error() != wantErr {
			t.Errorf("%s first: errors %v, want %q", order[0].Name, errs, wantErr)
		}
		if d := Build(&model.State{Node: fixture.Node(), Services: order}, nftrules.Render); d.Services[contested] != web.Name {
			t.Errorf("Build with %s first gave %s to %v", order[0].Name, contested, d.Services[contested])
		}

		scope, errs := p.UpdateChanges([]model.Change{{Name: web.Name}})
		desired, owners = p.Desired()
		if owners[contested] != evil.Name || desired.Reals[contested][0].Addr != fixture.IP("10.244.2.7") || !scope.Virtual[contested] || len(errs) != 0 {
			t.Errorf("%s first: after the owner left, %s is %v's (in scope %v), errors %v", order[0].Name, contested, owners[contested], scope.Virtual[contested], errs)
		}
	}
}

// The problems of ports that did not change cost an update nothing: they
// were sorted, formatting every port's name, at every update.
func TestUnchangedProblemsCostNothing(t *testing.T) {
	allocs := func(troubled int) float64 {
		services := manyServices(troubled + 1)
		for i := range troubled {
			services[i].BadSettings = []model.BadSetting{{Field: "ipvsplane.io/drain-timeout", Value: "soon", Reason: "not a duration"}}
		}
		p := NewPlanner(nftrules.Render)
		p.Update(&model.State{Services: services})
		plain := &services[troubled]
		return testing.AllocsPerRun(20, func() {
			plain.Endpoints[0].Ready = !plain.Endpoints[0].Ready
			if _, errs := p.UpdateChanges([]model.Change{{Name: plain.Name, Port: plain}}); len(errs) != troubled {
				t.Fatalf("%d problems, want %d", len(errs), troubled)
			}
		})
	}
	if few, many := allocs(10), allocs(1000); many > few+5 {
		t.Errorf("an update allocates %v times with 1,000 troubled ports, %v with 10", many, few)
	}
}

// A claim that loses its virtual server puts nothing in the sets either:
// an external IP naming the DNS Service's cluster IP would mark its
// traffic for masquerade (KUBE-EXTERNAL-IP), and a load-balancer address
// with source ranges naming it would firewall it (KUBE-LOAD-BALANCER-FW).
// When the owner goes, the claim's entries come with the virtual server,
// in the update's scope.
func TestLosingClaimAddsNoSetEntries(t *testing.T) {
	dns := fixture.Svc("kube-system", "kube-dns", "dns", inet.UDP, 53, "10.96.0.10")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 53, "node-a")}
	evil := fixture.Svc("billing", "evil", "", inet.UDP, 53, "10.96.0.20")
	evil.ExternalIPs = fixture.IPs("10.96.0.10")
	evil.LoadBalancerIPs = fixture.IPs("10.96.0.10")
	evil.LoadBalancerSourceRanges = fixture.Prefixes("198.51.100.0/24")
	evil.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.7", 53, "node-b")}
	claimSets := []string{model.SetExternalIP, model.SetLoadBalancer, model.SetLoadBalancerFW, model.SetLoadBalancerSourceNet}
	contested := "10.96.0.10,udp:53"
	has := func(k *KernelState, set string) bool {
		for e := range k.Entries[set] {
			if strings.HasPrefix(e.String(), contested) {
				return true
			}
		}
		return false
	}
	for _, order := range [][]model.ServicePort{{dns, evil}, {evil, dns}} {
		p := NewPlanner(nftrules.Render)
		p.Update(&model.State{Node: fixture.Node()})
		for _, s := range order {
			p.UpdateChanges([]model.Change{{Name: s.Name, Port: &s}})
		}
		desired, _ := p.Desired()
		for _, set := range claimSets {
			if has(desired, set) {
				t.Errorf("%s first: the losing claim's %s entry is in %s: %v", order[0].Name, contested, set, desired.Entries[set])
			}
		}
		if d := Build(&model.State{Node: fixture.Node(), Services: order}, nftrules.Render); !reflect.DeepEqual(d.Kernel.Entries, desired.Entries) {
			t.Errorf("%s first: Build's entries differ from the planner's", order[0].Name)
		}

		scope, _ := p.UpdateChanges([]model.Change{{Name: dns.Name}})
		desired, _ = p.Desired()
		for _, set := range claimSets {
			if !has(desired, set) || !hasEntryPrefix(scope.Entries[set], contested) {
				t.Errorf("%s first: after the owner left, %s holds %v, the scope %v", order[0].Name, set, desired.Entries[set], scope.Entries[set])
			}
		}
		scope, _ = p.UpdateChanges([]model.Change{{Name: dns.Name, Port: &dns}})
		desired, _ = p.Desired()
		for _, set := range claimSets {
			if has(desired, set) || !hasEntryPrefix(scope.Entries[set], contested) {
				t.Errorf("%s first: after the owner came back, %s holds %v, the scope %v", order[0].Name, set, desired.Entries[set], scope.Entries[set])
			}
		}
	}
}

// hasEntryPrefix reports whether a set's entries hold one that starts
// with prefix.
func hasEntryPrefix(entries map[Entry]bool, prefix string) bool {
	for e := range entries {
		if strings.HasPrefix(e.String(), prefix) {
			return true
		}
	}
	return false
}
