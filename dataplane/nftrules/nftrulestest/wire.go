package nftrulestest

import (
	"encoding/binary"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// msgType is a message's nftables type (NFT_MSG_*), or -1 for another
// subsystem's.
func msgType(m netlink.Message) int {
	if uint16(m.Header.Type)>>8 != unix.NFNL_SUBSYS_NFTABLES {
		return -1
	}
	return int(uint8(m.Header.Type))
}

// request is what the fake reads of an nftables message.
type request struct {
	family   nftables.TableFamily
	table    string
	chain    string
	handle   uint64
	flags    uint32
	hook     *baseChain
	chainTyp nftables.ChainType
	policy   *uint32
	exprs    []byte
	userdata []byte
	position uint64
}

// parseRequest reads a table, chain or rule message: the attributes of
// the three share numbers where they mean the same (NFTA_TABLE_NAME,
// NFTA_CHAIN_TABLE and NFTA_RULE_TABLE are all 1), and the message type
// says which the others are.
func parseRequest(m netlink.Message) (request, bool) {
	var r request
	if len(m.Data) < nl.NFGenMsgLen {
		return r, false
	}
	r.family = nftables.TableFamily(m.Data[0])
	d := nl.NewReader(m.Data[nl.NFGenMsgLen:], "nftables")
	switch typ := msgType(m); typ {
	case unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_DELTABLE, unix.NFT_MSG_GETTABLE:
		readTable(&d, &r)
	case unix.NFT_MSG_NEWCHAIN, unix.NFT_MSG_DELCHAIN, unix.NFT_MSG_GETCHAIN:
		readChain(&d, &r)
	default:
		readRule(&d, &r)
	}
	return r, d.Err() == nil
}

func readTable(d *nl.Reader, r *request) {
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_TABLE_NAME:
			r.table = d.String(unix.NFT_TABLE_MAXNAMELEN)
		case unix.NFTA_TABLE_FLAGS:
			r.flags = d.BE32()
		case nftaTableHandle:
			r.handle = d.BE64()
		}
	}
}

func readChain(d *nl.Reader, r *request) {
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_CHAIN_TABLE:
			r.table = d.String(unix.NFT_TABLE_MAXNAMELEN)
		case unix.NFTA_CHAIN_NAME:
			r.chain = d.String(unix.NFT_CHAIN_MAXNAMELEN)
		case unix.NFTA_CHAIN_HANDLE:
			r.handle = d.BE64()
		case unix.NFTA_CHAIN_HOOK:
			r.hook = &baseChain{}
			d.Nest(func(n *nl.Reader) {
				for n.Next() {
					switch n.Type() {
					case unix.NFTA_HOOK_HOOKNUM:
						r.hook.hook = n.BE32()
					case unix.NFTA_HOOK_PRIORITY:
						r.hook.priority = int32(n.BE32())
					}
				}
			})
		case unix.NFTA_CHAIN_TYPE:
			r.chainTyp = nftables.ChainType(d.String(0))
		case unix.NFTA_CHAIN_POLICY:
			r.policy = new(uint32)
			*r.policy = d.BE32()
		}
	}
}

func readRule(d *nl.Reader, r *request) {
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_RULE_TABLE:
			r.table = d.String(unix.NFT_TABLE_MAXNAMELEN)
		case unix.NFTA_RULE_CHAIN:
			r.chain = d.String(unix.NFT_CHAIN_MAXNAMELEN)
		case unix.NFTA_RULE_HANDLE:
			r.handle = d.BE64()
		case unix.NFTA_RULE_EXPRESSIONS:
			r.exprs = d.Bytes()
		case unix.NFTA_RULE_USERDATA:
			r.userdata = d.Bytes()
		case unix.NFTA_RULE_POSITION:
			r.position = d.BE64()
		}
	}
}

// exprsRead is what the fake reads of a rule's expressions.
type exprsRead struct {
	// names are the expressions' names, in order.
	names []string
	// targets are the chains its verdicts jump or go to.
	targets []string
	// sets are the indexes of the ipsets its xt set matches name.
	sets []uint16
}

// readExprs reads a rule's expressions; ok is false for expressions the
// kernel could not parse.
func readExprs(b []byte) (exprsRead, bool) {
	var r exprsRead
	d := nl.NewReader(b, "nftables expressions")
	for d.Next() {
		d.Nest(func(e *nl.Reader) {
			for e.Next() {
				switch e.Type() {
				case unix.NFTA_EXPR_NAME:
					r.names = append(r.names, e.String(0))
				case unix.NFTA_EXPR_DATA:
					if t := verdictTarget(e.Bytes()); t != "" {
						r.targets = append(r.targets, t)
					}
					if index, ok := setMatchIndex(e.Bytes()); ok {
						r.sets = append(r.sets, index)
					}
				}
			}
		})
	}
	return r, d.Err() == nil
}

