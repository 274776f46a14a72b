package model

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SchedulerFlags are the IPVS scheduler flags of a service port. The
// kernel has three scheduler-specific flag bits whose meaning depends on
// the scheduler: sh and mh read the first two. A service names a flag by
// what it means to its scheduler (SHPort) or, as kube-router does, by
// number (SchedFlag2). A virtual server holds only the numbered bits,
// which is all the kernel keeps.
type SchedulerFlags uint8

// The scheduler flags.
const (
	// SchedFlag1 is IP_VS_SVC_F_SCHED1: sh-fallback to sh, mh-fallback
	// to mh.
	SchedFlag1 SchedulerFlags = 1 << iota
	// SchedFlag2 is IP_VS_SVC_F_SCHED2: sh-port to sh, mh-port to mh.
	SchedFlag2
	// SchedFlag3 is IP_VS_SVC_F_SCHED3, which no in-tree scheduler reads;
	// it is passed on as kube-router passes it.
	SchedFlag3
	// SHFallback makes sh pick another destination when the hashed one
	// is unavailable (weight 0 or overloaded).
	SHFallback
	// SHPort makes sh hash the client's port with its address.
	SHPort
	// MHFallback makes mh pick another destination when the hashed one
	// is unavailable.
	MHFallback
	// MHPort makes mh hash the client's port with its address.
	MHPort
)

// schedulerFlagNames are the flags' names, in the order they print.
var schedulerFlagNames = [...]struct {
	flag SchedulerFlags
	name string
}{
	{SchedFlag1, "flag-1"}, {SchedFlag2, "flag-2"}, {SchedFlag3, "flag-3"},
	{SHFallback, "sh-fallback"}, {SHPort, "sh-port"},
	{MHFallback, "mh-fallback"}, {MHPort, "mh-port"},
}

// ParseSchedulerFlag returns the flag of a name: sh-fallback, sh-port,
// mh-fallback, mh-port, flag-1, flag-2 or flag-3.
func ParseSchedulerFlag(name string) (SchedulerFlags, bool) {
	for _, n := range schedulerFlagNames {
		if n.name == name {
			return n.flag, true
		}
	}
	return 0, false
}

