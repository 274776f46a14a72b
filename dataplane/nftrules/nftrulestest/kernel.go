package nftrulestest

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Options tune the fake; the zero value takes every rule whose jumps
// resolve.
type Options struct {
	// SetExists, when set, says whether an ipset of the given kernel index
	// exists: a rule with an xt set match naming one that does not is
	// ENOENT, as the kernel's set match refuses it. An ipsettest.Kernel,
	// or the sets a test created, can answer it.
	SetExists func(index uint16) bool
}

// Kernel is the nftables ruleset of one network namespace, in memory. Its
// methods are safe for concurrent use.
type Kernel struct {
	opts Options

	mu  sync.Mutex
	rs  *ruleset
	gen uint32
	// missing are the chain types that are not registered, by family.
	missing      map[chainTypeKey]bool
	transactions []Transaction
}

type chainTypeKey struct {
	family nftables.TableFamily
	typ    nftables.ChainType
}

// Transaction is one batch a Conn's Flush sent, as the kernel took it.
type Transaction struct {
	// Ops are the batch's messages in order, in nft's words, such as
	// "add table ip ipvsplane" or "delete rule ip filter INPUT handle 4".
	Ops []string
	// Err is the errno of the first message the kernel refused, nil when
	// the batch was committed. A refused batch changes nothing.
	Err error
}

// New returns a kernel without tables, whose chain types are those of a
// kernel with nftables' NAT for both families: filter everywhere, nat and
// route in ip and ip6 (nat in inet too). opts may be nil.
func New(opts *Options) *Kernel {
	k := &Kernel{rs: &ruleset{}, missing: map[chainTypeKey]bool{}}
	if opts != nil {
		k.opts = *opts
	}
	return k
}

// Dial returns a real *nftables.Conn, lasting, whose socket reaches this
// kernel, as nftables.New(nftables.AsLasting()) returns one on the
// host's. Conns of one Kernel share its ruleset, as sockets in one
// namespace do.
func (k *Kernel) Dial() *nftables.Conn {
	s := &socket{k: k}
	c, err := nftables.New(nftables.WithTestDial(s.serve), nftables.AsLasting())
	if err != nil {
		// Only a socket option or a real socket can fail, and there are none.
		panic(fmt.Sprintf("nftrulestest: dialing the fake: %v", err))
	}
	return c
}

// UnregisterChainType makes chains of the type in the family unknown, as
// on a kernel built without it (no ip6 NAT, say): adding one is ENOENT
// and fails its whole transaction.
func (k *Kernel) UnregisterChainType(family nftables.TableFamily, typ nftables.ChainType) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.missing[chainTypeKey{family, typ}] = true
}

// Transactions returns the batches the kernel has taken, oldest first.
func (k *Kernel) Transactions() []Transaction {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Transaction, len(k.transactions))
	for i, t := range k.transactions {
		out[i] = Transaction{Ops: append([]string(nil), t.Ops...), Err: t.Err}
	}
	return out
}

// Generation returns the ruleset's generation, which each committed batch
// moves on by one, as NFT_MSG_GETGEN reports it.
func (k *Kernel) Generation() uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

// Tables returns the names of the tables, each with its family, in the
// order they were made: "ip ipvsplane".
func (k *Kernel) Tables() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, t := range k.rs.tables {
		out = append(out, familyName(t.family)+" "+t.name)
	}
	return out
}

// Dump prints the ruleset much as nft list ruleset does, with each rule
// as its expressions' names and its comment, for test failures and golden
// comparisons:
//
//	table ip ipvsplane
//	  chain nat-prerouting { type nat hook 0 priority -100 policy accept }
//	    immediate # ipvsplane 1f2e...
func (k *Kernel) Dump() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, t := range k.rs.tables {
		fmt.Fprintf(&b, "table %s %s\n", familyName(t.family), t.name)
		for _, c := range t.chains {
			fmt.Fprintf(&b, "  chain %s", c.name)
			if bc := c.base; bc != nil {
				policy := "accept"
				if bc.policy == 0 {
					policy = "drop"
				}
				fmt.Fprintf(&b, " { type %s hook %d priority %d policy %s }", bc.typ, bc.hook, bc.priority, policy)
			}
			b.WriteString("\n")
			for _, r := range c.rules {
				fmt.Fprintf(&b, "    %s", strings.Join(r.names, " "))
				if comment, ok := userdata.GetString(r.userdata, userdata.TypeComment); ok {
					fmt.Fprintf(&b, " # %s", comment)
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family(%d)", f)
}

// errNothingToRead is a receive with no reply due: the fake answers every
// write at once, so a real socket would block forever.
var errNothingToRead = errors.New("nftrulestest: receive with no reply due would block forever")

// socket is one Conn's netlink socket: the kernel's answers to its
// writes, queued as datagrams and read one at a time.
type socket struct {
	k *Kernel

	mu    sync.Mutex
	queue [][]netlink.Message
}

// serve is the socket's side of nltest: a write (req set) queues the
// kernel's answer; a read (req nil) takes the next datagram.
func (s *socket) serve(req []netlink.Message) ([]netlink.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req != nil {
		s.queue = append(s.queue, s.k.answer(req)...)
		return nil, nil
	}
	if len(s.queue) == 0 {
		return nil, errNothingToRead
	}
	d := s.queue[0]
	s.queue = s.queue[1:]
	return d, nil
}

// answer plays the kernel for one write: a batch as one transaction, any
// other message on its own.
func (k *Kernel) answer(msgs []netlink.Message) [][]netlink.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(msgs) >= 2 && msgs[0].Header.Type == unix.NFNL_MSG_BATCH_BEGIN && msgs[len(msgs)-1].Header.Type == unix.NFNL_MSG_BATCH_END {
		return k.transact(msgs[1 : len(msgs)-1])
	}
	var out [][]netlink.Message
	for _, m := range msgs {
		out = append(out, k.query(m)...)
	}
	return out
}
