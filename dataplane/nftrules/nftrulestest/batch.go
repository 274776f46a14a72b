package nftrulestest

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// notifySize is how much of a datagram the kernel fills with a batch's
// echoed objects before it starts another (NLMSG_GOODSIZE with 4 KiB
// pages).
const notifySize = 3776

// flagEcho is NLM_F_ECHO: the requester gets the object as the kernel
// made it.
const flagEcho = 0x8

// transact applies a batch to a copy of the ruleset, as
// nfnetlink_rcv_batch does: every message is tried, even after one
// fails; if all succeed the copy is committed and the objects asked to be
// echoed come first, several per datagram; else nothing changes. Then one
// datagram per acknowledgement: an error for each refused message, a zero
// for each other that asked for one.
func (k *Kernel) transact(msgs []netlink.Message) [][]netlink.Message {
	work := k.rs.clone()
	var (
		tx     Transaction
		acks   [][]netlink.Message
		echoes []netlink.Message
	)
	for _, m := range msgs {
		op, echo, errno := k.apply(work, m)
		tx.Ops = append(tx.Ops, op)
		if errno != 0 && tx.Err == nil {
			tx.Err = errno
		}
		if errno != 0 || m.Header.Flags&netlink.Acknowledge != 0 {
			acks = append(acks, []netlink.Message{nl.Ack(m, int(errno), "")})
		}
		if echo != nil && m.Header.Flags&flagEcho != 0 {
			echoes = append(echoes, *echo)
		}
	}
	k.transactions = append(k.transactions, tx)
	if tx.Err != nil {
		return acks
	}
	k.rs = work
	k.gen++
	return append(notifications(echoes), acks...)
}

// notifications packs echoed objects into datagrams as nft_commit_notify
// does.
func notifications(msgs []netlink.Message) [][]netlink.Message {
	var out [][]netlink.Message
	size := 0
	for _, m := range msgs {
		n := nl.HeaderLen + len(m.Data)
		if len(out) == 0 || size+n > notifySize {
			out = append(out, nil)
			size = 0
		}
		out[len(out)-1] = append(out[len(out)-1], m)
		size += n
	}
	return out
}

// apply runs one message of a batch on work and returns it in nft's
// words, the object to echo, and the errno.
func (k *Kernel) apply(work *ruleset, m netlink.Message) (string, *netlink.Message, unix.Errno) {
	r, ok := parseRequest(m)
	op := describe(m, r)
	if !ok {
		return op, nil, unix.EINVAL
	}
	switch msgType(m) {
	case unix.NFT_MSG_NEWTABLE:
		return op, nil, newTable(work, m.Header.Flags, r)
	case unix.NFT_MSG_DELTABLE:
		return op, nil, delTable(work, r)
	case unix.NFT_MSG_NEWCHAIN:
		return op, nil, k.newChain(work, m.Header.Flags, r)
	case unix.NFT_MSG_DELCHAIN:
		return op, nil, delChain(work, r)
	case unix.NFT_MSG_NEWRULE:
		t, c, rl, errno := k.newRule(work, m.Header.Flags, r)
		if errno != 0 {
			return op, nil, errno
		}
		echo := message(m, unix.NFT_MSG_NEWRULE, m.Header.Flags&(netlink.Create|netlink.Append), r.family, k.gen+1, ruleData(t, c, rl))
		return op, &echo, 0
	case unix.NFT_MSG_DELRULE:
		return op, nil, delRule(work, r)
	}
	return op, nil, unix.EOPNOTSUPP
}
