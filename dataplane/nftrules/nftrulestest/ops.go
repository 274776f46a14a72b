package nftrulestest

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Numbers of include/uapi/linux/netfilter/nf_tables.h that package unix
// lacks: NFT_CHAIN_BASE, NFTA_CHAIN_FLAGS and NFTA_TABLE_HANDLE.
const (
	nfChainBase     = 1
	nftaChainFlags  = 10
	nftaTableHandle = 4
)

// policyAccept is NF_ACCEPT, a base chain's policy unless one is given.
const policyAccept = 1

// describe prints a batch message in nft's words.
func describe(m netlink.Message, r request) string {
	fam := familyName(r.family)
	switch msgType(m) {
	case unix.NFT_MSG_NEWTABLE:
		return fmt.Sprintf("add table %s %s", fam, r.table)
	case unix.NFT_MSG_DELTABLE:
		if r.table == "" && r.family == nftables.TableFamilyUnspecified {
			return "flush ruleset"
		}
		return fmt.Sprintf("delete table %s %s", fam, r.table)
	case unix.NFT_MSG_NEWCHAIN:
		return fmt.Sprintf("add chain %s %s %s", fam, r.table, r.chain)
	case unix.NFT_MSG_DELCHAIN:
		return fmt.Sprintf("delete chain %s %s %s", fam, r.table, r.chain)
	case unix.NFT_MSG_NEWRULE:
		verb := "insert"
		switch {
		case m.Header.Flags&netlink.Replace != 0:
			return fmt.Sprintf("replace rule %s %s %s handle %d", fam, r.table, r.chain, r.handle)
		case m.Header.Flags&netlink.Append != 0:
			verb = "add"
		}
		return fmt.Sprintf("%s rule %s %s %s", verb, fam, r.table, r.chain)
	case unix.NFT_MSG_DELRULE:
		switch {
		case r.handle != 0:
			return fmt.Sprintf("delete rule %s %s %s handle %d", fam, r.table, r.chain, r.handle)
		case r.chain != "":
			return fmt.Sprintf("flush chain %s %s %s", fam, r.table, r.chain)
		}
		return fmt.Sprintf("flush table %s %s", fam, r.table)
	}
	return fmt.Sprintf("message %#x", uint16(m.Header.Type))
}

// newTable is nf_tables_newtable: a table that exists is EEXIST with
// NLM_F_EXCL and left as it is without; a family nftables lacks is
// EAFNOSUPPORT.
func newTable(rs *ruleset, flags netlink.HeaderFlags, r request) unix.Errno {
	switch r.family {
	case nftables.TableFamilyIPv4, nftables.TableFamilyIPv6, nftables.TableFamilyINet,
		nftables.TableFamilyARP, nftables.TableFamilyBridge, nftables.TableFamilyNetdev:
	default:
		return unix.EAFNOSUPPORT
	}
	if r.table == "" {
		return unix.EINVAL
	}
	if t := rs.table(r.family, r.table); t != nil {
		if flags&netlink.Excl != 0 {
			return unix.EEXIST
		}
		t.flags = r.flags
		return 0
	}
	rs.lastTable++
	rs.tables = append(rs.tables, &table{family: r.family, name: r.table, handle: rs.lastTable, flags: r.flags})
	return 0
}

// delTable is nf_tables_deltable: the table with everything in it,
// ENOENT if there is none; without a name or family, every table (flush
// ruleset), and without a family only, those of that name.
func delTable(rs *ruleset, r request) unix.Errno {
	if r.family == nftables.TableFamilyUnspecified {
		rs.tables = slices.DeleteFunc(rs.tables, func(t *table) bool { return r.table == "" || t.name == r.table })
		return 0
	}
	t := rs.table(r.family, r.table)
	if t == nil {
		return unix.ENOENT
	}
	rs.tables = slices.DeleteFunc(rs.tables, func(x *table) bool { return x == t })
	return 0
}

// registered says whether the kernel knows the chain type in the family
// and lets it attach at the hook: nat chains never at forward, route
// chains only at output; an unknown type is ENOENT, a hook it refuses
// EOPNOTSUPP.
func (k *Kernel) registered(family nftables.TableFamily, typ nftables.ChainType, hook uint32) unix.Errno {
	ip := family == nftables.TableFamilyIPv4 || family == nftables.TableFamilyIPv6
	known := typ == nftables.ChainTypeFilter ||
		(typ == nftables.ChainTypeNAT && (ip || family == nftables.TableFamilyINet)) ||
		(typ == nftables.ChainTypeRoute && ip)
	if !known || k.missing[chainTypeKey{family, typ}] {
		return unix.ENOENT
	}
	if (typ == nftables.ChainTypeNAT && hook == uint32(*nftables.ChainHookForward)) ||
		(typ == nftables.ChainTypeRoute && hook != uint32(*nftables.ChainHookOutput)) {
		return unix.EOPNOTSUPP
	}
	return 0
}

