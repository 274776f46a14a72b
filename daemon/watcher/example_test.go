package watcher_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Converts a manifest into the service ports the dataplane programs.
func Example() {
	const manifest = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: NodePort
  clusterIP: 10.96.0.80
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: demo
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [10.244.1.10], nodeName: node-a}
- {addresses: [10.244.2.10], nodeName: node-b, conditions: {ready: false, serving: true, terminating: true}}
`
	objs, errs := watcher.ParseManifests("web.yaml", []byte(manifest))
	for _, err := range errs {
		fmt.Println(err)
	}
	tracker := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})
	for _, o := range objs {
		if err := tracker.SetObject(o.Object, time.Time{}); err != nil {
			fmt.Println(err)
		}
	}
	tracker.MarkSynced(watcher.Services)
	tracker.MarkSynced(watcher.EndpointSlices)
	u := tracker.Sync()
	fmt.Println("changed:", u.Changed)
	for _, sp := range u.State.Services {
		fmt.Printf("%s %s cluster %v:%d node port %d\n", sp.Name, sp.Protocol, sp.ClusterIPs, sp.Port, sp.NodePort)
		for _, ep := range sp.Endpoints {
			fmt.Printf("  %s:%d ready=%v serving=%v terminating=%v node=%s\n", ep.Addr, ep.Port, ep.Ready, ep.Serving, ep.Terminating, ep.NodeName)
		}
	}
	// Output:
	// changed: [demo/web:http]
	// demo/web:http tcp cluster [10.96.0.80]:80 node port 30080
	//   10.244.1.10:8080 ready=true serving=true terminating=false node=node-a
	//   10.244.2.10:8080 ready=false serving=true terminating=true node=node-b
}

// Wires a tracker, a runner and the files source, as the daemon does.
// It runs until the context ends.
func ExampleRunner() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runner *watcher.Runner
	tracker := watcher.NewTracker(watcher.TrackerConfig{
		Node:     model.Node{Name: "node-a"},
		OnChange: func(inet.PerFamily[bool]) { runner.Request() },
	})
	runner = watcher.NewRunner(watcher.RunnerConfig{
		MinSyncPeriod: time.Second,
		SyncPeriod:    30 * time.Second,
		Ready:         tracker.Synced,
	}, func(ctx context.Context) error {
		u := tracker.Sync()
		fmt.Printf("%d service ports, %d changed\n", len(u.State.Services), len(u.Changed))
		return nil
	})
	go func() {
		err := watcher.WatchFiles(ctx, watcher.FilesConfig{Dir: "/etc/ipvsplane/manifests", Tracker: tracker,
			OnError: func(err error) { fmt.Println(err) }})
		if err != nil && ctx.Err() == nil {
			fmt.Println(err)
			cancel()
		}
	}()
	_ = runner.Run(ctx)
}
