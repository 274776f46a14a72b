// Package noipv6 holds the dataplane's VM test on a kernel booted with
// ipv6.disable=1 (its testdata/vmtest-cmdline asks the harness for it):
// the dataplane serves IPv4 alone there, as kube-proxy does.
package noipv6
