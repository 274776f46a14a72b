package planner

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden plans under testdata/plans")

func TestGoldenPlans(t *testing.T) {
	for name, services := range fixture.Shapes() {
		t.Run(name, func(t *testing.T) {
			d := Build(&model.State{Node: fixture.Node(), Services: services}, nftrules.Render)
			if len(d.Errors) > 0 {
				t.Fatalf("errors: %v", d.Errors)
			}
			got := Diff(DiffInputs{Observed: NewKernelState(), Desired: d.Kernel, Services: d.Services, Scope: FullScope}).String()
			// The sets are the same for every model; leave them out.
			var lines []string
			for _, l := range strings.SplitAfter(got, "\n") {
				if !strings.HasPrefix(l, "ipset create ") {
					lines = append(lines, l)
				}
			}
			got = strings.Join(lines, "")
			golden := filepath.Join("testdata", "plans", name+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/planner -update)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// A set is made with kube-proxy's options while they hold its entries,
// and with room for twice as many beyond.
func TestSized(t *testing.T) {
	spec := SetSpec{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, HashSize: 1024, MaxElem: 65536}
	for _, tc := range []struct {
		entries int
		want    uint32
	}{{0, 65536}, {65536, 65536}, {65537, 262144}, {100000, 262144}, {200000, 524288}} {
		if got := spec.Sized(tc.entries).MaxElem; got != tc.want {
			t.Errorf("%d entries: maxelem %d, want %d", tc.entries, got, tc.want)
		}
	}
	if got := (SetSpec{Type: BitmapPort}).Sized(100000); got.MaxElem != 0 {
		t.Errorf("a bitmap got maxelem %d", got.MaxElem)
	}
}