// newChain is nf_tables_newchain: the table must exist (ENOENT); a chain
// that exists is EEXIST with NLM_F_EXCL and left as it is without, unless
// the request moves it to another hook (EOPNOTSUPP).
func (k *Kernel) newChain(rs *ruleset, flags netlink.HeaderFlags, r request) unix.Errno {
	t := rs.table(r.family, r.table)
	if t == nil {
		return unix.ENOENT
	}
	if r.chain == "" {
		return unix.EINVAL
	}
	if c := t.chain(r.chain); c != nil {
		switch {
		case flags&netlink.Excl != 0:
			return unix.EEXIST
		case r.hook != nil && (c.base == nil || c.base.hook != r.hook.hook || c.base.priority != r.hook.priority):
			return unix.EOPNOTSUPP
		}
		return 0
	}
	c := &chain{name: r.chain}
	if r.hook != nil {
		b := *r.hook
		b.typ, b.policy = r.chainTyp, policyAccept
		if b.typ == "" {
			b.typ = nftables.ChainTypeFilter
		}
		if r.policy != nil {
			b.policy = *r.policy
		}
		if errno := k.registered(r.family, b.typ, b.hook); errno != 0 {
			return errno
		}
		c.base = &b
	}
	c.handle = t.nextHandle()
	t.chains = append(t.chains, c)
	return 0
}

// delChain is nf_tables_delchain: the chain and its rules, ENOENT if
// there is none, EBUSY while another chain's rule jumps to it.
func delChain(rs *ruleset, r request) unix.Errno {
	t := rs.table(r.family, r.table)
	if t == nil {
		return unix.ENOENT
	}
	c := t.chain(r.chain)
	if c == nil {
		return unix.ENOENT
	}
	if t.referenced(c) {
		return unix.EBUSY
	}
	t.chains = slices.DeleteFunc(t.chains, func(x *chain) bool { return x == c })
	return 0
}

// newRule is nf_tables_newrule: table and chain must exist (ENOENT), as
// must every chain the rule jumps or goes to, which may not be a base
// chain (EOPNOTSUPP), and, when Options.SetExists says, every set its set
// matches name (ENOENT). NLM_F_APPEND adds it at the end, or after the
// rule NFTA_RULE_POSITION names; without, at the start or before that
// rule; NLM_F_REPLACE replaces the rule its handle names.
func (k *Kernel) newRule(rs *ruleset, flags netlink.HeaderFlags, r request) (*table, *chain, *rule, unix.Errno) {
	t := rs.table(r.family, r.table)
	if t == nil {
		return nil, nil, nil, unix.ENOENT
	}
	c := t.chain(r.chain)
	if c == nil {
		return nil, nil, nil, unix.ENOENT
	}
	ex, ok := readExprs(r.exprs)
	if !ok {
		return nil, nil, nil, unix.EINVAL
	}
	for _, index := range ex.sets {
		if k.opts.SetExists != nil && !k.opts.SetExists(index) {
			return nil, nil, nil, unix.ENOENT
		}
	}
	for _, name := range ex.targets {
		switch to := t.chain(name); {
		case to == nil:
			return nil, nil, nil, unix.ENOENT
		case to.base != nil:
			return nil, nil, nil, unix.EOPNOTSUPP
		}
	}
	rl := &rule{exprs: r.exprs, userdata: r.userdata, targets: ex.targets, names: ex.names}
	at, errno := position(c, flags, r)
	if errno != 0 {
		return nil, nil, nil, errno
	}
	if flags&netlink.Replace != 0 {
		rl.handle = r.handle
		c.rules[at] = rl
		return t, c, rl, 0
	}
	rl.handle = t.nextHandle()
	c.rules = slices.Insert(c.rules, at, rl)
	return t, c, rl, 0
}

// position is where a new rule goes in c's list, or for a replacement the
// index of the rule it replaces.
func position(c *chain, flags netlink.HeaderFlags, r request) (int, unix.Errno) {
	find := func(handle uint64) int {
		return slices.IndexFunc(c.rules, func(x *rule) bool { return x.handle == handle })
	}
	switch {
	case flags&netlink.Replace != 0:
		if i := find(r.handle); i >= 0 {
			return i, 0
		}
		return 0, unix.ENOENT
	case r.position != 0:
		i := find(r.position)
		if i < 0 {
			return 0, unix.ENOENT
		}
		if flags&netlink.Append != 0 {
			i++
		}
		return i, 0
	case flags&netlink.Append != 0:
		return len(c.rules), 0
	}
	return 0, 0
}

// delRule is nf_tables_delrule: the rule its handle names (ENOENT if
// none), or every rule of the chain, or of the table when no chain is
// named.
func delRule(rs *ruleset, r request) unix.Errno {
	t := rs.table(r.family, r.table)
	if t == nil {
		return unix.ENOENT
	}
	if r.chain == "" {
		for _, c := range t.chains {
			c.rules = nil
		}
		return 0
	}
	c := t.chain(r.chain)
	if c == nil {
		return unix.ENOENT
	}
	if r.handle == 0 {
		c.rules = nil
		return 0
	}
	n := len(c.rules)
	c.rules = slices.DeleteFunc(c.rules, func(x *rule) bool { return x.handle == r.handle })
	if len(c.rules) == n {
		return unix.ENOENT
	}
	return 0
}
