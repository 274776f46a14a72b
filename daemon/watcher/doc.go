// Package watcher turns Kubernetes Services and EndpointSlices into the
// dataplane model ([github.com/ipvsplane/ipvsplane/dataplane/model.State]) and decides when to sync, with the
// rules of kube-proxy's IPVS mode. It is the only ipvsplane package that
// imports client-go.
//
// The pieces:
//
//   - [ServicePorts] and [ConvertNode] are the pure conversion: a Service
//     and its EndpointSlices become service ports (per-family cluster IPs,
//     external and VIP-mode load-balancer addresses, source ranges,
//     affinity, traffic policies, endpoints merged across slices); a Node
//     gives the node's addresses and zone. Services kube-proxy leaves alone
//     (headless, ExternalName, labelled service.kubernetes.io/service-proxy-name)
//     convert to nothing. An invalid object is an [*InvalidError] naming
//     the object and its field, and is skipped.
//   - [Tracker] holds what the sources report, counts the changes pending
//     (for kube-proxy's *_changes_pending metrics) and, on [Tracker.Sync],
//     returns the whole desired state, the service ports that changed and
//     the trigger times of the endpoint changes (for the network
//     programming latency).
//   - [Runner] calls the sync function with kube-proxy's bounded
//     frequency: minSyncPeriod with a burst of 2, a periodic syncPeriod,
//     requests during a sync coalesced into one follow-up, and a gate so
//     that nothing runs before Services and EndpointSlices were listed
//     once.
//   - Two sources feed a tracker: [WatchKubernetes] through client-go
//     reflectors whose objects go straight into the tracker (no informer
//     cache: the tracker's converted copy is the only one), and
//     [WatchFiles] from a directory of YAML or JSON manifests (see
//     [ParseManifests]), which needs no cluster. [NewClient] reaches the
//     API server with only the two API groups read here; package
//     watcher/clientset adapts a client-go clientset instead.
//
// Wiring, as the daemon does it:
//
//	var runner *watcher.Runner
//	// The hook gets the IP families a change concerns (the daemon's
//	// last-queued metric); a sync is asked for whatever they are.
//	tracker := watcher.NewTracker(watcher.TrackerConfig{Node: node, OnChange: func(inet.PerFamily[bool]) { runner.Request() }})
//	runner = watcher.NewRunner(watcher.RunnerConfig{MinSyncPeriod: min, SyncPeriod: period, Ready: tracker.Synced},
//		func(ctx context.Context) error { return apply(ctx, tracker.Sync()) })
//	client, err := watcher.NewClient(restConfig)
//	...
//	go watcher.WatchKubernetes(ctx, watcher.KubernetesConfig{Client: client, Tracker: tracker, NodeName: node.Name})
//	runner.Run(ctx)
//
// Privileges: none. The Kubernetes source needs list and watch on
// services, endpointslices and nodes; the files source reads one
// directory. Nothing here touches the kernel's network state or
// namespaces.
//
// Concurrency: a Tracker's methods may be called from any goroutine. A
// Runner's Request may be called from any goroutine; its sync function
// runs in the goroutine of [Runner.Run], one call at a time. The sources
// run until their context is done. The State an [Update] holds shares its
// slices with the tracker: read it, do not change it.
package watcher
