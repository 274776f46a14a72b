package planner

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// driftedState is a node's desired state for 300 services, and what a
// read of a kernel found that drifted from it in every kind of object.
func driftedState(t *testing.T) (observed *KernelState, d *Desired) {
	t.Helper()
	d = Build(&model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(300, 3)}, nftrules.Render)
	if len(d.Errors) > 0 {
		t.Fatal(d.Errors)
	}
	observed = NewKernelState()
	for op := range Diff(DiffInputs{Observed: observed, Desired: d.Kernel, Services: d.Services, Scope: FullScope}).All() {
		observed.Record(op)
	}
	keys := slices.SortedFunc(maps.Keys(observed.Virtual), VirtualKey.compare)
	// A virtual server gone, a weight changed, one to remove.
	delete(observed.Virtual, keys[0])
	delete(observed.Reals, keys[0])
	reals := slices.Clone(observed.Reals[keys[1]])
	reals[0].Weight = 7
	observed.Reals[keys[1]] = reals
	stray := VirtualKey{Addr: fixture.IP("10.96.255.1"), Port: 80, Protocol: keys[0].Protocol}
	observed.Virtual[stray] = VirtualServer{VirtualKey: stray, Scheduler: "rr"}
	// An address gone, another to remove.
	for a := range observed.Addresses {
		delete(observed.Addresses, a)
		break
	}
	observed.Addresses[fixture.IP("10.96.255.2")] = true
	// A set gone with its entries, an entry gone, the rules gone.
	sets := slices.Sorted(maps.Keys(observed.Entries))
	delete(observed.Sets, sets[0])
	delete(observed.Entries, sets[0])
	for e := range observed.Entries[sets[1]] {
		delete(observed.Entries[sets[1]], e)
		break
	}
	observed.Rules = ""
	return observed, d
}

// planLines are a plan's lines, sorted: pieces plan in their own order.
func planLines(p *Plan) []string {
	lines := strings.Split(strings.TrimSpace(p.String()), "\n")
	slices.Sort(lines)
	return lines
}

// A sweep's pieces plan together what one full compare plans: its first
// piece the node-wide objects alone, each after it no more than its size.
func TestSweepPiecesPlanTheFullCompare(t *testing.T) {
	observed, d := driftedState(t)
	full := Diff(DiffInputs{Observed: observed, Desired: d.Kernel, Services: d.Services, Scope: FullScope})
	if full.Len() < 6 {
		t.Fatalf("the drift is not there: %s", full)
	}
	const size = 200
	sweep := NewSweep(observed, d.Kernel)
	defer sweep.Stop()
	if sweep.Objects() <= size {
		t.Fatalf("the sweep of %d objects fits one piece", sweep.Objects())
	}
	var got []string
	for i := 0; ; i++ {
		if i > sweep.Objects()/size*2+2 {
			t.Fatalf("not done after %d pieces", i)
		}
		piece := *NewScope()
		done := sweep.Next(&piece, size)
		objects := sweepVirtualWeight*len(piece.Virtual) + len(piece.Addresses)
		for _, entries := range piece.Entries {
			objects += len(entries)
		}
		switch {
		case i == 0 && (!piece.Global || objects > 0):
			t.Errorf("the first piece: global %v with %d objects, want the node-wide objects alone", piece.Global, objects)
		case i > 0 && (piece.Global || objects > size+sweepVirtualWeight-1):
			t.Errorf("piece %d: global %v with %d objects, want at most %d", i, piece.Global, objects, size)
		}
		got = append(got, planLines(Diff(DiffInputs{Observed: observed, Desired: d.Kernel, Services: d.Services, Scope: piece}))...)
		if done {
			break
		}
	}
	got = slices.DeleteFunc(got, func(l string) bool { return l == "" })
	slices.Sort(got)
	if want := planLines(full); !slices.Equal(got, want) {
		t.Errorf("the pieces planned\n%s\nwhere the full compare plans\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A sweep no larger than a piece is done in its first, node-wide
// objects and all.
func TestSweepSmallInOnePiece(t *testing.T) {
	observed, d := driftedState(t)
	sweep := NewSweep(observed, d.Kernel)
	defer sweep.Stop()
	piece := *NewScope()
	if !sweep.Next(&piece, sweep.Objects()) {
		t.Fatal("not done in one piece")
	}
	got := Diff(DiffInputs{Observed: observed, Desired: d.Kernel, Services: d.Services, Scope: piece})
	if want := Diff(DiffInputs{Observed: observed, Desired: d.Kernel, Services: d.Services, Scope: FullScope}); !slices.Equal(planLines(got), planLines(want)) {
		t.Errorf("the piece planned\n%s\nwhere the full compare plans\n%s", got, want)
	}
}

// Objects added to the states while a sweep goes on are covered when it
// reaches their map; those removed before it does are not looked at.
func TestSweepFollowsChangesBetweenPieces(t *testing.T) {
	observed, d := driftedState(t)
	sweep := NewSweep(observed, d.Kernel)
	defer sweep.Stop()
	first := *NewScope()
	sweep.Next(&first, 1)
	late := fixture.IP("10.96.255.3")
	observed.Addresses[late] = true
	covered := false
	for {
		piece := *NewScope()
		done := sweep.Next(&piece, 100)
		covered = covered || piece.Addresses[late]
		if done {
			break
		}
	}
	if !covered {
		t.Error("an address the kernel gained during the sweep was not compared")
	}
}
