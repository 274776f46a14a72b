// Command ipvsplane programs a node's IPVS load balancer from Kubernetes
// Services and EndpointSlices, as kube-proxy does in IPVS mode, and can
// take its place: it reads kube-proxy's configuration file and flags.
//
//	ipvsplane run --config /etc/kube-proxy/config.conf   # the daemon (the default command)
//	ipvsplane run --source=files --manifests DIR          # without a cluster, from manifests
//	ipvsplane apply --once --source=files --manifests DIR # one sync, then exit
//	ipvsplane plan --source=files --manifests DIR         # print what a sync would do
//	ipvsplane status                                      # services, real servers, sets, last sync
//	ipvsplane cleanup                                     # remove everything ipvsplane made
//
// It needs CAP_NET_ADMIN in the node's network namespace, Linux 4.18 or
// later with IPVS (the ip_vs module and its schedulers), and a writable
// /proc/sys/net for the sysctls kube-proxy sets. The daemon records its
// last sync in --state-file (/run/ipvsplane/status.json) for the status
// command, serves /healthz and /livez on --healthz-bind-address and
// Prometheus metrics on --metrics-bind-address, and the health-check node
// ports of services with externalTrafficPolicy Local.
package main

import "os"

func main() {
	os.Exit(execute(newApp(), os.Args[1:]))
}
