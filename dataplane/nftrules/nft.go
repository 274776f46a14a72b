package nftrules

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"golang.org/x/sys/unix"
)

// SetIndexer returns an ipset's kernel index by name: the xt set match
// refers to sets by index (IPSET_CMD_GET_BYNAME).
type SetIndexer func(name string) (uint16, error)

// tableFamily is the nftables family of IPv4 or IPv6 rules.
func tableFamily(f inet.Family) nftables.TableFamily {
	if f == inet.IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// queueTable queues the replacement of the family's table on conn: add it
// (so the delete finds it), delete it with everything in it, and add it
// again with its chains and rules. Sent by one Flush, this is a single
// transaction: packets see the old table or the new one, never neither.
func queueTable(conn *nftables.Conn, t *ruleTable, index SetIndexer) error {
	table := &nftables.Table{Name: TableName, Family: tableFamily(t.family)}
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	// Every chain exists before a rule jumps to it.
	chains := make([]*nftables.Chain, len(t.chains))
	for i, c := range t.chains {
		chains[i] = &nftables.Chain{Name: c.name, Table: table}
		if c.hook != nil {
			chains[i].Type = nftables.ChainType(c.hook.kind)
			chains[i].Hooknum = chainHooks[c.hook.hook]
			chains[i].Priority = nftables.ChainPriorityRef(nftables.ChainPriority(c.hook.priority))
		}
		conn.AddChain(chains[i])
	}
	for i, c := range t.chains {
		chain := chains[i]
		for j, r := range c.rules {
			if i == 0 && j == 0 {
				// The table's digest, read back to tell whether the
				// kernel holds this very table.
				r.comment = digestComment(t)
			}
			exprs, err := ruleExprs(r, t.family, index)
			if err != nil {
				return fmt.Errorf("chain %s: rule %q: %w", c.name, ruleText(r), err)
			}
			rule := &nftables.Rule{Table: table, Chain: chain, Exprs: exprs}
			if r.comment != "" {
				rule.UserData = userdata.AppendString(nil, userdata.TypeComment, r.comment)
			}
			conn.AddRule(rule)
		}
	}
	return nil
}

var chainHooks = map[string]*nftables.ChainHook{
	"prerouting":  nftables.ChainHookPrerouting,
	"input":       nftables.ChainHookInput,
	"forward":     nftables.ChainHookForward,
	"output":      nftables.ChainHookOutput,
	"postrouting": nftables.ChainHookPostrouting,
}

func ruleText(r rule) string {
	t := &ruleTable{chains: []ruleChain{{rules: []rule{r}}}}
	return t.String()
}

// ruleExprs turns a rule into nftables expressions, all working in
// register 1.
func ruleExprs(r rule, f inet.Family, index SetIndexer) ([]expr.Any, error) {
	var exprs []expr.Any
	for _, m := range r.matches {
		e, err := matchExprs(m, f, index)
		if err != nil {
			return nil, err
		}
		exprs = append(exprs, e...)
	}
	return append(exprs, actionExprs(r.action, f)...), nil
}

func matchExprs(m match, f inet.Family, index SetIndexer) ([]expr.Any, error) {
	switch m := m.(type) {
	case setMatch:
		id, err := index(m.set)
		if err != nil {
			return nil, err
		}
		return []expr.Any{&expr.Match{Name: "set", Rev: 4, Info: setMatchInfo(id, m)}}, nil
	case srcNet:
		return prefixExprs(m.prefix.Addr().AsSlice(), m.prefix.Bits(), f, m.invert), nil
	case srcLoopback:
		if f == inet.IPv6 {
			return prefixExprs(make16(1), 128, inet.IPv6, false), nil
		}
		return prefixExprs([]byte{127, 0, 0, 0}, 8, inet.IPv4, false), nil
	case l4proto:
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(m.proto)}},
		}, nil
	case inInterface:
		data := []byte(m.name)
		if !m.prefix {
			// Compare the whole NUL-padded name, not a prefix of it.
			data = append(data, make([]byte, unix.IFNAMSIZ-len(data))...)
		}
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: cmpOp(m.invert), Register: 1, Data: data},
		}, nil
	case dstLocal:
		return []expr.Any{
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)},
		}, nil
	case markSet:
		mark := binary.NativeEndian.AppendUint32(nil, m.mark)
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mark, Xor: make([]byte, 4)},
			&expr.Cmp{Op: cmpOp(m.invert), Register: 1, Data: mark},
		}, nil
	case ctState:
		bits := uint32(expr.CtStateBitNEW)
		if m.states == "established,related" {
			bits = expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED
		}
		return []expr.Any{
			&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binary.NativeEndian.AppendUint32(nil, bits), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		}, nil
	}
	return nil, fmt.Errorf("no nftables form for match %T", m)
}

