package nftrulestest

import (
	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// query answers a message outside a batch: a dump of tables, chains or
// rules, a get of one table or chain, or of the ruleset's generation. Changes outside a batch are
// EOPNOTSUPP, as nftables takes them only in one.
func (k *Kernel) query(m netlink.Message) [][]netlink.Message {
	r, ok := parseRequest(m)
	if !ok {
		return [][]netlink.Message{{nl.Ack(m, int(unix.EINVAL), "")}}
	}
	typ := msgType(m)
	if typ == unix.NFT_MSG_GETGEN {
		return k.generation(m)
	}
	dump := m.Header.Flags&netlink.Dump == netlink.Dump
	var out []netlink.Message
	add := func(family nftables.TableFamily, typ int, w *nl.Writer) {
		flags := netlink.HeaderFlags(0)
		if dump {
			flags = netlink.Multi
		}
		out = append(out, message(m, typ, flags, family, k.gen, w))
	}
	for _, t := range k.rs.tables {
		if r.family != nftables.TableFamilyUnspecified && t.family != r.family || r.table != "" && t.name != r.table {
			continue
		}
		switch typ {
		case unix.NFT_MSG_GETTABLE:
			add(t.family, unix.NFT_MSG_NEWTABLE, tableData(t))
		case unix.NFT_MSG_GETCHAIN:
			for _, c := range t.chains {
				if r.chain == "" || c.name == r.chain {
					add(t.family, unix.NFT_MSG_NEWCHAIN, chainData(t, c))
				}
			}
		case unix.NFT_MSG_GETRULE:
			for _, c := range t.chains {
				if r.chain != "" && c.name != r.chain {
					continue
				}
				for _, rl := range c.rules {
					add(t.family, unix.NFT_MSG_NEWRULE, ruleData(t, c, rl))
				}
			}
		default:
			return [][]netlink.Message{{nl.Ack(m, int(unix.EOPNOTSUPP), "")}}
		}
	}
	if dump {
		done := message(m, 0, netlink.Multi, 0, k.gen, &nl.Writer{})
		done.Header.Type, done.Data = netlink.Done, make([]byte, 4)
		return [][]netlink.Message{append(out, done)}
	}
	// A get of one object that is not there (or of one rule, which the
	// fake does not serve) is ENOENT.
	if len(out) != 1 || typ == unix.NFT_MSG_GETRULE {
		return [][]netlink.Message{{nl.Ack(m, int(unix.ENOENT), "")}}
	}
	answer := [][]netlink.Message{out}
	if m.Header.Flags&netlink.Acknowledge != 0 {
		answer = append(answer, []netlink.Message{nl.Ack(m, 0, "")})
	}
	return answer
}

// generation answers NFT_MSG_GETGEN with the ruleset's generation, which
// every committed batch moves on by one, so that a client can tell with
// one message whether anything changed.
func (k *Kernel) generation(m netlink.Message) [][]netlink.Message {
	w := &nl.Writer{}
	w.BE32(unix.NFTA_GEN_ID, k.gen)
	answer := [][]netlink.Message{{message(m, unix.NFT_MSG_NEWGEN, 0, nftables.TableFamilyUnspecified, k.gen, w)}}
	if m.Header.Flags&netlink.Acknowledge != 0 {
		answer = append(answer, []netlink.Message{nl.Ack(m, 0, "")})
	}
	return answer
}
