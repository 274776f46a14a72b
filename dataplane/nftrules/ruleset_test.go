package nftrules

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

var update = flag.Bool("update", false, "rewrite the golden rules")

// The rules of the node the plan tests use, printed.
func TestRuleTableGolden(t *testing.T) {
	n := model.Node{MasqueradeBit: 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/64")}}
	got := Render(&n)
	golden := filepath.Join("testdata", "rules.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("rules differ from %s:\n%s", golden, got)
	}
}