func actionExprs(a action, f inet.Family) []expr.Any {
	switch a.verdict {
	case "accept":
		return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}
	case "drop":
		return []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}
	case "return":
		return []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
	case "jump":
		return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: a.chain}}
	case "reject":
		// Port unreachable, like iptables' REJECT: ICMP code 3, ICMPv6
		// code 4.
		code := uint8(3)
		if f == inet.IPv6 {
			code = 4
		}
		return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}}
	case claim:
		return dnatToDestination(f)
	case "masquerade":
		return []expr.Any{&expr.Masq{}}
	case "masquerade fully-random":
		return []expr.Any{&expr.Masq{FullyRandom: true}}
	case "mark-or", "mark-xor":
		// mark | m is (mark & ^m) ^ m; mark ^ m keeps every bit and flips m.
		mask := ^a.mark
		if a.verdict == "mark-xor" {
			mask = 0xffffffff
		}
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binary.NativeEndian.AppendUint32(nil, mask),
				Xor:  binary.NativeEndian.AppendUint32(nil, a.mark)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		}
	}
	panic("nftrules: unknown rule action " + a.verdict)
}

// dnatToDestination DNATs the packet to its own destination address: a
// binding that leaves the connection as it is (see claim).
func dnatToDestination(f inet.Family) []expr.Any {
	offset, length, family := uint32(16), uint32(4), uint32(unix.NFPROTO_IPV4) // iphdr.daddr
	if f == inet.IPv6 {
		offset, length, family = 24, 16, unix.NFPROTO_IPV6 // ipv6hdr.daddr
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: family, RegAddrMin: 1, RegAddrMax: 1},
	}
}

// prefixExprs matches the source address against addr/bits.
func prefixExprs(addr []byte, bits int, f inet.Family, invert bool) []expr.Any {
	offset, length := uint32(12), uint32(4) // iphdr.saddr
	if f == inet.IPv6 {
		offset, length = 8, 16 // ipv6hdr.saddr
	}
	mask := make([]byte, length)
	for i := range bits {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	masked := make([]byte, length)
	for i := range masked {
		masked[i] = addr[i] & mask[i]
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: length, Mask: mask, Xor: make([]byte, length)},
		&expr.Cmp{Op: cmpOp(invert), Register: 1, Data: masked},
	}
}

func make16(last byte) []byte {
	b := make([]byte, 16)
	b[15] = last
	return b
}

func cmpOp(invert bool) expr.CmpOp {
	if invert {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// setMatchInfo encodes struct xt_set_info_match_v4
// (include/uapi/linux/netfilter/xt_set.h) in the host's byte order:
// the set's index, the number of dimensions and a bit per dimension that
// is compared with the source (IPSET_DIM_ONE_SRC is bit 1), then packet
// and byte counter conditions (none) and the match flags (none), padded to
// 48 bytes.
func setMatchInfo(index uint16, m setMatch) *xt.Unknown {
	info := make([]byte, 48)
	binary.NativeEndian.PutUint16(info[0:], index)
	info[2] = byte(len(m.dirs))
	var flags byte
	if m.invert {
		flags |= 1 // IPSET_INV_MATCH
	}
	for i, d := range m.dirs {
		if d == "src" {
			flags |= 1 << (i + 1)
		}
	}
	info[3] = flags
	u := xt.Unknown(info)
	return &u
}

// digestComment names the table's content: a digest of its printed form.
func digestComment(t *ruleTable) string {
	sum := sha256.Sum256([]byte(t.String()))
	return "ipvsplane " + hex.EncodeToString(sum[:12])
}

// Current reports whether the kernel holds both of the node's
// tables as they are now, by the digests their first rules carry.
func Current(conn *nftables.Conn, node *model.Node) (bool, error) {
	for _, t := range nodeTables(node) {
		rules, err := conn.GetRules(&nftables.Table{Name: TableName, Family: tableFamily(t.family)}, &nftables.Chain{Name: t.chains[0].name})
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading nftables table %s: %w", TableName, err)
		}
		if len(rules) == 0 {
			return false, nil
		}
		if comment, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment); comment != digestComment(t) {
			return false, nil
		}
	}
	return true, nil
}

// Write replaces ipvsplane's tables (ip and ip6 TableName) in conn's
// namespace with the rules the node's settings call for, one transaction
// per family, ip first, so that an ip6 table the kernel refuses (no ip6
// nat) leaves the ip one in place. It stops at the first failure: the
// connection must then be dialled again. index resolves the KUBE-* sets,
// which must exist.
func Write(conn *nftables.Conn, node *model.Node, index SetIndexer) error {
	for _, t := range nodeTables(node) {
		if err := queueTable(conn, t, index); err != nil {
			return fmt.Errorf("nftrules: rules: %w", err)
		}
		if err := conn.Flush(); err != nil {
			return fmt.Errorf("nftrules: replacing the nftables table %s %s: %w", t.nftFamily(), TableName, err)
		}
	}
	return nil
}

// Delete removes ipvsplane's tables, if they exist, and nothing else.
func Delete(conn *nftables.Conn) error {
	tables, err := conn.ListTables()
	if err != nil {
		return fmt.Errorf("nftrules: listing nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == TableName && (t.Family == nftables.TableFamilyIPv4 || t.Family == nftables.TableFamilyIPv6) {
			conn.DelTable(t)
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nftrules: deleting the nftables tables %s: %w", TableName, err)
	}
	return nil
}
