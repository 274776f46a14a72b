package proxier_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/proxier"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// A Proxier syncs what its tracker holds into a Dataplane, here one on a
// fake node: once the source has listed Services and EndpointSlices, each
// call of Sync (the runner's) programs what changed.
func Example() {
	dir, err := os.MkdirTemp("", "proxier")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	node, err := dataplanetest.New(dir, nil)
	if err != nil {
		panic(err)
	}
	dp, err := node.Open(nil)
	if err != nil {
		panic(err)
	}
	defer dp.Close()

	log := zap.NewNop()
	m := metrics.New()
	healthz, livez := m.AnswerCounters()
	health := healthcheck.NewProxyHealth(30*time.Second, time.Now, false, nil, healthz, livez)
	rec := events.LogRecorder{Log: log}
	hc := healthcheck.NewServiceServers(healthcheck.ServiceConfig{Log: log, Node: "node-a", Healthy: health.Healthy, Events: rec})
	defer hc.Close(context.Background())
	tracker := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})
	p := proxier.New(proxier.Config{Log: log, Dataplane: dp, Tracker: tracker, Metrics: m, Health: health, Events: rec, HealthChecks: hc})

	// The source: here a manifest, listed whole.
	objs, _ := watcher.ParseManifests("web.yaml", []byte(`
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [10.244.1.2]}
`))
	for _, o := range objs {
		if err := tracker.SetObject(o.Object, time.Now()); err != nil {
			panic(err)
		}
	}
	tracker.MarkSynced(watcher.Services)
	tracker.MarkSynced(watcher.EndpointSlices)

	if err := p.Sync(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Print(node.IPVS.Dump())
	// Output:
	// TCP 10.96.0.10:80 rr
	//   -> 10.244.1.2:8080 masq 1
}
