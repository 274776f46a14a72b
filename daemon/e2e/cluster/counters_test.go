//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nodeCountersScript prints a node's drop and error counters: conntrack's
// statistics per CPU (`conntrack -S`), the IP, UDP and TCP lines of
// /proc/net/snmp, and IPVS's totals where IPVS is loaded. Read before and after a takeover,
// they tell a request lost in the kernel (conntrack insert_failed or drop,
// UDP InErrors or RcvbufErrors, TCP retransmissions) from one that was
// only slow.
const nodeCountersScript = `conntrack -S; grep -E '^(Ip|Udp|Tcp):' /proc/net/snmp; ` +
	`awk 'NR == 3 { print "IpVs: Conns InPkts OutPkts InBytes OutBytes"; print "IpVs:", $1, $2, $3, $4, $5 }' /proc/net/ip_vs_stats 2>/dev/null; true`

// nodeCounters are the counters nodeCountersScript printed, by name:
// conntrack's summed over CPUs ("conntrack.drop"), the others as
// "Udp.InErrors".
type nodeCounters map[string]int64

// parseNodeCounters reads nodeCountersScript's output: `key=value` words
// (conntrack's), and pairs of lines "Proto: names..." then "Proto:
// values..." (/proc/net/snmp's; IPVS's in hexadecimal).
func parseNodeCounters(out string) nodeCounters {
	c := nodeCounters{}
	var header []string
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if proto, ok := strings.CutSuffix(fields[0], ":"); ok {
			if header == nil || header[0] != fields[0] {
				header = fields
				continue
			}
			base := 10
			if proto == "IpVs" {
				base = 16
			}
			for i, v := range fields[1:] {
				if n, err := strconv.ParseInt(v, base, 64); err == nil && i+1 < len(header) {
					c[proto+"."+header[i+1]] += n
				}
			}
			header = nil
			continue
		}
		for _, w := range fields {
			if k, v, ok := strings.Cut(w, "="); ok && k != "cpu" {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					c["conntrack."+k] += n
				}
			}
		}
	}
	return c
}

// lossCounters are the counters changed reports: those a lost or
// refused packet moves, and IPVS's connections for scale.
var lossCounters = map[string]bool{
	"conntrack.insert_failed": true, "conntrack.drop": true, "conntrack.early_drop": true, "conntrack.error": true, "conntrack.invalid": true,
	"Ip.InDiscards": true, "Ip.OutDiscards": true, "Ip.OutNoRoutes": true, "Ip.InAddrErrors": true,
	"Udp.InErrors": true, "Udp.NoPorts": true, "Udp.RcvbufErrors": true, "Udp.SndbufErrors": true,
	"Tcp.RetransSegs": true, "Tcp.InErrs": true, "Tcp.OutRsts": true, "Tcp.AttemptFails": true, "Tcp.EstabResets": true,
	"IpVs.Conns": true,
}

// changed returns, sorted by name, the lossCounters that moved from
// before to c, as "name +delta".
func (c nodeCounters) changed(before nodeCounters) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if d := c[k] - before[k]; d != 0 && lossCounters[k] {
			out = append(out, fmt.Sprintf("%s %+d", k, d))
		}
	}
	return strings.Join(out, ", ")
}

// readNodeCounters reads node i's counters; a failed read is logged and
// gives none, since they only explain a failure.
func (tk *takeover) readNodeCounters(t *testing.T, i int) nodeCounters {
	out, err := tk.c.exec(context.Background(), tk.ns, tk.readers[i], nodeCountersScript)
	if err != nil {
		t.Logf("reading %s's counters: %v", tk.nodes[i], err)
		return nil
	}
	return parseNodeCounters(out)
}

// allNodeCounters reads every node's counters, in tk.nodes' order.
func (tk *takeover) allNodeCounters(t *testing.T) []nodeCounters {
	out := make([]nodeCounters, len(tk.nodes))
	for i := range tk.nodes {
		out[i] = tk.readNodeCounters(t, i)
	}
	return out
}

// countersMoved says, per node, which counters moved from before to
// now.
func (tk *takeover) countersMoved(now, before []nodeCounters) string {
	var out []string
	for i, node := range tk.nodes {
		moved := "not read"
		if now[i] != nil && before[i] != nil {
			moved = now[i].changed(before[i])
		}
		out = append(out, node+": "+moved)
	}
	return strings.Join(out, "; ")
}

// Counters from conntrack -S, /proc/net/snmp and /proc/net/ip_vs_stats as
// the node prints them.
func TestParseNodeCounters(t *testing.T) {
	out := `cpu=0   	found=0 invalid=3 insert=0 insert_failed=1 drop=0 early_drop=0 error=0 search_restart=2
cpu=1   	found=0 invalid=4 insert=0 insert_failed=0 drop=5 early_drop=0 error=0 search_restart=0
Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 1 64 1000 0
Tcp: RtoAlgorithm RtoMin RetransSegs
Tcp: 1 200 7
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors
Udp: 50 2 1 60 0
IpVs: Conns InPkts OutPkts InBytes OutBytes
IpVs: 1A 10 0 FF 0
`
	c := parseNodeCounters(out)
	for k, want := range map[string]int64{"conntrack.invalid": 7, "conntrack.insert_failed": 1, "conntrack.drop": 5,
		"Ip.InReceives": 1000, "Tcp.RetransSegs": 7, "Udp.InErrors": 1, "IpVs.Conns": 26, "IpVs.InBytes": 255} {
		if c[k] != want {
			t.Errorf("%s = %d, want %d", k, c[k], want)
		}
	}
	if _, ok := c["conntrack.cpu"]; ok {
		t.Error("the CPU number counted as a counter")
	}
	later := maps.Clone(c)
	later["conntrack.drop"] += 2
	later["Udp.InErrors"]++
	later["Ip.InReceives"] += 100 // moves with any traffic: not reported
	if got, want := later.changed(c), "Udp.InErrors +1, conntrack.drop +2"; got != want {
		t.Errorf("changed = %q, want %q", got, want)
	}
}
