package plan

import (
	"net/netip"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// Plan is the kernel operations of a sync, in phases that run in order:
// the sets and the rules that match them first, then virtual and real
// servers, then the addresses that draw traffic to them; removals in
// the reverse order; conntrack cleanup last. Its String form is the
// dry-run output.
type Plan = planner.Plan

// Op is one kernel operation of a plan. Its String form is one line of
// the printed plan. The operations are the types below; no other
// package adds any.
type Op = planner.Op

// The operations of a plan.
type (
	// CreateSet creates an ipset.
	CreateSet = planner.CreateSet
	// AddEntries adds members to an ipset.
	AddEntries = planner.AddEntries
	// DelEntries removes members from an ipset.
	DelEntries = planner.DelEntries
	// ReplaceRules replaces the packet-rule table with its Rules.
	ReplaceRules = planner.ReplaceRules
	// AddVirtual creates a virtual server.
	AddVirtual = planner.AddVirtual
	// UpdateVirtual changes a virtual server's scheduler or persistence.
	UpdateVirtual = planner.UpdateVirtual
	// DeleteVirtual removes a virtual server and its real servers.
	DeleteVirtual = planner.DeleteVirtual
	// AddReals adds real servers to a virtual server: all the additions
	// to one virtual server, in one operation.
	AddReals = planner.AddReals
	// UpdateReal changes a real server's weight; weight 0 drains it.
	UpdateReal = planner.UpdateReal
	// DeleteReal removes a real server.
	DeleteReal = planner.DeleteReal
	// Bind binds a virtual IP to the dummy device.
	Bind = planner.Bind
	// Unbind unbinds a virtual IP from the dummy device.
	Unbind = planner.Unbind
	// ReconcileFlows deletes the stale conntrack entries of one family
	// and protocol, as kube-proxy's conntrack reconciliation does.
	ReconcileFlows = planner.ReconcileFlows
	// RemoveKubeProxyRules deletes the iptables chains and nftables
	// tables kube-proxy left; it comes last, once ipvsplane's own rules
	// are in place.
	RemoveKubeProxyRules = planner.RemoveKubeProxyRules
)

// The objects the operations name.
type (
	// VirtualKey identifies an IPVS virtual server; it prints as
	// "TCP 10.96.0.1:80".
	VirtualKey = planner.VirtualKey
	// VirtualServer is the configuration of an IPVS virtual server.
	VirtualServer = planner.VirtualServer
	// RealKey identifies a real server of a virtual server.
	RealKey = planner.RealKey
	// RealServer is a real server's weight and, when observed, its
	// connection counts.
	RealServer = planner.RealServer
	// Reals is a virtual server's real servers, sorted by address and
	// port.
	Reals = planner.Reals
	// Entry is one member of an ipset; it prints as `ipset save` writes
	// it.
	Entry = planner.Entry
)

// KernelState is what the dataplane owns in the kernel, observed or
// desired: virtual servers with their real servers, the addresses bound
// to the dummy device, the ipsets, and the rendered packet rules.
type KernelState = planner.KernelState

// Desired is the desired kernel state of a model: Kernel; Services,
// which names the service port each virtual server belongs to; and
// Errors, the service ports left out as invalid (*model.FieldError),
// the problems of ports programmed all the same (*model.SchedulerError,
// *model.SettingError) and the claims on a virtual server another port
// has (*ConflictError).
type Desired = planner.Desired

// Rules renders the packet rules a node's settings call for; the
// dataplane's are nftrules.Render.
type Rules = planner.Rules

// ConflictError reports a service port that claims a virtual server
// another service port has: the rest of the port is programmed, and the
// virtual server stays the other's, whatever the order of the input.
type ConflictError = planner.ConflictError

// New orders operations into a plan by phase, keeping the order of those
// of one phase.
func New(ops ...Op) *Plan { return planner.New(ops...) }

// Build computes the desired kernel state of a whole model, its rules
// rendered by rules. Which of two service ports claiming one virtual
// server gets it does not depend on the order of the input.
func Build(s *model.State, rules Rules) *Desired { return planner.Build(s, rules) }

// NewKernelState returns an empty state: a node's kernel before its
// first sync.
func NewKernelState() *KernelState { return planner.NewKernelState() }

// Diff plans the operations that turn observed into desired, comparing
// everything. Observed must hold only what ipvsplane owns: whatever it
// holds beyond desired is removed. A TCP real server whose endpoint left
// is deleted when it has no connection and drained at weight 0 when it
// has some, by its counts in observed.
func Diff(observed *KernelState, desired *Desired) *Plan {
	return planner.Diff(planner.DiffInputs{Observed: observed, Desired: desired.Kernel, Services: desired.Services, Scope: planner.FullScope})
}

// VirtualKeys lists the virtual servers a service port asks of this
// node, as a sync programs them: its cluster IPs, external and
// load-balancer addresses in the families it serves, and its node port
// on each node-port address. A virtual server that another service port
// claims too is listed for both; a port that a sync leaves out as
// invalid has none. It works them out from the model alone; a program
// that runs a dataplane asks dataplane.Dataplane.Claims, which reads
// them from what the last sync planned.
func VirtualKeys(n *model.Node, s *model.ServicePort) []VirtualKey { return planner.VirtualKeys(n, s) }

// HealthCheckAddresses returns the addresses a node's health-check node
// ports listen on, IPv4 first, as kube-proxy's service health servers
// choose them per family.
func HealthCheckAddresses(n *model.Node) []netip.Addr { return planner.HealthCheckAddresses(n) }

// IsKubeProxyChain reports whether a chain of an iptables table (nat,
// filter, mangle) is one kube-proxy's cleanup removes.
func IsKubeProxyChain(table, chain string) bool { return planner.IsKubeProxyChain(table, chain) }
