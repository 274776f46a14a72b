// Package traffic exports the traffic of every service port as
// Prometheus counters, summed from the kernel's counters of its IPVS
// virtual servers, and writes its rates for `ipvsplane status`
// (--service-traffic-metrics).
package traffic

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DefaultInterval is how often the daemon reads the virtual
// servers' counters for --service-traffic-metrics: one dump of every
// virtual server each time, whatever the number of scrapes.
const DefaultInterval = 10 * time.Second

// Lister reads every virtual server, with its counters, in one
// dump; *ipvs.Conn is one.
type Lister interface {
	Services(ctx context.Context) ([]ipvs.Service, error)
}

// trafficCounters are a virtual server's or a service port's counters.
type trafficCounters struct {
	Connections uint64
	PacketsIn   uint64
	PacketsOut  uint64
	BytesIn     uint64
	BytesOut    uint64
}

func countersOf(s ipvs.Stats) trafficCounters {
	return trafficCounters{Connections: s.Connections, PacketsIn: s.PacketsIn, PacketsOut: s.PacketsOut, BytesIn: s.BytesIn, BytesOut: s.BytesOut}
}

// since returns what c, a virtual server's reading, counted after prev,
// its reading before. A counter that went back means the virtual server
// was deleted and created again in between, its counters starting from
// zero: then all of c is new.
func (c trafficCounters) since(prev trafficCounters) trafficCounters {
	if c.Connections < prev.Connections || c.PacketsIn < prev.PacketsIn || c.PacketsOut < prev.PacketsOut ||
		c.BytesIn < prev.BytesIn || c.BytesOut < prev.BytesOut {
		return c
	}
	return trafficCounters{
		Connections: c.Connections - prev.Connections, PacketsIn: c.PacketsIn - prev.PacketsIn,
		PacketsOut: c.PacketsOut - prev.PacketsOut, BytesIn: c.BytesIn - prev.BytesIn, BytesOut: c.BytesOut - prev.BytesOut,
	}
}

func (c *trafficCounters) add(o trafficCounters) {
	c.Connections += o.Connections
	c.PacketsIn += o.PacketsIn
	c.PacketsOut += o.PacketsOut
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
}

// trafficPort is one service port's series: the sum over its virtual
// servers.
type trafficPort struct {
	name     model.ServicePortName
	protocol inet.Protocol
	keys     []plan.VirtualKey
	// total is what the port's virtual servers counted while the daemon
	// read them; last, what the latest reading added.
	total, last trafficCounters
	// readings counts the readings the port was in: from the second, last
	// is a rate's numerator.
	readings int
}

// Collector exports the traffic of every service port from the
// kernel's counters of its virtual servers. The kernel is read once an
// interval (see Start), never on a scrape, so that scrapes cost no netlink
// dump however many scrapers there are; scrapes serve the last reading.
//
// The kernel's counters belong to a virtual server and restart from zero
// when it is created again (an address of the Service changed and came
// back, a conflict moved it, the node's addresses changed). Summing them
// as they are would make a port's counter go back, which Prometheus takes
// for a reset of the whole series; instead each reading adds what every
// virtual server counted since the reading before, so a port's counters
// only go up while the daemon runs, and a restart of the daemon is the
// one reset.
type Collector struct {
	source Lister
	now    func() time.Time

	mu     sync.Mutex
	ports  map[model.ServicePortName]*trafficPort
	owners map[plan.VirtualKey]*trafficPort
	// seen holds each counted virtual server's latest reading; spare is
	// the map the next reading fills, swapped in after it.
	seen, spare map[plan.VirtualKey]trafficCounters
	// at and prevAt are the times of the last two readings.
	at, prevAt time.Time

	connections, packets, bytes *prometheus.Desc
}

// New returns a collector of the virtual servers source lists, mapping
// none to a service port yet (Replace, Apply) and read never (Start,
// Refresh).
func New(source Lister, now func() time.Time) *Collector {
	labels := []string{"namespace", "name", "port", "protocol"}
	withDirection := append(slices.Clone(labels), "direction")
	return &Collector{
		source: source, now: now,
		ports:  map[model.ServicePortName]*trafficPort{},
		owners: map[plan.VirtualKey]*trafficPort{},
		seen:   map[plan.VirtualKey]trafficCounters{},
		spare:  map[plan.VirtualKey]trafficCounters{},
		connections: prometheus.NewDesc("ipvsplane_service_connections_total",
			"Connections IPVS scheduled to the service port's virtual servers (all its addresses and node ports).", labels, nil),
		packets: prometheus.NewDesc("ipvsplane_service_packets_total",
			"Packets through the service port's virtual servers; in is from clients, out is replies.", withDirection, nil),
		bytes: prometheus.NewDesc("ipvsplane_service_bytes_total",
			"Bytes through the service port's virtual servers; in is from clients, out is replies.", withDirection, nil),
	}
}

