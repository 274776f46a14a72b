// Package dataplane turns the desired state of a node's services into the
// kernel state of kube-proxy's IPVS mode, as a plan of kernel operations
// that prints as text and applies incrementally. It is the top of three
// layers, and the only one that touches the kernel:
//
//   - [model] is what the dataplane is asked to program (service ports,
//     endpoints, node settings) and its validation. Invalid service ports
//     are reported with [model.FieldError] (object and field) and left
//     out; the others are still programmed.
//   - [plan] computes the desired kernel state of a model ([plan.Build];
//     the dataplane keeps it between syncs, so that a change to one
//     service plans that service alone) and the operations that turn an
//     observed state into it ([plan.Diff]), in an order that never
//     sends traffic where nothing handles it: sets and rules first, then
//     virtual and real servers, then the addresses that draw traffic;
//     removals in reverse; conntrack cleanup last. A sync whose sets or
//     rules fail holds back new virtual servers and addresses. Real
//     servers whose endpoint left are deleted at once when idle, else
//     drain at weight 0.
//   - [nftrules] compiles the node's settings into ipvsplane's nftables
//     tables and replaces each in one transaction; the rules match the
//     ipsets through the kernel's xt set match, so there are as many rules
//     for ten services as for fifty thousand.
//
// model and plan import no kernel package and no google/nftables; a
// controller or a CNI can compute and print plans with them alone.
//
// [Dataplane] carries plans out against the kernel of a network namespace
// through the ipvs, ipset, dummy and conntrack packages and google/nftables:
// the first [Dataplane.Sync] reads the kernel once and compares everything;
// later syncs ([Dataplane.Sync] with a whole model, [Dataplane.SyncChanges]
// with tracked changes) plan only what changed, and a failed operation is
// planned again on the next sync. An incremental sync first checks a
// canary, at most once a second and with a handful of requests whatever
// the cluster's size: one member of each ownership set, one virtual
// server, the device, and the rule tables (the nftables ruleset's
// generation, and the tables' digests when it moved). If another program
// flushed any of them, the sync reads the kernel again at once and
// repairs it. Config.ResyncInterval has the kernel read again in the
// background, and [Dataplane.Resync] on the next sync; the sync after the
// read compares everything, which also repairs what the canary cannot see.
// Before the first sync, [Dataplane.Prefill] programs what a partial state
// adds and changes nothing else, so that a caller still listing a large
// cluster can have its kernel writes overlap the listing.
//
// # Ownership
//
// ipvsplane deletes only what it made, also after a restart. It records
// every virtual server it creates in the ipset KUBE-IPVSPLANE-OWNED
// (KUBE-6-IPVSPLANE-OWNED for IPv6), hash:ip,port entries such as
// "10.96.0.1,tcp:443": the entry is added before the server is created and
// removed after it is deleted, so a crash between the two leaves at worst
// an entry without a server, which the next sync removes. A virtual server
// that is not in these sets is another program's and is never changed or
// deleted, unless the desired state wants one at the same address, port
// and protocol: then it is adopted (its real servers are made to match),
// which is how a node programmed by kube-proxy is taken over without
// recreating its servers. An external IP or load-balancer address, which
// tenants write, adopts only what kube-proxy made for one (its
// KUBE-EXTERNAL-IP, KUBE-LOAD-BALANCER or KUBE-CLUSTER-IP set records it):
// another program's (keepalived's, kube-vip's) is left alone, and the
// Service is told (a *model.SettingError in the sync's errors). Virtual
// servers inside model.Node.ExcludeCIDRs are never deleted. The dummy device, the KUBE-* sets and the nftables tables
// named [nftrules.TableName] are ipvsplane's by name.
//
// # Taking over from kube-proxy, and handing back
//
// A full sync also looks for the chains kube-proxy's IPVS mode makes with
// iptables-nft (KUBE-SERVICES, KUBE-POSTROUTING, ... in the ip and ip6 nat
// and filter tables). The last operation of its plan, [plan.RemoveKubeProxyRules],
// deletes them and the rules that do nothing but jump to them, in one
// nftables transaction, and only once ipvsplane's own tables are in place;
// other chains and rules of those tables are never touched. With the
// adoption above, a node moves from kube-proxy to ipvsplane without a
// deleted server or a dropped connection. [Dataplane.Handover] goes back:
// it removes ipvsplane's tables and ownership sets only, and leaves the
// servers, the device and the KUBE-* sets for kube-proxy to adopt.
//
// # Draining
//
// A real server whose endpoint left is set to weight 0: it takes no new
// connections and keeps its open ones. It is deleted once it holds no
// connections, or after Config.DrainTimeout (or its service port's own
// DrainTimeout): the syncs read the draining real servers' connections
// at most once a second. An endpoint that comes back
// while draining gets its weight back, without losing its connections.
// UDP and SCTP real servers are deleted at once.
//
// # Conntrack
//
// After a sync in which the endpoints of a Service with a UDP (or SCTP)
// port changed, and at the first sync, the sync ends with kube-proxy's
// conntrack reconciliation (plan.ReconcileFlows) for each family and
// protocol concerned: the entries to a service port's addresses or node
// port that none of its serving endpoints answers are deleted, whichever
// change left them, so datagram clients move on at their next packet;
// those of endpoints still serving (terminating ones too) stay. One
// that fails is run again at the next sync.
//
// # Growth
//
// The sets are made with kube-proxy's maxelem while it holds their
// entries. One that fills (the cluster outgrew it) is replaced by a
// larger one under its name, filled first and swapped in, so that no
// entry goes missing and the rules, which match it by name and kernel
// index, keep matching it.
//
// # Testing
//
// Package dataplane/dataplanetest opens a Dataplane on an in-memory
// network namespace made of the kernel packages' fakes: a program built
// on this package can run its syncs in a unit test, without privileges,
// and read back what the kernel would hold.
//
// docs/kube-proxy-ipvs-semantics.md describes kube-proxy's behaviour that
// is reproduced here; docs/differences-from-kube-proxy.md lists where
// ipvsplane differs, and why.
package dataplane
