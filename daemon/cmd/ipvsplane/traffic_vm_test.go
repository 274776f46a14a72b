//go:build vmtest

package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// With --service-traffic-metrics the daemon exports each service port's
// connections, packets and bytes from the kernel's counters, and status
// shows their rates: connections through a service are counted on it.
func TestDaemonServiceTrafficMetrics(t *testing.T) {
	n := setupNet(t)
	d := startDaemon(t, n.node, copyManifests(t), "--service-traffic-metrics", "--service-traffic-metrics-interval=1s")
	d.WaitSynced(t, 2*time.Minute)
	const conns = 8
	spread(t, n.client, "10.96.0.10:80", conns)
	series := `{name="web",namespace="demo",port="http",protocol="tcp"}`
	want := map[string]float64{
		"ipvsplane_service_connections_total" + series:                                                           conns,
		`ipvsplane_service_packets_total{direction="in",name="web",namespace="demo",port="http",protocol="tcp"}`: 3 * conns,
		`ipvsplane_service_bytes_total{direction="out",name="web",namespace="demo",port="http",protocol="tcp"}`:  1,
	}
	// The kernel folds its per-CPU counters in every 2 s; the daemon reads
	// them every second. Wait for every series the test checks, not just
	// the first to arrive.
	var got map[string]float64
	reached := func() bool {
		got = scrapeService(t, n)
		for name, min := range want {
			if got[name] < min {
				return false
			}
		}
		return true
	}
	if _, ok := waitFor(30*time.Second, reached); !ok {
		for name, min := range want {
			if got[name] < min {
				t.Errorf("%s = %v, want at least %v", name, got[name], min)
			}
		}
	}
	// Rates need two readings whose window saw traffic: with the kernel's
	// 2 s fold and a 1 s interval, every other window can be empty, so
	// the traffic goes on until status shows it.
	var out string
	var err error
	if _, ok := waitFor(30*time.Second, func() bool {
		spread(t, n.client, "10.96.0.10:80", conns)
		out, err = ipvsplane(t, n.node, "status", "--state-file", d.StateFile)
		return err == nil && strings.Contains(out, "traffic over the") && strings.Contains(out, "demo/web")
	}); !ok {
		t.Errorf("status does not show the traffic rates: %v\n%s", err, out)
	}
}

// scrapeService returns the daemon's ipvsplane_service_* series.
func scrapeService(t *testing.T, n *testNet) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, l := range strings.Split(fetchMetrics(t, n.node), "\n") {
		if !strings.HasPrefix(l, "ipvsplane_service_") || !strings.Contains(l, "{") {
			continue
		}
		name, value, _ := strings.Cut(l, " ")
		out[name], _ = strconv.ParseFloat(value, 64)
	}
	return out
}
