// Package model is what a dataplane is asked to program: the node's
// settings and its service ports with their endpoints ([State]), the
// checks they must pass ([ServicePort.Validate], [Node.Validate]), and
// a few answers that follow from the settings alone: which scheduler a
// port gets ([Node.Scheduling]), which kernel settings the node needs
// ([Node.Sysctls]), and the names of kube-proxy's ipsets ([SetName]).
//
// It is pure: it imports no kernel package and does no I/O, so a
// controller, a CNI or a test can build and check a model without the
// dataplane.
package model
