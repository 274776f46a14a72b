// Package conntrackbench measures kube-proxy's conntrack reconciliation
// (k8s.io/kubernetes/pkg/proxy/conntrack CleanStaleEntries, v1.37) beside
// ipvsplane's on the same table: a benchmark of the host's kernel, in a
// network namespace of its own, that needs root. It lives in the module
// that builds Kubernetes' programs so that ipvsplane's own modules never
// depend on k8s.io/kubernetes.
//
//	cd hack/kube && GOWORK=off go test -tags hosttest -run '^$' -bench . -benchtime 5x ./conntrackbench
package conntrackbench
