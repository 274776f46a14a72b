// Package controlplane runs a real Kubernetes control plane for tests:
// etcd and kube-apiserver as the test binary's own child processes,
// listening on loopback only, and hands tests a client-go *rest.Config.
//
// etcd and kube-apiserver are the ones hack/build-kube builds from the
// k8s.io/kubernetes module pinned in hack/kube/go.mod (etcd at the version
// that module requires, new enough for the API server to stream
// listings), looked up as $IPVSPLANE_CACHE/kube/<KubeVersion>/<program>
// (default cache ~/.cache/ipvsplane), then on PATH; etcd's data directory
// is a fresh temporary directory. Both get free ports
// picked at start. The API server serves a self-signed certificate the
// control plane makes for 127.0.0.1, localhost and GuestForwardAddr, which
// its clients trust alone; it authenticates one static bearer token (user
// "admin" in group system:masters), runs no admission plugin that waits on a
// controller (there is no controller manager), and allocates cluster IPs
// from ServiceCIDR.
//
// Use [New] for a control plane per test (stopped at t.Cleanup), or a
// [Shared] with TestMain for one per test binary: the API server takes a
// few seconds to become ready (3 s here, more on a loaded machine), so a
// package's tests share it. [ControlPlane.StopAPIServer] (graceful) or
// [ControlPlane.KillAPIServer] (a crash) and then
// [ControlPlane.StartAPIServer] restart the API server on the same address
// with the same etcd, for tests of clients surviving an outage.
// [ControlPlane.Kubeconfig] writes a kubeconfig for programs that take one.
// A VM guest of daemon/internal/testing/vmtest reaches the API server only through a qemu
// forward, at GuestForwardAddr:GuestAPIServerPort ([FromVM]).
//
// Privileges: none; loopback ports only. No network namespace is involved:
// the processes share the test's namespace (normally the host's) and bind
// 127.0.0.1 only.
//
// Concurrency: a ControlPlane's methods may be called from any goroutine,
// but stopping and starting the API server are meant for one test at a time:
// tests sharing a control plane must not run in parallel with one that
// restarts it.
package controlplane
