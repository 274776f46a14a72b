package conntracksettings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The conntrack table's use and limit are read at each scrape; without
// the files (no nf_conntrack module) there are no series.
func TestConntrackMetrics(t *testing.T) {
	dir := t.TempDir()
	c := NewCollector(dir)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series without nf_conntrack", n)
	}
	nf := filepath.Join(dir, "net/netfilter")
	if err := os.MkdirAll(nf, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"nf_conntrack_count": "1234\n", "nf_conntrack_max": "262144\n"} {
		if err := os.WriteFile(filepath.Join(nf, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := `# HELP ipvsplane_conntrack_entries Flows in the conntrack table of the node's network namespace (net.netfilter.nf_conntrack_count).
# TYPE ipvsplane_conntrack_entries gauge
ipvsplane_conntrack_entries 1234
# HELP ipvsplane_conntrack_entries_limit The conntrack table's size limit (net.netfilter.nf_conntrack_max).
# TYPE ipvsplane_conntrack_entries_limit gauge
ipvsplane_conntrack_entries_limit 262144
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
