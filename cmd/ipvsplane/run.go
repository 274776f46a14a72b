package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/watcher"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// setup loads the options and works out the settings; the notes are
// logged once.
func (a *app) setup(log *zap.Logger, o *options, cmd *cobra.Command) (*settings, error) {
	ignored, err := o.load(cmd.Flags())
	if err != nil {
		return nil, err
	}
	for _, f := range ignored {
		log.Warn("configuration field does not apply to ipvsplane; ignored", zap.String("field", f))
	}
	addrs, err := a.nodeAddrs(dataplane.DefaultDevice)
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	s, err := resolve(o.kp, hostname(), addrs)
	if err != nil {
		return nil, err
	}
	for _, n := range s.notes {
		log.Warn("setting does not apply to ipvsplane; ignored", zap.String("setting", n))
	}
	return s, nil
}

// run is the daemon: it serves health and metrics, follows the source and
// syncs the kernel until it gets SIGINT or SIGTERM. On exit it leaves the
// kernel as it is, so traffic keeps flowing while it restarts.
func (a *app) run(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command) error {
	s, err := a.setup(log, o, cmd)
	if err != nil {
		return err
	}
	mem, err := newSoftMemoryLimit(o.memoryLimit)
	if err != nil {
		return err
	}
	var runner *watcher.Runner
	// A reread of the kernel ends between syncs: ask for the sync that
	// merges it.
	k, err := a.dial(&dataplane.Config{ResyncInterval: s.syncPeriod, KernelRead: func() { runner.Request() }})
	if err != nil {
		return err
	}
	defer k.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	m := newMetrics()
	h := newHealth(s.syncPeriod, a.now)
	d := &daemon{
		log: log, kernel: k, metrics: m, health: h, stateFile: o.stateFile, now: a.now,
		record: syncRecord{Node: s.node.Name, Source: o.source, Started: a.now()},
	}
	d.hc = newHCServers(log, s.node.Name, func() bool { return h.check().NodeHealthy })
	defer d.hc.close(context.Background())

	d.tracker = watcher.NewTracker(watcher.TrackerConfig{Node: s.node, PodCIDRsFromNode: s.podCIDRsFromNode, OnChange: func() {
		m.lastQueued.Set(float64(a.now().UnixNano()) / 1e9)
		svc, ep := d.tracker.Pending()
		m.servicesPending.Set(float64(svc))
		m.endpointsPending.Set(float64(ep))
		runner.Request()
	}})
	gc := firstSyncGCSettings()
	defer gc.synced()
	runner = watcher.NewRunner(watcher.RunnerConfig{
		MinSyncPeriod: s.minSyncPeriod, SyncPeriod: s.syncPeriod, Ready: d.tracker.Synced,
	}, func(ctx context.Context) error {
		if !d.synced {
			gc.listed()
		}
		d.lastFull = false
		err := d.sync(ctx)
		if d.synced {
			gc.synced()
		}
		if d.lastFull {
			mem.afterFullSync()
		}
		return err
	})

	var servers []*http.Server
	defer func() {
		for _, srv := range servers {
			srv.Close()
		}
	}()
	serve := func(what, addr string, handler http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serving %s: %w", what, err)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go srv.Serve(ln)
		log.Info("serving "+what, zap.String("address", ln.Addr().String()))
		return nil
	}
	healthMux := http.NewServeMux()
	healthMux.Handle("/healthz", h)
	healthMux.Handle("/livez", h)
	if err := serve("/healthz and /livez", s.healthzAddr, healthMux); err != nil {
		return err
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", m.handler())
	if err := serve("/metrics", s.metricsAddr, metricsMux); err != nil {
		return err
	}

	log.Info("starting", zap.String("node", s.node.Name), zap.String("source", o.source),
		zap.Stringers("nodeAddresses", s.node.Addresses), zap.Duration("minSyncPeriod", s.minSyncPeriod),
		zap.Duration("syncPeriod", s.syncPeriod))
	srcCtx, cancelSource := context.WithCancel(ctx)
	defer cancelSource()
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- a.watch(srcCtx, log, o, d.tracker, s.node.Name, func(error) { m.invalidObjects.Inc() })
	}()
	go d.waitListed(srcCtx)
	go followAddresses(srcCtx, log, s.syncPeriod, func() ([]netip.Addr, error) { return a.nodeAddrs(dataplane.DefaultDevice) }, d.tracker.SetAddresses)
	runErr := make(chan error, 1)
	go func() { runErr <- runner.Run(ctx) }()
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
