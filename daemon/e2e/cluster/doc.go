// Package cluster holds the tests that run against a real cluster of one
// node or more: kubelet, containerd, CNI, CoreDNS and the nodes' proxy
// installed from deploy/, as daemon/internal/testing/vmtest -node boots it (make
// test-cluster runs them on one node, make test-cluster-nodes the
// TestTwoNodes ones on two; make conformance runs upstream's specs on the
// same cluster). They need the build tag clustertest and the variables vmtest
// -node sets (KUBECONFIG, IPVSPLANE_NODE_*); without them, and with CI=true,
// they fail rather than skip.
package cluster
