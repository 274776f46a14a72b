package dataplane

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/conntrack"
	ns "github.com/ipvsplane/ipvsplane/dataplane/internal/namespace"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// namespace is how a Dataplane reaches its network namespace's kernel:
// the host's (hostNamespace) or the fakes' (dataplanetest).
type namespace = ns.Namespace

// hostNamespace is the network namespace netns (0: the calling
// process's) of the running kernel.
func hostNamespace(netns int) (*namespace, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, fmt.Errorf("dataplane: uname: %w", err)
	}
	return &namespace{
		DialIPVS: func() (*ipvs.Conn, error) { return ipvs.Dial(&ipvs.Config{NetNS: netns}) },
		DialSets: func() (*ipset.Conn, error) { return ipset.Dial(&ipset.Config{NetNS: netns}) },
		DialLinks: func(b dummy.Binding) (*dummy.Conn, error) {
			return dummy.Dial(&dummy.Config{NetNS: netns, Binding: b})
		},
		DialRules: func() (*nftables.Conn, error) {
			opts := []nftables.ConnOption{nftables.AsLasting()}
			if netns != 0 {
				opts = append(opts, nftables.WithNetNSFd(netns))
			}
			return nftables.New(opts...)
		},
		DialFlows: func() (*conntrack.Conn, error) { return conntrack.Dial(&conntrack.Config{NetNS: netns}) },
		DialGeneration: func() (ns.GenerationReader, error) {
			c, err := nl.Dial(unix.NETLINK_NETFILTER, netns)
			return netfilterConn{c}, err
		},
		Release: unix.ByteSliceToString(uts.Release[:]),
		InProc: func(fn func(procSys, procNet string) error) error {
			return inNetNS(netns, func() error { return fn("/proc/sys", "/proc/thread-self/net") })
		},
	}, nil
}

// netfilterConn reads the ruleset generation from the kernel.
type netfilterConn struct{ *nl.Conn }

func (c netfilterConn) Generation(ctx context.Context) (uint32, error) {
	return rulesetGeneration(ctx, c.Conn)
}

// inNetNS runs fn on a thread in network namespace netns (0: the
// calling thread's): /proc/sys/net and /proc/thread-self/net show the
// namespace of the thread that opens them.
func inNetNS(netns int, fn func() error) error {
	if netns == 0 {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// The thread is not unlocked, so the runtime discards it with its
		// namespace.
		runtime.LockOSThread()
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("dataplane: entering the network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// kernelReaders are the connections a read of the kernel goes through.
// The sync's own connections read on the first sync; a second set reads
// in the background for the periodic reread, so that syncs go on while
// it runs.
type kernelReaders struct {
	ipvs  *ipvs.Conn
	sets  *ipset.Conn
	links *dummy.Conn
}

// dialReaders opens a set of kernel readers in n, their device
// connection binding as b.
func dialReaders(n *namespace, b dummy.Binding) (kernelReaders, error) {
	var r kernelReaders
	var err error
	if r.ipvs, err = n.DialIPVS(); err != nil {
		return r, fmt.Errorf("dataplane: %w", err)
	}
	if r.sets, err = n.DialSets(); err != nil {
		return r, errors.Join(fmt.Errorf("dataplane: %w", err), r.close())
	}
	if r.links, err = n.DialLinks(b); err != nil {
		return r, errors.Join(fmt.Errorf("dataplane: %w", err), r.close())
	}
	return r, nil
}

// close closes the connections that are open.
func (r kernelReaders) close() error {
	var errs []error
	if r.ipvs != nil {
		errs = append(errs, r.ipvs.Close())
	}
	if r.sets != nil {
		errs = append(errs, r.sets.Close())
	}
	if r.links != nil {
		errs = append(errs, r.links.Close())
	}
	return errors.Join(errs...)
}

// kernel is what a Dataplane talks to its namespace's kernel through: the
// sync's own connections, one per subsystem. It remembers nothing of what
// was programmed.
type kernel struct {
	ns *namespace
	kernelReaders
	rules *nftables.Conn
	gen   ns.GenerationReader
	flows *conntrack.Conn
}

// openKernel opens the sync's connections in ns, the device's binding as
// b.
func openKernel(n *namespace, b dummy.Binding) (*kernel, error) {
	k := &kernel{ns: n}
	var err error
	if k.kernelReaders, err = dialReaders(n, b); err != nil {
		return nil, err
	}
	if k.rules, err = n.DialRules(); err != nil {
		return nil, errors.Join(fmt.Errorf("dataplane: nftables: %w", err), k.close())
	}
	if k.flows, err = n.DialFlows(); err != nil {
		return nil, errors.Join(fmt.Errorf("dataplane: %w", err), k.close())
	}
	if k.gen, err = n.DialGeneration(); err != nil {
		k.gen = nil
		return nil, errors.Join(fmt.Errorf("dataplane: nftables: %w", err), k.close())
	}
	return k, nil
}

// close closes the connections that are open.
func (k *kernel) close() error {
	errs := []error{k.kernelReaders.close()}
	if k.rules != nil {
		errs = append(errs, k.rules.CloseLasting())
	}
	if k.flows != nil {
		errs = append(errs, k.flows.Close())
	}
	if k.gen != nil {
		errs = append(errs, k.gen.Close())
	}
	return errors.Join(errs...)
}

// writeRules replaces ipvsplane's nftables rules with those node calls
// for; setIndex gives the kernel index of an ipset the rules match.
func (k *kernel) writeRules(node *model.Node, setIndex func(name string) (uint16, error)) error {
	err := nftrules.Write(k.rules, node, setIndex)
	if err == nil {
		return nil
	}
	// A failed transaction can leave messages queued on the socket and
	// replies unread in it (on Linux 6.12 every later read of the table
	// then failed with "unexpected header type"): start again on a fresh
	// socket.
	_ = k.rules.CloseLasting()
	rules, err2 := k.ns.DialRules()
	if err2 != nil {
		return errors.Join(err, fmt.Errorf("dataplane: nftables: %w", err2))
	}
	k.rules = rules
	return err
}
