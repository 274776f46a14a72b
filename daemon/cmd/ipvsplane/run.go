package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/httpserver"
	"github.com/ipvsplane/ipvsplane/daemon/internal/memory"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/nodeaddrs"
	"github.com/ipvsplane/ipvsplane/daemon/internal/problems"
	"github.com/ipvsplane/ipvsplane/daemon/internal/proxier"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	clientmetrics "k8s.io/client-go/tools/metrics"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// setup works out the settings from the loaded options; the notes are
// logged once.
func (a *app) setup(log *zap.Logger, o *options, cmd *cobra.Command) (*config.Settings, error) {
	addrs, err := a.nodeAddresses(cmd.Context(), o)
	if err != nil {
		return nil, err
	}
	s, err := config.Resolve(o.kp, hostname(), addrs)
	if err != nil {
		return nil, err
	}
	if err := s.ResolveOwn(o.own); err != nil {
		return nil, err
	}
	for _, n := range s.Notes {
		log.Warn("setting does not apply to ipvsplane; ignored", zap.String("setting", n))
	}
	return s, nil
}

// hostname is the host name the kernel reports, or none.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// nodeAddresses lists the node's addresses: its interfaces', or offline
// those of --node-addresses.
func (a *app) nodeAddresses(ctx context.Context, o *options) ([]netip.Addr, error) {
	if !o.offline {
		addrs, err := a.nodeAddrs(ctx, dataplane.DefaultDevice)
		if err != nil {
			return nil, fmt.Errorf("listing the node's addresses: %w", err)
		}
		return addrs, nil
	}
	var addrs []netip.Addr
	for _, s := range o.nodeAddresses {
		ip, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--node-addresses: %w", err)
		}
		addrs = append(addrs, ip.Unmap())
	}
	return addrs, nil
}

// initNode makes the settings kube-proxy makes before it starts, with
// full privileges: the conntrack table's size and timeouts.
func (a *app) initNode(log *zap.Logger, o *options) error {
	changed, skipped, err := a.setConntrack(&o.kp.Conntrack)
	for _, c := range changed {
		log.Info("set conntrack setting", zap.String("setting", c))
	}
	if skipped != nil {
		log.Warn("conntrack table size left as it is: this network namespace may not change it", zap.Error(skipped))
	}
	if err != nil {
		return fmt.Errorf("setting the conntrack parameters of the configuration: %w", err)
	}
	return nil
}

// recorder returns where the daemon records Events: the API server's
// events.k8s.io/v1 with the Kubernetes source, the log with files. The
// function returned posts what is still queued, for a few seconds at most.
func (a *app) recorder(log *zap.Logger, o *options, node string) (events.Recorder, func()) {
	if o.source != sourceKubernetes {
		return events.LogRecorder{Log: log}, func() {}
	}
	sink, err := a.eventSink(o)
	if err != nil {
		log.Warn("cannot record events; logging them instead", zap.Error(err))
		return events.LogRecorder{Log: log}, func() {}
	}
	r := events.NewAPIRecorder(sink, log, node, a.now)
	return r, func() { r.Close(5 * time.Second) }
}

// initOnly is kube-proxy's --init-only: the scheduler check, then the
// conntrack settings, the IPVS sysctls and timeouts, then exit. A check
// that fails leaves the node as it was.
func (a *app) initOnly(ctx context.Context, log *zap.Logger, o *options, node *model.Node) error {
	k, err := a.dial(&dataplane.Config{})
	if err != nil {
		return err
	}
	defer k.Close()
	if err := k.CheckScheduler(ctx, node.Scheduler); err != nil {
		return err
	}
	if err := a.initNode(log, o); err != nil {
		return err
	}
	return k.InitNode(ctx, node)
}

// writeConfig writes the configuration as a KubeProxyConfiguration file,
// as kube-proxy's --write-config-to does. ipvsplane's own section is
// written only when it differs from the defaults, so that the file stays
// one kube-proxy reads otherwise.
func writeConfig(path string, kp *kubeproxy.KubeProxyConfiguration, own config.Own) error {
	data, err := yaml.Marshal(kp)
	if err != nil {
		return err
	}
	if !own.Equal(config.DefaultOwn()) {
		own, err := yaml.Marshal(map[string]config.Own{"ipvsplane": own})
		if err != nil {
			return err
		}
		data = append(data, own...)
	}
	return os.WriteFile(path, data, 0o644)
}