// setMatchIndex reads a match expression's data for the xt set match and
// returns the set's index, which every revision of struct
// xt_set_info_match starts with, in the host's byte order.
func setMatchIndex(data []byte) (uint16, bool) {
	var name string
	var info []byte
	d := nl.NewReader(data, "match")
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_MATCH_NAME:
			name = d.String(0)
		case unix.NFTA_MATCH_INFO:
			info = d.Bytes()
		}
	}
	if name != "set" || len(info) < 2 {
		return 0, false
	}
	return binary.NativeEndian.Uint16(info), true
}

// verdictTarget reads an immediate expression's data for a jump or goto
// and returns its chain; "" for anything else.
func verdictTarget(data []byte) string {
	var code int32
	var target string
	d := nl.NewReader(data, "immediate")
	for d.Next() {
		if d.Type() != unix.NFTA_IMMEDIATE_DATA {
			continue
		}
		d.Nest(func(v *nl.Reader) {
			for v.Next() {
				if v.Type() != unix.NFTA_DATA_VERDICT {
					continue
				}
				v.Nest(func(w *nl.Reader) {
					for w.Next() {
						switch w.Type() {
						case unix.NFTA_VERDICT_CODE:
							code = int32(w.BE32())
						case unix.NFTA_VERDICT_CHAIN:
							target = w.String(0)
						}
					}
				})
			}
		})
	}
	if code == unix.NFT_JUMP || code == unix.NFT_GOTO {
		return target
	}
	return ""
}

// message frames a reply of the given type, with the ruleset's
// generation in the nfgenmsg's resource id as the kernel sends it.
func message(req netlink.Message, typ int, flags netlink.HeaderFlags, family nftables.TableFamily, gen uint32, w *nl.Writer) netlink.Message {
	data := nl.AppendNFGenMsg(nil, uint8(family), nl.NFNetlinkV0)
	binary.BigEndian.PutUint16(data[2:], uint16(gen))
	return netlink.Message{
		Header: netlink.Header{
			Type:     netlink.HeaderType(uint16(unix.NFNL_SUBSYS_NFTABLES)<<8 | uint16(typ)),
			Flags:    flags,
			Sequence: req.Header.Sequence,
			PID:      req.Header.PID,
		},
		Data: append(data, w.B...),
	}
}

func tableData(t *table) *nl.Writer {
	w := &nl.Writer{}
	w.String(unix.NFTA_TABLE_NAME, t.name)
	w.BE32(unix.NFTA_TABLE_FLAGS, t.flags)
	w.BE32(unix.NFTA_TABLE_USE, uint32(len(t.chains)))
	w.BE64(nftaTableHandle, t.handle)
	return w
}

func chainData(t *table, c *chain) *nl.Writer {
	w := &nl.Writer{}
	w.String(unix.NFTA_CHAIN_TABLE, t.name)
	w.String(unix.NFTA_CHAIN_NAME, c.name)
	w.BE64(unix.NFTA_CHAIN_HANDLE, c.handle)
	if b := c.base; b != nil {
		n := w.Begin(unix.NFTA_CHAIN_HOOK | nl.Nested)
		w.BE32(unix.NFTA_HOOK_HOOKNUM, b.hook)
		w.BE32(unix.NFTA_HOOK_PRIORITY, uint32(b.priority))
		w.End(n)
		w.BE32(unix.NFTA_CHAIN_POLICY, b.policy)
		w.String(unix.NFTA_CHAIN_TYPE, string(b.typ))
		w.BE32(nftaChainFlags, nfChainBase)
	}
	w.BE32(unix.NFTA_CHAIN_USE, uint32(len(c.rules)))
	return w
}

func ruleData(t *table, c *chain, r *rule) *nl.Writer {
	w := &nl.Writer{}
	w.String(unix.NFTA_RULE_TABLE, t.name)
	w.String(unix.NFTA_RULE_CHAIN, c.name)
	w.BE64(unix.NFTA_RULE_HANDLE, r.handle)
	w.Bytes(unix.NFTA_RULE_EXPRESSIONS|nl.Nested, r.exprs)
	if r.userdata != nil {
		w.Bytes(unix.NFTA_RULE_USERDATA, r.userdata)
	}
	return w
}
