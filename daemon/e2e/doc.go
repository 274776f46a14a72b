// Package e2e holds ipvsplane's end-to-end tests: the ipvsplane program
// (built into bin/ by make) and kube-proxy, each following a real
// kube-apiserver, programming a real kernel in a VM, with real traffic
// between network namespaces. It has no API; see its _test files and
// make test-vm PKGS=./daemon/e2e/...
//
// daemon/internal/testing/vmtest runs the control plane on the host (testdata/vmtest-controlplane)
// and copies in the programs named in testdata/vmtest-tools: the readers
// the tests compare the kernel against, iptables-nft and ipset for
// kube-proxy, kube-proxy itself and ../../bin/ipvsplane.
package e2e