// run is the daemon: it serves health and metrics, follows the source and
// syncs the kernel until it gets SIGINT or SIGTERM. On exit it leaves the
// kernel as it is, so traffic keeps flowing while it restarts.
func (a *app) run(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command) error {
	s, err := a.setup(log, o, cmd)
	if err != nil {
		return err
	}
	// kube-proxy's flags that do one thing and exit.
	switch {
	case o.writeConfigTo != "":
		return writeConfig(o.writeConfigTo, o.kp, o.own)
	case o.cleanup:
		return a.cleanup(ctx, o.stateFile, false)
	}
	if err := a.checkKernel(); err != nil {
		return err
	}
	if o.initOnly {
		return a.initOnly(ctx, log, o, &s.Node)
	}
	return a.runDaemon(ctx, log, o, s)
}

// daemonParts are the parts of the daemon that runDaemon wires together.
type daemonParts struct {
	log     *zap.Logger
	metrics *metrics.Metrics
	health  *healthcheck.ProxyHealth
	events  events.Recorder
	tracker *watcher.Tracker
	proxier *proxier.Proxier
	runner  *watcher.Runner
}

// runDaemon is run past the one-shot flags: it sets up the kernel, the
// daemon and its servers, then follows the source until stopped. The
// defers undo the set-up in reverse order. Everything that can fail (the
// API server's client from the kubeconfig, IPVS and the scheduler, the
// listeners) is checked before the first setting is written to the node,
// so that a start that fails changes nothing.
func (a *app) runDaemon(ctx context.Context, log *zap.Logger, o *options, s *config.Settings) error {
	mem, err := memory.NewSoftLimit(o.memoryLimit)
	if err != nil {
		return err
	}
	var client *watcher.Client
	if o.source == sourceKubernetes {
		if client, err = a.kubeClient(o); err != nil {
			return err
		}
	}
	p := &daemonParts{log: log}
	// request asks the runner for a sync. The runner calls the proxier,
	// and the dataplane, the proxier and the tracker's hook ask the runner
	// for syncs: a cycle, and the runner, last made (its gate needs the
	// tracker, its function the proxier), is the one reached late. The
	// callers of request run only once p.runner is set.
	request := func() { p.runner.Request() }
	// A reread of the kernel ends between syncs: ask for the sync that
	// merges it.
	k, err := a.dial(&dataplane.Config{ResyncInterval: s.SyncPeriod, DrainTimeout: o.own.DrainTimeout.Duration, Binding: o.binding(), KernelRead: request})
	if err != nil {
		return err
	}
	defer k.Close()
	served := servedFamilies(log, k, &s.Node)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// As kube-proxy: a scheduler the kernel lacks stops the start, rather
	// than failing every virtual server.
	if err := k.CheckScheduler(ctx, s.Node.Scheduler); err != nil {
		return err
	}
	defer a.observers(p, o, s, served)()
	cfg := proxier.Config{Log: log, Dataplane: k, Metrics: p.metrics, Health: p.health, Events: p.events, Now: a.now,
		RequestSync: request, RemoveLegacy: a.removeLegacy, Records: a.stateWriter(log, o),
		Daemon: status.Daemon{Node: s.Node.Name, Source: o.source, Started: a.now()}}
	if cfg.Records != nil {
		defer cfg.Records.Start(ctx)()
	}
	if o.own.ServiceTrafficMetrics {
		t, stopTraffic, err := traffic.Start(ctx, log, p.metrics.Registry(), a.now, o.own.ServiceTrafficMetricsInterval.Duration, o.stateFile)
		if err != nil {
			return err
		}
		defer stopTraffic()
		cfg.Traffic = t
	}
	cfg.HealthChecks = healthcheck.NewServiceServers(healthcheck.ServiceConfig{Log: log, Node: s.Node.Name, Healthy: p.health.Healthy, Events: p.events})
	defer cfg.HealthChecks.Close(context.Background())
	p.tracker = a.newTracker(p, s, o.source == sourceKubernetes, request)
	if o.source == sourceKubernetes {
		defer a.stopWaitingForNode(p, s.Node.Name).Stop()
	}
	gc := memory.NewFirstSyncGC()
	defer gc.Synced()
	cfg.Tracker, cfg.Programming, cfg.Synced = p.tracker, gc.Listed, memory.NewAfterSync(gc, mem).Synced
	p.proxier = proxier.New(cfg)
	p.runner = watcher.NewRunner(watcher.RunnerConfig{MinSyncPeriod: s.MinSyncPeriod, SyncPeriod: s.SyncPeriod, Ready: p.tracker.NodeKnown}, p.proxier.Sync)
	return a.start(ctx, stop, p, o, s, k, client)
}

