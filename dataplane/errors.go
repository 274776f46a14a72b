package dataplane

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Sentinel errors, matched with errors.Is, in the kernel packages' shape:
// an error that wraps one also wraps its cause (the kernel package's
// *OpError and errno, or the file system's error), so errors.Is(err,
// ErrSchedulerNotSupported) and errors.Is(err, unix.ENOENT) both hold.
var (
	// ErrSchedulerNotSupported: the kernel has no such IPVS scheduler, its
	// module neither loaded nor loadable ([Dataplane.CheckScheduler]).
	ErrSchedulerNotSupported = errors.New("dataplane: IPVS scheduler not supported by this kernel")
	// ErrSysctlNotExist: the kernel has no such setting (the IPVS ones
	// without the ip_vs module; [WriteSysctls]).
	ErrSysctlNotExist = errors.New("dataplane: kernel setting does not exist")
	// ErrNotSynced: SyncChanges came before the first Sync, or
	// PrefillChanges before a Prefill read the kernel, so the node's
	// settings or the kernel's state are not known.
	ErrNotSynced = errors.New("dataplane: not synced yet")
	// ErrRulesNotProgrammed: kube-proxy's rules were not removed because
	// ipvsplane's own are not in place; the node is never left without
	// rules for its services.
	ErrRulesNotProgrammed = errors.New("dataplane: ipvsplane's own rules are not in place")
)

// PlanPanicError reports a panic while the planner took a model: a bug
// that some input found. Nothing was written to the kernel; the planner
// was dropped, since its state is unknown, so the next call must be a
// [Dataplane.Sync] of a whole state (SyncChanges returns ErrNotSynced
// until then), which compares the kernel with it as a first sync does.
type PlanPanicError struct {
	// Services are the service ports whose changes were being planned;
	// nil when a whole state was.
	Services []model.ServicePortName
	// Value is what the planner panicked with, Stack where.
	Value any
	Stack []byte
}

func (e *PlanPanicError) Error() string {
	what := "a whole state"
	if e.Services != nil {
		what = fmt.Sprintf("the changes of %d service ports (%s)", len(e.Services), namesText(e.Services, 5))
	}
	return fmt.Sprintf("dataplane: planning %s panicked: %v; the next sync compares everything", what, e.Value)
}

// namesText lists the first n names and counts the rest.
func namesText(names []model.ServicePortName, n int) string {
	var b strings.Builder
	for i, name := range names[:min(n, len(names))] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name.String())
	}
	if len(names) > n {
		fmt.Fprintf(&b, " and %d more", len(names)-n)
	}
	return b.String()
}

// OpError is the failure of one planned operation. Its text reads as the
// kernel packages' do: "dataplane: apply addr bind 10.96.0.1: dummy: add
// address ...: file exists". The kernel packages name what failed with
// strings; the dataplane keeps the planned operation itself, which says
// the same in its String and which a caller can switch on.
type OpError struct {
	// Op is the planned operation that failed; it is planned again on the
	// next sync.
	Op plan.Op
	// Err is the cause: a kernel package's error (wrapping its sentinel
	// and the errno), a dataplane sentinel, or the context's error.
	Err error
}

func (e *OpError) Error() string {
	return nl.OpErrorText("dataplane", "apply", fmt.Sprint(e.Op), nil, e.Err, "")
}

// Unwrap returns the cause, so that errors.Is(err, unix.EEXIST) and the
// kernel packages' sentinels match.
func (e *OpError) Unwrap() error { return e.Err }

// HeldBackError reports the new virtual servers and addresses a sync did
// not create because the sets, set entries or rules it wrote before them
// failed: they would have drawn traffic that nothing masquerades or
// filters. They are planned again on the next sync.
type HeldBackError struct {
	Virtual   int
	Addresses int
}

func (e *HeldBackError) Error() string {
	return fmt.Sprintf("dataplane: %d new virtual servers and %d addresses held back until the sets and rules they need are in place",
		e.Virtual, e.Addresses)
}

// checkError is the failure of what the dataplane does outside a plan
// (checking a scheduler, writing a setting), in the kernel packages'
// shape: what was done, to what, the sentinel and the cause, and what an
// operator can do about it. Callers match it with errors.Is; it is no
// *OpError, which counts failed operations of a plan.
type checkError struct {
	op, object      string
	sentinel, cause error
	hint            string
}

func (e *checkError) Error() string {
	return nl.OpErrorText("dataplane", e.op, e.object, e.sentinel, e.cause, e.hint)
}

func (e *checkError) Unwrap() []error { return nl.OpErrorUnwrap(e.sentinel, e.cause) }
