package conntracksettings

import (
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

// conntrackCollector reports the conntrack table's use against its limit
// at each scrape, read from /proc/sys/net/netfilter, so that an alert can
// fire before the table fills and new connections are dropped (kube-proxy
// has no such metric; node_exporter's nf_conntrack collector reads the
// same files). Without the nf_conntrack module the files are missing and
// nothing is reported.
type conntrackCollector struct {
	procSys      string
	entries, max *prometheus.Desc
}

// NewCollector returns the collector of the conntrack table's use and
// limit below procSys (/proc/sys).
func NewCollector(procSys string) prometheus.Collector {
	return &conntrackCollector{
		procSys: procSys,
		entries: prometheus.NewDesc("ipvsplane_conntrack_entries", "Flows in the conntrack table of the node's network namespace (net.netfilter.nf_conntrack_count).", nil, nil),
		max:     prometheus.NewDesc("ipvsplane_conntrack_entries_limit", "The conntrack table's size limit (net.netfilter.nf_conntrack_max).", nil, nil),
	}
}

// Describe sends the metrics' descriptions.
func (c *conntrackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.max
}

// Collect reads the table's use and limit.
func (c *conntrackCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range []struct {
		desc *prometheus.Desc
		name string
	}{{c.entries, "nf_conntrack_count"}, {c.max, "nf_conntrack_max"}} {
		n, err := readInt(filepath.Join(c.procSys, "net/netfilter", f.name))
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(n))
	}
}