// observers sets the parts that observe the daemon: its metrics, its
// health and where it records Events. The function returned posts the
// Events still queued.
func (a *app) observers(p *daemonParts, o *options, s *config.Settings, served []inet.Family) func() {
	m := metrics.New().ForFamilies(served).SetBuild(metrics.Build(a.build)).SetSyncPeriod(s.SyncPeriod)
	// client-go's requests (kube-proxy's rest_client_* metrics), from the
	// first: the events' and the watches' clients send theirs below.
	clientmetrics.Register(m.ClientGoMetrics())
	healthz, livez := m.AnswerCounters()
	var families []v1.IPFamily
	for _, f := range served {
		families = append(families, v1.IPFamily(f.String())) // inet spells families as Kubernetes does
	}
	p.metrics = m
	p.health = healthcheck.NewProxyHealth(s.SyncPeriod, a.now, o.source == sourceKubernetes, families, healthz, livez)
	rec, closeEvents := a.recorder(p.log, o, s.Node.Name)
	p.events = rec
	return closeEvents
}

// stateWriter returns the writer of the state file, nil without one.
func (a *app) stateWriter(log *zap.Logger, o *options) *status.Writer {
	if o.stateFile == "" {
		return nil
	}
	return status.NewWriter(o.stateFile, func(err error) {
		log.Warn("cannot write the state file", zap.String("file", o.stateFile), zap.Error(err))
	})
}

// stopWaitingForNode makes the tracker stop waiting for the Node after
// the app's nodeIPsWait; stop the timer returned once the daemon ends.
func (a *app) stopWaitingForNode(p *daemonParts, node string) *time.Timer {
	return time.AfterFunc(a.nodeIPsWait, func() {
		if p.tracker.StopWaitingForNode() {
			p.log.Error("timed out waiting for the Node to exist and have IPs; syncing without them", zap.String("node", node), zap.Duration("waited", a.nodeIPsWait))
		}
	})
}

// start serves health and metrics, makes the node's settings, reads the
// kernel, then follows the source until stopped.
func (a *app) start(ctx context.Context, stop func(), p *daemonParts, o *options, s *config.Settings, k kernel, client *watcher.Client) error {
	servers := &httpServers{log: p.log}
	defer servers.close()
	if err := serveHTTP(servers, p, o, s); err != nil {
		return err
	}
	if err := a.initNode(p.log, o); err != nil {
		return err
	}
	// The kernel is read while the source is listed: at a restart that
	// read of what the last run programmed is as long as the listing.
	// Nothing else writes ipvsplane's objects meanwhile.
	if err := k.ReadAhead(ctx); err != nil {
		return err
	}
	// kube-proxy's birth cry.
	p.events.Eventf(events.NodeRef(s.Node.Name), v1.EventTypeNormal, "Starting", "StartKubeProxy", "")

	p.log.Info("starting", zap.String("version", a.build.Version), zap.String("revision", a.build.Revision), zap.String("node", s.Node.Name), zap.String("source", o.source),
		zap.Stringers("nodeAddresses", s.Node.Addresses), zap.Duration("minSyncPeriod", s.MinSyncPeriod),
		zap.Duration("syncPeriod", s.SyncPeriod))
	return a.follow(ctx, stop, p, o, s, client)
}

// defaultNodeIPsWait bounds how long a start from the API server waits
// for its Node to exist and have IPs before the first sync, as
// kube-proxy's NodeManager does.
const defaultNodeIPsWait = 30 * time.Second

// newTracker makes the tracker of the source's objects. Its one hook
// marks each change in the metrics (the last-queued time, for a change
// kube-proxy queues, of the families it concerns; the pending changes)
// and in health, then asks for a sync. With waitForNode, nothing is
// programmed before the Node's IPs are read or the app's nodeIPsWait
// passed.
func (a *app) newTracker(p *daemonParts, s *config.Settings, waitForNode bool, request func()) *watcher.Tracker {
	h, m := p.health, p.metrics
	return watcher.NewTracker(watcher.TrackerConfig{Node: s.Node, PodCIDRsFromNode: s.PodCIDRsFromNode, WaitForNodeIPs: waitForNode, Now: a.now, OnNode: h.SetNode,
		OnChange: func(families inet.PerFamily[bool]) {
			if families != (inet.PerFamily[bool]{}) {
				m.SetQueued(families, a.now())
			}
			h.Queued()
			svc, ep := p.tracker.Pending()
			m.SetPending(svc, ep)
			request()
		}})
}

