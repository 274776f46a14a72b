package planner

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Op is one kernel operation of a plan. Its String form is one line of the
// printed plan (the dry-run output).
type Op interface {
	String() string
	phase() phase
}

// phase orders a plan so that traffic is never sent where nothing handles
// it: the sets and the rules that match them (masquerade in particular)
// come first, then virtual and real servers, then the addresses that draw
// traffic to them; removals run in the reverse order, and conntrack cleanup
// runs last.
type phase uint8

const (
	phaseCreateSet phase = iota
	phaseAddEntries
	phaseRules
	phaseVirtual
	phaseReal
	phaseBind
	phaseDrain
	phaseDeleteVirtual
	phaseUnbind
	phaseDelEntries
	phaseKubeProxy
	phaseConntrack
)

// CreateSet creates an ipset.
type CreateSet struct{ Spec SetSpec }

// AddEntries adds members to an ipset.
type AddEntries struct {
	Set     string
	Entries []Entry
}

// DelEntries removes members from an ipset.
type DelEntries struct {
	Set     string
	Entries []Entry
}

// ReplaceRules replaces the packet-rule table with Rules.
type ReplaceRules struct{ Rules string }

// AddVirtual creates a virtual server.
type AddVirtual struct {
	Service model.ServicePortName
	Virtual VirtualServer
}

// UpdateVirtual changes a virtual server's scheduler or persistence.
type UpdateVirtual struct {
	Service model.ServicePortName
	Virtual VirtualServer
}

// DeleteVirtual removes a virtual server and its real servers.
type DeleteVirtual struct{ Virtual VirtualKey }

// AddReals adds real servers to a virtual server. One operation holds all
// the additions to one virtual server: a large cluster's first sync adds
// hundreds of thousands, and their list is the desired state's own, not a
// copy (see [Reals]).
type AddReals struct {
	Virtual VirtualKey
	Reals   Reals
}

// UpdateReal changes a real server's weight; weight 0 drains it.
type UpdateReal struct {
	Virtual VirtualKey
	Real    RealServer
}

// DeleteReal removes a real server.
type DeleteReal struct {
	Virtual VirtualKey
	Real    RealKey
}

// Bind binds a virtual IP to the dummy device.
type Bind struct{ Addr netip.Addr }

// Unbind unbinds a virtual IP from the dummy device.
type Unbind struct{ Addr netip.Addr }

// RemoveKubeProxyRules deletes the iptables chains and nftables tables
// kube-proxy left, with the rules that jump to the chains. It comes last,
// once ipvsplane's own rules and everything else are in place, so that a
// node taken over from kube-proxy always has one set of rules handling its
// services.
type RemoveKubeProxyRules struct{ Chains []KubeProxyChain }

func (o CreateSet) String() string {
	family := ""
	if o.Spec.Type != BitmapPort {
		family = " family inet"
		if o.Spec.Family == inet.IPv6 {
			family = " family inet6"
		}
	}
	return fmt.Sprintf("ipset create %s %s%s", o.Spec.Name, o.Spec.Type, family)
}
func (o AddEntries) String() string { return entriesString("add", o.Set, o.Entries) }
func (o DelEntries) String() string { return entriesString("del", o.Set, o.Entries) }
func (o ReplaceRules) String() string {
	return fmt.Sprintf("rules replace (%d lines)", strings.Count(o.Rules, "\n"))
}
func (o AddVirtual) String() string    { return fmt.Sprintf("ipvs add %s (%s)", o.Virtual, o.Service) }
func (o UpdateVirtual) String() string { return fmt.Sprintf("ipvs edit %s (%s)", o.Virtual, o.Service) }
func (o DeleteVirtual) String() string { return fmt.Sprintf("ipvs del %s", o.Virtual) }

// String prints one line per real server, as the kernel sees one
// operation per real server.
func (o AddReals) String() string {
	var b strings.Builder
	for i, r := range o.Reals {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "ipvs add %s -> %s weight %d", o.Virtual, r.RealKey, r.Weight)
	}
	return b.String()
}
func (o UpdateReal) String() string {
	return fmt.Sprintf("ipvs edit %s -> %s weight %d", o.Virtual, o.Real.RealKey, o.Real.Weight)
}
func (o DeleteReal) String() string { return fmt.Sprintf("ipvs del %s -> %s", o.Virtual, o.Real) }
func (o Bind) String() string       { return fmt.Sprintf("addr bind %s", o.Addr) }
func (o Unbind) String() string     { return fmt.Sprintf("addr unbind %s", o.Addr) }

// removeKubeProxyShown is how many of kube-proxy's chains a plan line
// names: an iptables-mode node has some per service and endpoint.
const removeKubeProxyShown = 20

func (o RemoveKubeProxyRules) String() string {
	var names []string
	for _, c := range o.Chains[:min(len(o.Chains), removeKubeProxyShown)] {
		names = append(names, c.String())
	}
	if more := len(o.Chains) - len(names); more > 0 {
		names = append(names, fmt.Sprintf("and %d more", more))
	}
	return "kube-proxy remove " + strings.Join(names, ", ")
}

// realsTarget returns the virtual server whose real servers op changes,
// if it changes some.
func realsTarget(op Op) (VirtualKey, bool) {
	switch o := op.(type) {
	case AddReals:
		return o.Virtual, true
	case UpdateReal:
		return o.Virtual, true
	case DeleteReal:
		return o.Virtual, true
	}
	return VirtualKey{}, false
}

func entriesString(verb, set string, entries []Entry) string {
	const shown = 4
	var b strings.Builder
	fmt.Fprintf(&b, "ipset %s %s", verb, set)
	for _, e := range entries[:min(shown, len(entries))] {
		b.WriteString(" " + e.String())
	}
	if len(entries) > shown {
		fmt.Fprintf(&b, " ... (%d entries)", len(entries))
	}
	return b.String()
}

func (CreateSet) phase() phase     { return phaseCreateSet }
func (AddEntries) phase() phase    { return phaseAddEntries }
func (DelEntries) phase() phase    { return phaseDelEntries }
func (ReplaceRules) phase() phase  { return phaseRules }
func (AddVirtual) phase() phase    { return phaseVirtual }
func (UpdateVirtual) phase() phase { return phaseVirtual }
func (DeleteVirtual) phase() phase { return phaseDeleteVirtual }
func (AddReals) phase() phase      { return phaseReal }
func (o UpdateReal) phase() phase {
	if o.Real.Weight == 0 {
		return phaseDrain
	}
	return phaseReal
}
func (DeleteReal) phase() phase { return phaseDrain }
func (Bind) phase() phase       { return phaseBind }
func (Unbind) phase() phase     { return phaseUnbind }

func (RemoveKubeProxyRules) phase() phase { return phaseKubeProxy }
