//go:build vmtest

package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The daemon restarted under traffic, after SIGTERM and after SIGKILL:
// long-lived connections carrying traffic throughout and new connections
// opened all along survive, every real server keeps its weight and its
// counters only grow, and the restarted daemon's first sync changes
// nothing in the kernel.
func TestFaultRestartUnderTraffic(t *testing.T) {
	n := setupNet(t)
	for i, b := range n.backends {
		b.ServeEcho(t, fmt.Sprintf("10.244.%d.2:%d", i+1, echoPort))
	}
	dir := copyManifests(t)
	addrs := echoServices(t, dir, 3)
	d := startDaemon(t, n.node, dir)
	d.WaitSynced(t, 2*time.Minute)

	tr := startTraffic(t, n.client, addrs, 4)
	time.Sleep(2 * time.Second)
	before := readReals(t, n.node)
	if len(before) < 9 {
		t.Fatalf("%d real servers programmed, want at least the 9 of the echo services", len(before))
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if sig == syscall.SIGKILL {
			d.Proc.Kill()
		} else if err := d.Stop(); err != nil {
			t.Fatalf("the daemon's exit after SIGTERM: %v", err)
		}
		// The kernel carries the traffic while no daemon runs.
		time.Sleep(time.Second)
		d = startDaemon(t, n.node, dir)
		took := d.WaitSynced(t, 2*time.Minute)
		time.Sleep(2 * time.Second)
		after := readReals(t, n.node)
		compareReals(t, sig.String(), before, after)
		before = after

		body := fetchMetrics(t, n.node)
		var changes []string
		total := 0.0
		for _, op := range []string{"create_set", "add_entries", "del_entries", "replace_rules", "add_virtual", "update_virtual",
			"delete_virtual", "add_real", "update_real", "delete_real", "bind", "unbind"} {
			v := metricValue(body, fmt.Sprintf("ipvsplane_sync_operations_total{op=%q}", op))
			total += v
			if v > 0 {
				changes = append(changes, fmt.Sprintf("%s %v", op, v))
			}
		}
		full := metricValue(body, `kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`)
		t.Logf("after %v: restarted daemon's first sync in %v (%v full syncs), %v kernel operations %v; %d long-lived connections alive, %d new connections so far (%d failed), %d lines echoed",
			sig, took.Round(time.Millisecond), full, total, changes, tr.long-len(tr.brokenNow()), tr.newOK.Load()+tr.newFail.Load(), tr.newFail.Load(), tr.echoes.Load())
		if total != 0 || full < 1 {
			t.Errorf("after %v the restarted daemon's syncs changed the kernel: %v", sig, changes)
		}
	}

	broken, newErrs := tr.end()
	t.Logf("connections kept: %d/%d long-lived; new connections: %d/%d succeeded; %d lines echoed; %s",
		tr.long-len(broken), tr.long, tr.newOK.Load(), tr.newOK.Load()+tr.newFail.Load(), tr.echoes.Load(), tr.slowness())
	for _, b := range broken {
		t.Errorf("long-lived connection broken: %s", b)
	}
	for _, e := range newErrs {
		t.Errorf("new connection failed: %s", e)
	}
}

func (tr *echoLoad) brokenNow() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.broken...)
}