// httpServers are the daemon's HTTP servers, closed together on exit.
type httpServers struct {
	log  *zap.Logger
	list []*http.Server
}

// serve serves handler on addr, unless addr is empty.
func (hs *httpServers) serve(what, addr string, handler http.Handler) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving %s: %w", what, err)
	}
	srv := httpserver.New(handler)
	hs.list = append(hs.list, srv)
	go srv.Serve(httpserver.Limit(ln, httpserver.MaxConnections))
	hs.log.Info("serving "+what, zap.String("address", ln.Addr().String()))
	return nil
}

func (hs *httpServers) close() {
	for _, srv := range hs.list {
		srv.Close()
	}
}

// serveHTTP serves health, then metrics; a failure is recorded as
// kube-proxy's Event too.
func serveHTTP(servers *httpServers, p *daemonParts, o *options, s *config.Settings) error {
	healthMux := http.NewServeMux()
	healthMux.Handle("/healthz", p.health.HealthzHandler())
	healthMux.Handle("/livez", p.health.LivezHandler())
	if err := servers.serve("/healthz and /livez", s.HealthzAddr, healthMux); err != nil {
		p.events.Eventf(events.NodeRef(s.Node.Name), v1.EventTypeWarning, "FailedToStartProxierHealthcheck", "StartKubeProxy", err.Error())
		return err
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", p.metrics.Handler())
	metrics.ServeKubeProxyPages(metricsMux, o.kp)
	if o.kp.EnableProfiling {
		metrics.ServeProfiles(metricsMux)
	}
	if err := servers.serve("/metrics", s.MetricsAddr, metricsMux); err != nil {
		p.events.Eventf(events.NodeRef(s.Node.Name), v1.EventTypeWarning, "FailedToStartMetricServer", "StartKubeProxy", err.Error())
		return err
	}
	return nil
}

// follow watches the source (through client, for the Kubernetes source)
// and the node's addresses and runs the syncs until either the source
// ends or ctx is done; stop cancels ctx.
func (a *app) follow(ctx context.Context, stop func(), p *daemonParts, o *options, s *config.Settings, client *watcher.Client) error {
	log, m := p.log, p.metrics
	srcCtx, cancelSource := context.WithCancel(ctx)
	defer cancelSource()
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- a.watch(srcCtx, log, o, client, p.tracker, s.Node.Name, func(err error) {
			m.InvalidObject()
			problems.RecordInvalid(p.events, err)
		})
	}()
	go p.proxier.WaitListed(srcCtx)
	go nodeaddrs.Follow(srcCtx, log, s.SyncPeriod, func(ctx context.Context) ([]netip.Addr, error) { return a.nodeAddrs(ctx, dataplane.DefaultDevice) }, p.tracker.SetAddresses)
	runErr := make(chan error, 1)
	// As kube-proxy's sync loop: healthy from the start, until a change
	// waits too long.
	p.health.Updated()
	m.Started(a.now())
	go func() { runErr <- p.runner.Run(ctx) }()
	select {
	case err := <-srcErr:
		stop()
		<-runErr
		if err != nil {
			return fmt.Errorf("source %s: %w", o.source, err)
		}
		return nil
	case <-runErr:
		cancelSource()
		<-srcErr
		log.Info("stopping; the kernel keeps its state")
		return nil
	}
}

// servedFamilies makes node IPv4Only, and says so once, when the kernel
// has no IPv6: as kube-proxy, which then runs single-stack IPv4, and so
// that the health-check servers do not listen on :: and the metrics have
// no IPv6 series. It returns the families served, IPv4 first.
func servedFamilies(log *zap.Logger, k kernel, node *model.Node) []inet.Family {
	if dp, ok := k.(interface{ IPv6() bool }); ok && !dp.IPv6() {
		node.IPv4Only = true
		log.Info("the kernel has no IPv6 (booted with ipv6.disable=1, or IPv6 disabled): serving IPv4 only")
		return []inet.Family{inet.IPv4}
	}
	return []inet.Family{inet.IPv4, inet.IPv6}
}
