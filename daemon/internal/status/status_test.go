package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// statusFixture is a node's status: the state file's record, the kernel
// as read, and the time.
func statusFixture(t *testing.T) (*Record, *Kernel, time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	web := model.ServicePort{
		Name: model.ServicePortName{Namespace: "demo", Name: "web", Port: "http"}, Protocol: inet.TCP, Port: 80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.80")}, NodePort: 30080,
	}
	path := filepath.Join(t.TempDir(), "status.json")
	err := WriteRecord(path, &Record{
		Daemon:   Daemon{Node: "node-a", Source: "files", PID: 42, Started: now.Add(-time.Hour), LastSync: now.Add(-2 * time.Second)},
		Sync:     Sync{DurationSeconds: 0.0125, FirstSyncSeconds: 0.25, Full: true, Operations: 57, Syncs: 3, ServicePorts: 1},
		Services: ServiceNames([]model.ServicePort{web}, nil, noOwner),
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := func(addr string, w int, active, inactive uint32) ipvs.Destination {
		return ipvs.Destination{Addr: netip.MustParseAddr(addr), Port: 8080, Weight: w, ActiveConnections: active, InactiveConnections: inactive}
	}
	view := &Kernel{
		table: []ipvs.VirtualServer{
			{Service: ipvs.Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("192.168.0.1"), Port: 30080, Scheduler: "rr"},
				Destinations: []ipvs.Destination{dst("10.244.1.2", 1, 0, 2)}},
			{Service: ipvs.Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.80"), Port: 80, Scheduler: "rr", Timeout: 3 * time.Hour},
				Destinations: []ipvs.Destination{dst("10.244.2.2", 0, 1, 0), dst("10.244.1.2", 1, 3, 4)}},
			{Service: ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.0.0.99"), Port: 53, Scheduler: "wlc"}},
		},
		owned: map[plan.VirtualKey]bool{
			{Addr: netip.MustParseAddr("10.96.0.80"), Port: 80, Protocol: inet.TCP}:     true,
			{Addr: netip.MustParseAddr("192.168.0.1"), Port: 30080, Protocol: inet.TCP}: true,
		},
		sets: []ipset.Header{
			{Set: ipset.Set{Name: "KUBE-6-CLUSTER-IP", Type: "hash:ip,port"}},
			{Set: ipset.Set{Name: "KUBE-CLUSTER-IP", Type: "hash:ip,port"}, Entries: 1, References: 1},
		},
		devAddr: []netip.Addr{netip.MustParseAddr("10.96.0.80")},
	}
	return rec, view, now
}

func TestPrintStatus(t *testing.T) {
	rec, view, now := statusFixture(t)
	var b bytes.Buffer
	if err := Print(&b, rec, nil, view, now); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/status.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		os.WriteFile("testdata/status.txt.got", b.Bytes(), 0o644)
		t.Errorf("got (in testdata/status.txt.got):\n%s\nwant (testdata/status.txt):\n%s", got, want)
	}

	b.Reset()
	_, recErr := ReadRecord(filepath.Join(t.TempDir(), "none.json"))
	if !errors.Is(recErr, fs.ErrNotExist) {
		t.Fatal(recErr)
	}
	if err := Print(&b, nil, recErr, &Kernel{devErr: errors.New("no such device")}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "no sync recorded (is the daemon running? see --state-file)\nkube-ipvs0: no such device\n") {
		t.Errorf("got:\n%s", b.String())
	}
}

// status -o json: the text view's facts under the names docs/status-json.md
// documents (testdata/status.json), and null sync and traffic with the
// reasons when there are none.
func TestStatusJSON(t *testing.T) {
	rec, view, now := statusFixture(t)
	rec.Errors, rec.ErrorCount = []string{"demo/bad:http: no cluster IP"}, 1
	view.devRoutes = []netip.Addr{netip.MustParseAddr("10.96.0.81")}
	traffic := &Traffic{At: now.Add(-time.Second), Seconds: 10, Ports: []PortRate{
		{Service: "demo/web:http", Protocol: "TCP", ConnectionsPS: 2, PacketsInPS: 20, PacketsOutPS: 18, BytesInPS: 2000, BytesOutPS: 9000},
		{Service: "demo/db:sql", Protocol: "TCP", ConnectionsPS: 1, PacketsInPS: 2, PacketsOutPS: 2, BytesInPS: 200, BytesOutPS: 100},
	}}
	var b bytes.Buffer
	if err := writeStatusJSON(&b, newStatusJSON(rec, nil, view, traffic, nil, 1, now)); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/status.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		os.WriteFile("testdata/status.json.got", b.Bytes(), 0o644)
		t.Errorf("got (in testdata/status.json.got):\n%s\nwant (testdata/status.json):\n%s", got, want)
	}

	b.Reset()
	_, recErr := ReadRecord(filepath.Join(t.TempDir(), "none.json"))
	_, trafficErr := ReadTraffic(filepath.Join(t.TempDir(), "none.json"))
	if err := writeStatusJSON(&b, newStatusJSON(nil, recErr, &Kernel{devErr: errors.New("no such device")}, nil, trafficErr, 20, now)); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	dev, _ := got["device"].(map[string]any)
	if got["format"] != "ipvsplane.status/v1" || got["sync"] != nil || !strings.HasPrefix(fmt.Sprint(got["syncError"]), "no sync recorded") ||
		got["traffic"] != nil || got["trafficError"] != nil || dev["error"] != "no such device" ||
		fmt.Sprint(got["virtualServers"]) != "[]" || fmt.Sprint(got["sets"]) != "[]" {
		t.Errorf("without a daemon:\n%s", b.String())
	}
}

