// Package randomcluster generates, from a seed, the input of a node proxy:
// a KubeProxyConfiguration's node settings, the Node, and Services with
// their load-balancer status and EndpointSlices, covering every shape
// kube-proxy's IPVS mode programs differently. The same seed gives the
// same objects, so a failing case is reproduced by its seed alone.
//
// The objects are meant to be valid, but the API server decides: a test
// creates them through it and drops what it refuses (the generator leans
// towards shapes at the edge of validity, such as health-check ports or
// topology hints the API may not accept in every version).
//
// Addresses come from documentation and private ranges the test's own
// network namespaces hold (see [Env]); every Service's external and
// load-balancer addresses are its own, so no two Services claim the same
// address and port (a collision makes kube-proxy's result depend on its
// sync order).
package randomcluster