// String returns the flags' names, comma-separated.
func (f SchedulerFlags) String() string {
	var names []string
	for _, n := range schedulerFlagNames {
		if f&n.flag != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// namedFlags returns the names a scheduler gives the kernel's bits 1 and
// 2 (sh-fallback and sh-port for sh), and whether it reads them at all.
func namedFlags(sched string) ([2]SchedulerFlags, bool) {
	switch sched {
	case "sh":
		return [2]SchedulerFlags{SHFallback, SHPort}, true
	case "mh":
		return [2]SchedulerFlags{MHFallback, MHPort}, true
	}
	return [2]SchedulerFlags{}, false
}

// numberedFlags are the kernel's bits 1 and 2, in namedFlags' order.
const numberedFlags = SchedFlag1 | SchedFlag2

// forScheduler returns the kernel's numbered bits for f under scheduler
// sched, and the flags of f that sched does not read, which are dropped.
func (f SchedulerFlags) forScheduler(sched string) (kernel, ignored SchedulerFlags) {
	kernel = f & SchedFlag3
	names, reads := namedFlags(sched)
	if !reads {
		return kernel, f &^ SchedFlag3
	}
	kernel |= f & numberedFlags
	for i, name := range names {
		if f&name != 0 {
			kernel |= SchedFlag1 << i
		}
	}
	allNamed := SHFallback | SHPort | MHFallback | MHPort
	return kernel, f & allNamed &^ (names[0] | names[1])
}

// Named returns a virtual server's numbered flags as its scheduler reads
// them (sh-port, not flag-2), for the printed plan.
func (f SchedulerFlags) Named(sched string) SchedulerFlags {
	names, reads := namedFlags(sched)
	if !reads {
		return f & (SchedFlag3 | numberedFlags)
	}
	n := f & SchedFlag3
	for i, name := range names {
		if f&(SchedFlag1<<i) != 0 {
			n |= name
		}
	}
	return n
}

// defaultSchedulerFlags are the flags of a service port that names neither
// scheduler nor flags: mh hashes the client's port too, as kube-proxy asks
// of the node's mh.
func defaultSchedulerFlags(sched string) SchedulerFlags {
	if sched == "mh" {
		return SchedFlag2
	}
	return 0
}

// ErrUnknownScheduler is matched by a [SchedulerError] whose scheduler is
// not one of the kernel's.
var ErrUnknownScheduler = errors.New("not an IPVS scheduler the kernel has (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos)")

// ErrSchedulerNotAllowed is matched by a [SchedulerError] whose scheduler
// is not among the node's AllowedSchedulers.
var ErrSchedulerNotAllowed = errors.New("not among the schedulers this node allows Services to name")

// SchedulerError reports a service port whose scheduler is unknown, not
// allowed or missing from the kernel: its virtual servers get the node's
// scheduler (Fallback) instead, and are programmed. Err matches
// ErrUnknownScheduler, ErrSchedulerNotAllowed or
// dataplane.ErrSchedulerNotSupported.
type SchedulerError struct {
	Service   ServicePortName
	Scheduler string
	Fallback  string
	Err       error
}

func (e *SchedulerError) Error() string {
	return fmt.Sprintf("service %s: scheduler %q: %v; it uses the node's scheduler %s", e.Service, e.Scheduler, e.Err, e.Fallback)
}

func (e *SchedulerError) Unwrap() error { return e.Err }

// FieldSchedulerFlags is the Field of a [SettingError] about scheduler
// flags the scheduler does not read.
const FieldSchedulerFlags = "schedulerFlags"

// FieldExternalIPs and FieldLoadBalancerIPs are the Field of a
// [SettingError] about addresses a port is not served on: external IPs
// outside the node's ExternalIPRanges, and addresses of the node's own
// whose port is among its ProtectedPorts.
const (
	FieldExternalIPs     = "externalIPs"
	FieldLoadBalancerIPs = "loadBalancerIPs"
)

// SettingError reports a setting of a service port that is ignored: one
// the source could not read (Field names where it came from, such as an
// annotation), scheduler flags its scheduler does not read (Field
// FieldSchedulerFlags), or addresses the node does not serve it on
// (FieldExternalIPs, FieldLoadBalancerIPs). The port is programmed
// without it.
type SettingError struct {
	Service ServicePortName
	Field   string
	Value   string
	Reason  string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("service %s: %s %q is ignored: %s", e.Service, e.Field, e.Value, e.Reason)
}

// BadSetting is a setting of a service the source could not read, left
// at its default: the dataplane reports it as a [SettingError].
type BadSetting struct {
	// Field names where the setting came from: an annotation's name.
	Field  string
	Value  string
	Reason string
}

// SchedulerChoice is the scheduler and the kernel's flags a service
// port's virtual servers get.
type SchedulerChoice struct {
	Name  string
	Flags SchedulerFlags
}

// Scheduling chooses a service port's scheduler: the one it names when
// the kernel has it, else the node's. A port that names neither scheduler
// nor flags gets the node's defaults; flags the scheduler does not read
// are dropped. What the port does not get is returned, to be reported.
func (n *Node) Scheduling(s *ServicePort, lacking map[string]error) (SchedulerChoice, []error) {
	node := SchedulerChoice{Name: n.EffectiveScheduler(), Flags: defaultSchedulerFlags(n.EffectiveScheduler())}
	if s.Scheduler == "" && s.SchedulerFlags == 0 {
		return node, nil
	}
	name := cmp.Or(s.Scheduler, node.Name)
	fallback := func(err error) (SchedulerChoice, []error) {
		// A name no scheduler has is reported cut to a little more than
		// the longest one: a Service may give megabytes.
		shown := name
		if len(shown) > 2*MaxSchedulerName {
			shown = strings.ToValidUTF8(shown[:2*MaxSchedulerName], "") + "..."
		}
		return node, []error{&SchedulerError{Service: s.Name, Scheduler: shown, Fallback: node.Name, Err: err}}
	}
	// An unknown name is never tried in the kernel: it would load the
	// module of any name a Service gives.
	if !KnownScheduler(name) {
		return fallback(ErrUnknownScheduler)
	}
	if !n.SchedulerAllowed(name) {
		return fallback(ErrSchedulerNotAllowed)
	}
	if err := lacking[name]; err != nil {
		return fallback(err)
	}
	kernel, ignored := s.SchedulerFlags.forScheduler(name)
	if ignored == 0 {
		return SchedulerChoice{Name: name, Flags: kernel}, nil
	}
	return SchedulerChoice{Name: name, Flags: kernel}, []error{&SettingError{Service: s.Name, Field: FieldSchedulerFlags,
		Value: ignored.String(), Reason: fmt.Sprintf("the %s scheduler does not read them", name)}}
}

// SchedulerAllowed reports whether a service port may name scheduler
// name: AllowedSchedulers lists it, or is empty. The node's own
// scheduler is always allowed, since a port naming it gets it anyway.
func (n *Node) SchedulerAllowed(name string) bool {
	return len(n.AllowedSchedulers) == 0 || name == n.EffectiveScheduler() || slices.Contains(n.AllowedSchedulers, name)
}

// EffectiveScheduler returns the node's IPVS scheduler: Scheduler, or
// "rr" when it is empty.
func (n *Node) EffectiveScheduler() string {
	if n.Scheduler == "" {
		return "rr"
	}
	return n.Scheduler
}