// FuzzReadRecord feeds arbitrary state files to `ipvsplane status`:
// reading and printing them may fail but never panic.
func FuzzReadRecord(f *testing.F) {
	rec := Record{Daemon: Daemon{Node: "node-a", Source: "files", PID: 7, LastSync: time.Unix(1e9, 0), Started: time.Unix(1e9-60, 0)},
		Sync: Sync{Syncs: 3, Errors: []string{"x"}}, Services: map[string]string{"TCP 10.96.0.10:80": "demo/web:http"}}
	data, err := json.Marshal(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, []byte(`{"TCP 10.96.0.10:80":"demo/web:http"}`))
	f.Add([]byte(`{"durationSeconds":1e308,"firstSyncSeconds":-1e308}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, state, names []byte) {
		r, err := parseRecord("status.json", state, names)
		_ = Print(io.Discard, r, err, &Kernel{}, time.Unix(1e9, 0))
	})
}

// The writer writes the latest record only, keeps the names a replaced
// record carried, and writes the last record when stopped.
func TestWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.json")
	w := NewWriter(path, func(err error) { t.Error(err) })
	names := map[string]string{"TCP 10.96.0.10:53": "kube-system/kube-dns:dns-tcp"}
	w.Put(Record{Sync: Sync{Syncs: 1}, Services: names})
	w.Put(Record{Sync: Sync{Syncs: 2}})
	w.Flush()
	r, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Syncs != 2 || !maps.Equal(r.Services, names) {
		t.Errorf("after two records: syncs %d, names %v", r.Syncs, r.Services)
	}

	stop := w.Start(context.Background())
	w.Put(Record{Sync: Sync{Syncs: 3}})
	stop()
	if r, err := ReadRecord(path); err != nil || r.Syncs != 3 {
		t.Errorf("after the writer stopped: %+v, %v", r, err)
	}
}

// The files are replaced through a temporary file of a name no one can
// make ahead: a link planted at the old fixed name is not followed, and
// the files are readable by their owner only.
func TestWriteRecordFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path + ".tmp", NamesFile(path) + ".tmp"} {
		if err := os.Symlink(victim, name); err != nil {
			t.Fatal(err)
		}
	}
	r := &Record{Sync: Sync{Syncs: 1}, Services: map[string]string{"TCP 10.96.0.10:53": "kube-system/kube-dns:dns-tcp"}}
	if err := WriteRecord(path, r, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "kept" {
		t.Errorf("the linked file now holds %q", data)
	}
	for _, name := range []string{path, NamesFile(path)} {
		fi, err := os.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", name, fi.Mode())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 5 {
		t.Errorf("%d files, want the victim, the two links and the two files: %v", len(entries), entries)
	}
}

// The names file reads back as the map it was written from, whatever the
// strings hold.
func TestEncodeNames(t *testing.T) {
	for _, names := range []map[string]string{
		{},
		{"TCP 10.96.0.10:80": "default/web:http"},
		benchNames(1000),
		{"UDP *:30053": "kube-system/dns:dns", `odd"key\`: "tab\there", "<&>": "ünïcode", "ctl\x01": "\u2028"},
	} {
		var got map[string]string
		if err := json.Unmarshal(encodeNames(names), &got); err != nil {
			t.Fatalf("encodeNames(%d names): %v", len(names), err)
		}
		if !maps.Equal(got, names) {
			t.Errorf("encodeNames: read back %v, want %v", got, names)
		}
	}
}

// benchNames is the names of n services with a cluster IP and one in ten
// with a node port.
func benchNames(n int) map[string]string {
	names := make(map[string]string, n+n/10)
	for i := range n {
		name := fmt.Sprintf("ns-%d/svc-%05d:http", i%50, i)
		names[fmt.Sprintf("TCP 10.96.%d.%d:80", i>>8, i&0xff)] = name
		if i%10 == 0 {
			names[fmt.Sprintf("TCP *:%d", 30000+i/10)] = name
		}
	}
	return names
}

// Encoding the names file at 10,000 services.
func BenchmarkEncodeNames(b *testing.B) {
	names := benchNames(10000)
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(names); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encodeNames", func(b *testing.B) {
		for b.Loop() {
			encodeNames(names)
		}
	})
}
