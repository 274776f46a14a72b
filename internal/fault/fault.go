// Package fault is the fault-injection seam of ipvsplane's own tests. A
// Hook rides on the context of a call, so it reaches the kernel packages
// through their ordinary methods and sits in no public API: only code in
// this module can put one there.
package fault

import "context"

// Hook is asked about each kernel request before it is sent, with the
// package that sends it ("ipvs", "ipset", "conntrack", "dummy",
// "nftables") and the request's name ("new service", "add", "bind", ...).
// An error it returns becomes the request's outcome as if the kernel had
// refused it (return a unix.Errno such as unix.ENOBUFS), and the request
// is not sent.
type Hook func(pkg, request string) error

type key struct{}

// With returns a context that carries h.
func With(ctx context.Context, h Hook) context.Context {
	return context.WithValue(ctx, key{}, h)
}

// From returns the hook ctx carries, or nil.
func From(ctx context.Context) Hook {
	h, _ := ctx.Value(key{}).(Hook)
	return h
}

// Check asks the hook ctx carries, if any, about one request.
func Check(ctx context.Context, pkg, request string) error {
	if h := From(ctx); h != nil {
		return h(pkg, request)
	}
	return nil
}