// Planned is what the collector asks of the desired state the last sync
// planned, which the dataplane keeps; *dataplane.Dataplane is one. A
// port's virtual servers are read there, not worked out again.
type Planned interface {
	// Claims returns the virtual servers a service port claims
	// (dataplane.Dataplane.Claims), those another port owns among them.
	Claims(model.ServicePortName) []plan.VirtualKey
	// Owner returns the service port a virtual server is programmed for
	// (dataplane.Dataplane.Owner): of ports that claim one, the planner's
	// choice.
	Owner(plan.VirtualKey) (model.ServicePortName, bool)
}

// Replace maps the virtual servers of a whole desired state to their
// service ports, after a full sync. Ports that stay keep their counters.
func (t *Collector) Replace(services []model.ServicePort, planned Planned) {
	t.mu.Lock()
	defer t.mu.Unlock()
	present := make(map[model.ServicePortName]bool, len(services))
	for i := range services {
		present[services[i].Name] = true
		t.set(&services[i], planned)
	}
	for name := range t.ports {
		if !present[name] {
			delete(t.ports, name)
		}
	}
	clear(t.owners)
	for _, p := range t.ports {
		for _, k := range p.keys {
			t.claim(k, planned)
		}
	}
	maps.DeleteFunc(t.seen, func(k plan.VirtualKey, _ trafficCounters) bool { return t.owners[k] == nil })
}

// Apply follows an incremental sync's changes, in their time: the
// virtual servers of the changed ports, those they had and those they
// have, go to their owners.
func (t *Collector) Apply(changes []model.Change, planned Planned) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var touched []plan.VirtualKey
	for _, c := range changes {
		if p := t.ports[c.Name]; p != nil {
			touched = append(touched, p.keys...)
		}
		if c.Port == nil {
			delete(t.ports, c.Name)
			continue
		}
		t.set(c.Port, planned)
		touched = append(touched, t.ports[c.Name].keys...)
	}
	for _, k := range touched {
		t.claim(k, planned)
	}
}

// set records the port's virtual servers, all it claims in the planned
// state; t.mu is held. Which of them count for it is claim's to say.
func (t *Collector) set(sp *model.ServicePort, planned Planned) {
	p := t.ports[sp.Name]
	if p != nil && p.protocol != sp.Protocol {
		// Another protocol is another series.
		p = nil
	}
	if p == nil {
		p = &trafficPort{name: sp.Name, protocol: sp.Protocol}
		t.ports[sp.Name] = p
	}
	// Sorted, so that claim finds a key in the log of their number: a
	// Service may list thousands of external IPs, and claim runs for
	// each of them.
	p.keys = planned.Claims(sp.Name)
	slices.SortFunc(p.keys, compareKeys)
}

// compareKeys orders virtual servers by address, protocol and port.
func compareKeys(a, b plan.VirtualKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

// claim gives virtual server k to the port that owns it, or to none;
// t.mu is held. A virtual server that passes to another port keeps its
// last reading, since the kernel's counters go on; one that no port
// counts loses it: if it comes back, it is a new virtual server whose
// counters start from zero.
func (t *Collector) claim(k plan.VirtualKey, planned Planned) {
	var p *trafficPort
	if name, ok := planned.Owner(k); ok {
		p = t.ports[name]
	}
	if p != nil {
		if _, claims := slices.BinarySearchFunc(p.keys, k, compareKeys); !claims {
			p = nil
		}
	}
	if p == nil {
		delete(t.owners, k)
		delete(t.seen, k)
		return
	}
	t.owners[k] = p
}

// Refresh reads every virtual server's counters in one dump and adds
// what each counted since the last reading to its service port.
func (t *Collector) Refresh(ctx context.Context) error {
	svcs, err := t.source.Services(ctx)
	if err != nil {
		return fmt.Errorf("reading the IPVS virtual servers' counters: %w", err)
	}
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.account(svcs, at)
	return nil
}

// account adds a reading taken at time `at`; t.mu is held. Virtual servers that
// are no service port's (another program's, a firewall mark's) are
// skipped.
func (t *Collector) account(svcs []ipvs.Service, at time.Time) {
	for _, p := range t.ports {
		p.last = trafficCounters{}
	}
	clear(t.spare)
	for i := range svcs {
		k, ok := dataplane.VirtualKeyOf(svcs[i])
		if !ok {
			continue
		}
		p := t.owners[k]
		if p == nil {
			continue
		}
		c := countersOf(svcs[i].Stats)
		p.last.add(c.since(t.seen[k]))
		t.spare[k] = c
	}
	// Virtual servers missing from this reading drop out of seen: one
	// that comes back starts from zero.
	t.seen, t.spare = t.spare, t.seen
	for _, p := range t.ports {
		p.total.add(p.last)
		p.readings++
	}
	t.prevAt, t.at = t.at, at
}

// Describe and Collect make Collector a prometheus.Collector of
// constant metrics: the values are the kernel's, not counted here.
func (t *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.connections
	ch <- t.packets
	ch <- t.bytes
}

// Collect serves the last reading; before the first, nothing.
func (t *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range t.snapshot() {
		n := p.name
		proto := p.protocol.String()
		counter := func(d *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{n.Namespace, n.Name, n.Port, proto}, extra...)...)
		}
		counter(t.connections, p.total.Connections)
		counter(t.packets, p.total.PacketsIn, "in")
		counter(t.packets, p.total.PacketsOut, "out")
		counter(t.bytes, p.total.BytesIn, "in")
		counter(t.bytes, p.total.BytesOut, "out")
	}
}

