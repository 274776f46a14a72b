package nftrules

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsplane/ipvsplane/inet"
)

// The packet rules of kube-proxy's IPVS mode, as one nftables table per
// family that ipvsplane owns. The rules match the KUBE-* ipsets through the
// kernel's xt set match, so their number is the same whatever the number of
// services; the table changes only with the node's settings and with which
// sets are empty, and is then replaced whole in one transaction.
//
// The chains keep kube-proxy's names. Verdicts in this table cannot
// override another table's: an accept here does not undo a drop in an
// iptables FORWARD chain, so the accept rules only end the evaluation of
// this table's own chains.

// TableName is the nftables table ipvsplane owns, in families ip and ip6.
const TableName = "ipvsplane"

// ruleTable is one family's table.
type ruleTable struct {
	family inet.Family
	chains []ruleChain
}

// ruleChain is a chain; a base chain has a hook.
type ruleChain struct {
	name  string
	hook  *chainHook
	rules []rule
}

// chainHook attaches a base chain to a netfilter hook.
type chainHook struct {
	kind     string // "nat" or "filter"
	hook     string // "prerouting", "input", "forward", "output", "postrouting"
	priority int
}

// rule is a list of matches and a verdict or action.
type rule struct {
	matches []match
	action  action
	comment string
}

// match is one condition of a rule.
type match interface{ String() string }

// setMatch matches packet fields against an ipset: each of dirs says
// whether the set's dimension is compared with the source ("src") or the
// destination ("dst").
type setMatch struct {
	set    string
	dirs   []string
	invert bool
}

// srcNet matches the source address against a prefix.
type srcNet struct {
	prefix netip.Prefix
	invert bool
}

// srcLoopback matches loopback source addresses of the table's family.
type srcLoopback struct{}

// l4proto matches the transport protocol.
type l4proto struct{ proto inet.Protocol }

// inInterface matches the input interface's name, or with prefix set, its
// beginning.
type inInterface struct {
	name   string
	prefix bool
	invert bool
}

// dstLocal matches packets to an address of this node (addrtype LOCAL).
type dstLocal struct{}

// markSet matches packets that carry all bits of mark.
type markSet struct {
	mark   uint32
	invert bool
}

// ctState matches the connection tracking state: "new", or
// "established,related".
type ctState struct{ states string }

// action is what a rule does when it matches.
type action struct {
	verdict string // "accept", "drop", "return", "jump", "reject", "masquerade", "masquerade fully-random", "mark-or", "mark-xor", claim
	chain   string // for jump
	mark    uint32 // for mark-or and mark-xor
}

func (m setMatch) String() string {
	not := ""
	if m.invert {
		not = "! "
	}
	return fmt.Sprintf("%sset %s %s", not, m.set, strings.Join(m.dirs, ","))
}

func (m srcNet) String() string {
	op := ""
	if m.invert {
		op = "!= "
	}
	return "saddr " + op + m.prefix.String()
}

func (srcLoopback) String() string { return "saddr loopback" }
func (m l4proto) String() string   { return "l4proto " + m.proto.String() }
func (m inInterface) String() string {
	op, name := "", m.name
	if m.invert {
		op = "!= "
	}
	if m.prefix {
		name += "*"
	}
	return "iifname " + op + name
}
func (dstLocal) String() string { return "daddr type local" }
func (m markSet) String() string {
	op := "=="
	if m.invert {
		op = "!="
	}
	return fmt.Sprintf("mark & %#x %s %#x", m.mark, op, m.mark)
}
func (m ctState) String() string { return "ct state " + m.states }

func (a action) String() string {
	switch a.verdict {
	case "jump":
		return "jump " + a.chain
	case "mark-or":
		return fmt.Sprintf("mark set mark | %#x", a.mark)
	case "mark-xor":
		return fmt.Sprintf("mark set mark ^ %#x", a.mark)
	}
	return a.verdict
}

// String prints the table in an nft-like syntax; the plan compares these
// texts to decide whether the table must be replaced.
func (t *ruleTable) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", t.nftFamily(), TableName)
	for _, c := range t.chains {
		fmt.Fprintf(&b, "  chain %s {\n", c.name)
		if c.hook != nil {
			fmt.Fprintf(&b, "    type %s hook %s priority %d\n", c.hook.kind, c.hook.hook, c.hook.priority)
		}
		for _, r := range c.rules {
			b.WriteString("    ")
			for _, m := range r.matches {
				b.WriteString(m.String() + " ")
			}
			b.WriteString(r.action.String())
			if r.comment != "" {
				fmt.Fprintf(&b, " comment %q", r.comment)
			}
			b.WriteByte('\n')
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// nftFamily is the table's nftables family: ip or ip6.
func (t *ruleTable) nftFamily() string {
	if t.family == inet.IPv6 {
		return "ip6"
	}
	return "ip"
}
