// Package model is what a dataplane is asked to program: the node's
// settings and its service ports with their endpoints ([State]), the
// checks they must pass ([ServicePort.Validate], [Node.Validate]), and
// the answers that follow from the node's settings alone: which addresses
// serve node ports and health checks, which scheduler a port gets, which
// kernel settings the node needs, and the names of kube-proxy's ipsets.
//
// It is pure: it imports no kernel package and does no I/O, so a
// controller, a CNI or a test can build and check a model without the
// dataplane.
package model