// snapshot copies the ports' totals, so that a slow scrape does not hold
// up the syncs.
func (t *Collector) snapshot() []trafficPort {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at.IsZero() {
		return nil
	}
	out := make([]trafficPort, 0, len(t.ports))
	for _, p := range t.ports {
		if p.readings > 0 {
			out = append(out, trafficPort{name: p.name, protocol: p.protocol, total: p.total})
		}
	}
	return out
}

// rates computes each port's rates from the last two readings; a port
// that was not in both has none yet.
func (t *Collector) rates() *status.Traffic {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &status.Traffic{At: t.at}
	if t.prevAt.IsZero() {
		return r
	}
	r.Seconds = t.at.Sub(t.prevAt).Seconds()
	if r.Seconds <= 0 {
		return r
	}
	for _, p := range t.ports {
		if p.readings < 2 || p.last == (trafficCounters{}) {
			continue
		}
		l := p.last
		r.Ports = append(r.Ports, status.PortRate{
			Service: p.name.String(), Protocol: p.protocol.String(),
			ConnectionsPS: float64(l.Connections) / r.Seconds,
			PacketsInPS:   float64(l.PacketsIn) / r.Seconds, PacketsOutPS: float64(l.PacketsOut) / r.Seconds,
			BytesInPS: float64(l.BytesIn) / r.Seconds, BytesOutPS: float64(l.BytesOut) / r.Seconds,
		})
	}
	slices.SortFunc(r.Ports, func(a, b status.PortRate) int {
		return cmp.Or(cmp.Compare(b.BytesInPS+b.BytesOutPS, a.BytesInPS+a.BytesOutPS), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Protocol, b.Protocol))
	})
	return r
}

// run reads the kernel on every tick until ctx ends, and hands each
// reading's error (nil when it worked) to after. Scrapes in between are
// served from the last reading.
func (t *Collector) run(ctx context.Context, ticks <-chan time.Time, after func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		after(t.Refresh(ctx))
	}
}

// Start starts --service-traffic-metrics: the collector in reg and a reading every interval, on an IPVS connection of its own
// so that it never waits behind a sync's. The function returned stops the
// readings and closes the connection.
func Start(ctx context.Context, log *zap.Logger, reg prometheus.Registerer, now func() time.Time, interval time.Duration, stateFile string) (*Collector, func(), error) {
	conn, err := ipvs.Dial(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("service traffic metrics: %w", err)
	}
	t := New(conn, now)
	if err := reg.Register(t); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("service traffic metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ticker := time.NewTicker(interval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.run(ctx, ticker.C, func(err error) { t.report(log, stateFile, err) })
	}()
	return t, func() {
		cancel()
		<-done
		ticker.Stop()
		conn.Close()
	}, nil
}

// report logs a failed reading, or writes the rates for `ipvsplane
// status` when the state file is on.
func (t *Collector) report(log *zap.Logger, stateFile string, err error) {
	if err != nil {
		log.Warn("cannot read the service traffic counters; the metrics keep the last reading", zap.Error(err))
		return
	}
	if stateFile == "" {
		return
	}
	if err := status.WriteTraffic(stateFile, t.rates()); err != nil {
		log.Warn("cannot write the traffic rates", zap.Error(err))
	}
}