// Outside changes to a running daemon's kernel state (ipvsadm -C, ipset
// flush, deleting the dummy device, nft flush ruleset) are repaired by
// the next periodic sync, within one sync period; a change to a service
// soon after makes the canary of that change's sync notice at once.
func TestFaultOutsideInterference(t *testing.T) {
	n := setupNet(t)
	dir := copyManifests(t)
	const syncPeriod = 5 * time.Second
	d := startDaemon(t, n.node, dir, "--ipvs-sync-period="+syncPeriod.String(), "--ipvs-min-sync-period=0s")
	d.WaitSynced(t, 2*time.Minute)

	// A service whose port the canary cases change, so that a sync
	// runs; it is left out of the comparisons.
	const triggerIP = "10.99.9.9"
	trigger, port := filepath.Join(dir, "trigger.yaml"), 0
	poke := func() {
		port++
		writeFile(t, trigger, fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: trigger, namespace: faults}\nspec: {clusterIP: %s, clusterIPs: [%s], ports: [{port: %d}]}\n", triggerIP, triggerIP, port))
	}
	state := func() string {
		var keep []string
		for _, l := range strings.Split(kernelState(t, n.node), "\n") {
			if !strings.Contains(l, triggerIP) {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	// afterPeriodicSync returns once a full sync has just ended, so that
	// the next periodic one is a whole sync period away.
	afterPeriodicSync := func() {
		t.Helper()
		before := strings.Count(d.Out.String(), `synced	{"full": true`)
		// The period counts from the last full sync, which can be up to a
		// period before the wait starts: a full period of slack beyond it.
		if _, ok := waitFor(3*syncPeriod, func() bool { return strings.Count(d.Out.String(), `synced	{"full": true`) > before }); !ok {
			t.Fatalf("no periodic full sync within %v", 3*syncPeriod)
		}
	}

	poke()
	afterPeriodicSync()
	want := state()
	if !strings.Contains(want, "-A -t 10.96.0.10:80") {
		t.Fatalf("the demo's services are not programmed:\n%s", want)
	}
	cases := []struct {
		name string
		cmd  []string
	}{
		{"ipvsadm -C", []string{"ipvsadm", "-C"}},
		{"ipset flush", []string{"ipset", "flush"}},
		{"dummy device deleted", []string{"ip", "link", "del", "kube-ipvs0"}},
		{"nft flush ruleset", []string{"nft", "flush", "ruleset"}},
	}
	for _, c := range cases {
		for _, canary := range []bool{false, true} {
			name := c.name + map[bool]string{false: ", next periodic sync", true: ", canary of a change's sync"}[canary]
			afterPeriodicSync()
			// The canary looks at most once a second: the periodic
			// sync's canary must not be the last one when the change
			// comes.
			time.Sleep(time.Second)
			logged := len(d.Out.String())
			n.node.Run(t, c.cmd[0], c.cmd[1:]...)
			start := time.Now()
			if canary {
				poke()
			}
			// The repair is the first full sync that changes something;
			// the daemon's log says when it ended and how long it took.
			var repair []string
			if _, ok := waitFor(3*syncPeriod, func() bool {
				repair = repairLine.FindStringSubmatch(d.Out.String()[logged:])
				return repair != nil
			}); !ok {
				t.Fatalf("%s: no repairing sync within %v", name, 3*syncPeriod)
			}
			ended, err := time.Parse(time.RFC3339Nano, repair[1])
			if err != nil {
				t.Fatal(err)
			}
			syncTook, _ := time.ParseDuration(repair[2])
			took := ended.Sub(start)
			t.Logf("%s: converged again %v after the interference, by a sync of %v (sync period %v)",
				name, took.Round(10*time.Millisecond), syncTook.Round(time.Millisecond), syncPeriod)
			if got := state(); got != want {
				t.Fatalf("%s: not repaired:\nwant:\n%s\ngot:\n%s", name, want, got)
			}
			// The next periodic sync starts within one sync period, and
			// repairs by its end; a repair sooner than one sync period
			// after the last periodic sync is the canary's.
			if took > syncPeriod+syncTook+time.Second {
				t.Errorf("%s: repaired after %v, more than one sync period (%v) and the sync", name, took, syncPeriod)
			}
			if canary && took >= syncPeriod {
				t.Errorf("%s: the canary did not notice before the periodic sync: %v", name, took)
			}
			if reply, err := n.client.DialTCP("", "10.96.0.10:80", 3*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
				t.Errorf("%s: after the repair the service answers %q, %v", name, reply, err)
			}
		}
	}
	if code, _, err := httpGet(n.node, "127.0.0.1:10256", "/healthz"); err != nil || code != 200 {
		t.Errorf("/healthz: %d %v", code, err)
	}
}

// repairLine finds a full sync that changed something in the daemon's
// log, with the time it ended and how long it took.
var repairLine = regexp.MustCompile(`(?m)^(\S+)\s+INFO\s+synced\s+\{"full": true, "operations": [1-9][0-9]*,.*"took": "([^"]+)"`)

// malformedService is one of the bad documents of TestFaultBadInput and
// what the daemon must say about it.
type malformedService struct {
	name, doc string
	// field is what the report must name.
	field string
}

// badInput writes 1,000 services, 900 valid and 100 malformed in five
// ways, and returns the malformed ones.
func badInput(t *testing.T, dir string) []malformedService {
	var valid, bad strings.Builder
	var out []malformedService
	svcDoc := func(name, clusterIP, ports, extra string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: bulk}\nspec:\n  clusterIP: %q\n  clusterIPs: [%q]\n  ports: [%s]\n%s---\n", name, clusterIP, clusterIP, ports, extra)
	}
	for i := range 900 {
		extra := ""
		if i < 20 {
			// These own an external IP that a malformed service claims too.
			extra = fmt.Sprintf("  externalIPs: [198.51.100.%d]\n", 100+i)
		}
		valid.WriteString(svcDoc(fmt.Sprintf("ok-%03d", i), fmt.Sprintf("10.97.%d.%d", i/250, i%250+1), "{name: p, port: 80}", extra))
	}
	for i := range 100 {
		// Named to sort after the valid ones: of two services claiming
		// one virtual server with the same kind of address, the first by
		// name keeps it.
		name := fmt.Sprintf("x-bad-%03d", i)
		ip := fmt.Sprintf("10.98.0.%d", i+1)
		m := malformedService{name: name}
		switch i / 20 {
		case 0:
			m.doc, m.field = svcDoc(name, fmt.Sprintf("10.98.%d.300", i), "{name: p, port: 80}", ""), "clusterIP"
		case 1:
			m.doc, m.field = svcDoc(name, ip, fmt.Sprintf("{name: p, port: %d}", 65536+i), ""), "port"
		case 2:
			m.doc, m.field = svcDoc(name, ip, "{name: p, port: 80, protocol: QUIC}", ""), "protocol"
		case 3:
			m.doc, m.field = svcDoc(name, ip, "{name: p, port: 80}", fmt.Sprintf("  externalIPs: [198.51.100.%d.1]\n", i)), "externalIPs"
		case 4:
			// The same external IP and port as ok-0xx.
			m.doc, m.field = svcDoc(name, ip, "{name: p, port: 80}", fmt.Sprintf("  externalIPs: [198.51.100.%d]\n", 100+i-80)), "198.51.100."
		}
		bad.WriteString(m.doc)
		out = append(out, m)
	}
	writeFile(t, filepath.Join(dir, "bulk-valid.yaml"), valid.String())
	writeFile(t, filepath.Join(dir, "bulk-malformed.yaml"), bad.String())
	return out
}

// 1,000 services of which 100 are malformed: the 900 are programmed, each
// of the 100 is reported with its object and field, the daemon stays
// healthy and programs later changes.
func TestFaultBadInput(t *testing.T) {
	n := setupNet(t)
	dir := t.TempDir()
	bad := badInput(t, dir)
	d := startDaemon(t, n.node, dir)
	d.WaitSynced(t, 5*time.Minute)

	// 900 cluster IPs and the 20 external IPs the valid services own, and
	// the cluster IPs of the 40 malformed services whose fault is one
	// address: a bad external IP is left out alone, and an external IP
	// another service has stays that service's.
	const wantVirtual = 900 + 20 + 40
	var got int
	took, ok := waitFor(time.Minute, func() bool {
		got = strings.Count(n.node.Run(t, "ipvsadm", "-Sn"), "-A ")
		return got == wantVirtual
	})
	if !ok {
		t.Fatalf("%d virtual servers programmed, want %d", got, wantVirtual)
	}
	t.Logf("%d virtual servers programmed %v after the first sync", got, took.Round(time.Millisecond))

	log := d.Out.String()
	reported := 0
	for i, m := range bad {
		line := ""
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "bulk/"+m.name) {
				line = l
				break
			}
		}
		switch {
		case line == "":
			t.Errorf("%s is not reported", m.name)
		case !strings.Contains(line, m.field):
			t.Errorf("%s: the report does not name %q: %s", m.name, m.field, line)
		default:
			reported++
			if i%20 == 0 {
				t.Logf("report of %s: %s", m.name, line)
			}
		}
	}
	body := fetchMetrics(t, n.node)
	invalid, leftOut := metricValue(body, "ipvsplane_invalid_objects_total"), metricValue(body, "ipvsplane_left_out_service_ports")
	t.Logf("%d of %d malformed services reported with object and field; ipvsplane_invalid_objects_total %v, ipvsplane_left_out_service_ports %v",
		reported, len(bad), invalid, leftOut)
	// 80 are refused (60) or lose an address (20) as they are read, 20
	// conflict with a valid service.
	if invalid < 80 || leftOut != 20 {
		t.Errorf("ipvsplane_invalid_objects_total %v (want at least 80), ipvsplane_left_out_service_ports %v (want 20)", invalid, leftOut)
	}
	if code, body, err := httpGet(n.node, "127.0.0.1:10256", "/healthz"); err != nil || code != 200 {
		t.Errorf("/healthz: %d %s %v", code, body, err)
	}

	// A later change is programmed as ever.
	writeFile(t, filepath.Join(dir, "later.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: later, namespace: bulk}\nspec:\n  clusterIP: 10.99.0.1\n  clusterIPs: [10.99.0.1]\n  ports: [{name: p, port: 80}]\n")
	took, ok = waitFor(30*time.Second, func() bool {
		return strings.Contains(n.node.Run(t, "ipvsadm", "-Sn"), "-A -t 10.99.0.1:80")
	})
	t.Logf("a later change programmed in %v", took.Round(time.Millisecond))
	if !ok {
		t.Errorf("a service added after the malformed ones is not programmed")
	}
	if strings.Count(d.Out.String(), "sync failed") > 0 {
		t.Errorf("syncs failed:\n%s", d.Out.String())
	}
}
