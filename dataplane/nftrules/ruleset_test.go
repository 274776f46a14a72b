package nftrules

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

var update = flag.Bool("update", false, "rewrite the golden rules")

// The rules of the node the plan tests use, printed.
func TestRuleTableGolden(t *testing.T) {
	n := model.Node{MasqueradeMark: 1 << 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/64")}}
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

// Bit 0 is a mark of its own, not the default's.
func TestMasqueradeMark(t *testing.T) {
	for _, tc := range []struct {
		mark uint32
		want string
	}{{0, "0x4000"}, {1, "0x1"}, {1 << 31, "0x80000000"}} {
		n := model.Node{MasqueradeMark: tc.mark}
		if got := Render(&n); !strings.Contains(got, "mark set mark | "+tc.want+"\n") {
			t.Errorf("mark %#x: the rules do not set %s:\n%s", tc.mark, tc.want, got)
		}
	}
}
