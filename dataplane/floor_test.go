package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The floor of a full sync replays the netlink writes a sync made,
// captured on an nlmon device, without the sync's reads. This file holds
// the part that needs no kernel: which captured messages are writes, and
// how they are grouped into writes of the replay.

// Commands and message types that only read, from the kernel's uapi
// headers where golang.org/x/sys/unix lacks them.
const (
	// include/uapi/linux/ip_vs.h, enum IPVS_CMD_*.
	ipvsCmdGetService = 4
	ipvsCmdGetDest    = 8
	ipvsCmdGetDaemon  = 11
	ipvsCmdGetConfig  = 13
	ipvsCmdGetInfo    = 15
	// include/uapi/linux/netfilter/ipset/ip_set.h, enum ipset_cmd.
	ipsetCmdProtocol   = 1
	ipsetCmdList       = 7
	ipsetCmdSave       = 8
	ipsetCmdTest       = 11
	ipsetCmdHeader     = 12
	ipsetCmdType       = 13
	ipsetCmdGetByName  = 14
	ipsetCmdGetByIndex = 15
	// include/uapi/linux/netfilter/nf_tables.h, Linux 6.5: after
	// NFT_MSG_GETRULE_RESET (0x19) and the seven NFT_MSG_DESTROY*.
	nftMsgGetSetElemReset = 0x21
	// include/uapi/linux/netfilter/nfnetlink_conntrack.h, enum
	// cntl_msg_types: the gets of subsystem NFNL_SUBSYS_CTNETLINK.
	ctMsgGet            = 1
	ctMsgGetCtrZero     = 3
	ctMsgGetStatsCPU    = 4
	ctMsgGetStats       = 5
	ctMsgGetDying       = 6
	ctMsgGetUnconfirmed = 7
)

// isWrite says whether one request captured on protocol proto changes the
// kernel. payload is the message after its header; ipvsFamily is the
// IPVS generic netlink family's id, which the kernel assigns at boot.
func isWrite(proto int, ipvsFamily uint16, typ, flags uint16, payload []byte) bool {
	if flags&unix.NLM_F_DUMP == unix.NLM_F_DUMP {
		return false
	}
	switch proto {
	case unix.NETLINK_ROUTE:
		// RTM_GET* are RTM_BASE+2 modulo 4, as RTM_NEW*, RTM_DEL* and
		// RTM_SET* are +0, +1 and +3.
		return typ >= unix.RTM_BASE && (typ-unix.RTM_BASE)%4 != 2
	case unix.NETLINK_GENERIC:
		if typ == unix.GENL_ID_CTRL {
			return false
		}
		if typ != ipvsFamily || len(payload) == 0 {
			return true
		}
		switch payload[0] {
		case ipvsCmdGetService, ipvsCmdGetDest, ipvsCmdGetDaemon, ipvsCmdGetConfig, ipvsCmdGetInfo:
			return false
		}
		return true
	case unix.NETLINK_NETFILTER:
		return !isNfnlRead(uint8(typ>>8), uint8(typ))
	}
	return false
}

// isNfnlRead says whether an nfnetlink message of a subsystem only reads.
func isNfnlRead(subsys, msg uint8) bool {
	switch subsys {
	case unix.NFNL_SUBSYS_IPSET:
		switch msg {
		case ipsetCmdProtocol, ipsetCmdList, ipsetCmdSave, ipsetCmdTest, ipsetCmdHeader,
			ipsetCmdType, ipsetCmdGetByName, ipsetCmdGetByIndex:
			return true
		}
	case unix.NFNL_SUBSYS_NFTABLES:
		switch msg {
		case unix.NFT_MSG_GETTABLE, unix.NFT_MSG_GETCHAIN, unix.NFT_MSG_GETRULE, unix.NFT_MSG_GETSET,
			unix.NFT_MSG_GETSETELEM, unix.NFT_MSG_GETGEN, unix.NFT_MSG_GETOBJ, unix.NFT_MSG_GETOBJ_RESET,
			unix.NFT_MSG_GETFLOWTABLE, unix.NFT_MSG_GETRULE_RESET, nftMsgGetSetElemReset:
			return true
		}
	case unix.NFNL_SUBSYS_CTNETLINK:
		switch msg {
		case ctMsgGet, ctMsgGetCtrZero, ctMsgGetStatsCPU, ctMsgGetStats, ctMsgGetDying, ctMsgGetUnconfirmed:
			return true
		}
	}
	return false
}

// keptWrites returns the writes among the requests of one captured skb,
// copied, with NLM_F_ACK and NLM_F_ECHO cleared: the replay hears only of
// errors, as the fastest writer would. An nfnetlink batch (an skb that
// starts with NFNL_MSG_BATCH_BEGIN) is one transaction and kept whole.
func keptWrites(proto int, ipvsFamily uint16, skb []byte) ([]byte, error) {
	batch := proto == unix.NETLINK_NETFILTER && len(skb) >= nl.HeaderLen &&
		binary.NativeEndian.Uint16(skb[4:6]) == unix.NFNL_MSG_BATCH_BEGIN
	var out []byte
	for len(skb) > 0 {
		if len(skb) < nl.HeaderLen {
			return nil, fmt.Errorf("netlink skb: %d bytes after the last message", len(skb))
		}
		l := int(binary.NativeEndian.Uint32(skb[0:4]))
		if l < nl.HeaderLen || l > len(skb) {
			return nil, fmt.Errorf("netlink message of length %d in %d bytes", l, len(skb))
		}
		typ := binary.NativeEndian.Uint16(skb[4:6])
		flags := binary.NativeEndian.Uint16(skb[6:8])
		if batch || isWrite(proto, ipvsFamily, typ, flags, skb[nl.HeaderLen:l]) {
			start := len(out)
			out = append(out, skb[:l]...)
			binary.NativeEndian.PutUint16(out[start+6:], flags&^(unix.NLM_F_ACK|unix.NLM_F_ECHO))
			for len(out)%4 != 0 {
				out = append(out, 0)
			}
		}
		skb = skb[min(nl.Align(l), len(skb)):]
	}
	return out, nil
}

// floorWrite is one write of the replay: netlink messages of one protocol.
type floorWrite struct {
	proto int
	b     []byte
}

// startsBatch says whether a write is an nfnetlink batch, which the kernel
// takes as a transaction only when the whole skb is that batch.
func (w floorWrite) startsBatch() bool {
	return w.proto == unix.NETLINK_NETFILTER && len(w.b) >= nl.HeaderLen &&
		binary.NativeEndian.Uint16(w.b[4:6]) == unix.NFNL_MSG_BATCH_BEGIN
}

// mergeWrites joins consecutive writes of one protocol into writes of up
// to max bytes (a larger one stays as it is), keeping their order, since
// each protocol's kernel handler runs synchronously in sendmsg. Batches
// stay writes of their own.
func mergeWrites(ws []floorWrite, max int) []floorWrite {
	var out []floorWrite
	for _, w := range ws {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.proto == w.proto && !last.startsBatch() && !w.startsBatch() && len(last.b)+len(w.b) <= max {
				last.b = append(last.b, w.b...)
				continue
			}
		}
		out = append(out, floorWrite{proto: w.proto, b: bytes.Clone(w.b)})
	}
	return out
}

func TestKeptWrites(t *testing.T) {
	req := func(typ, flags uint16, payload ...byte) []byte {
		return nl.AppendMessage(nil, typ, netlink.HeaderFlags(unix.NLM_F_REQUEST|flags), 1, 0, payload)
	}
	const ipvs = 0x20
	ipset := func(cmd uint16) uint16 { return unix.NFNL_SUBSYS_IPSET<<8 | cmd }
	nft := func(m uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name  string
		proto int
		in    []byte
		want  []byte
	}{
		{"rtnetlink new link kept, ack cleared", unix.NETLINK_ROUTE,
			req(unix.RTM_NEWLINK, unix.NLM_F_ACK|unix.NLM_F_CREATE),
			req(unix.RTM_NEWLINK, unix.NLM_F_CREATE)},
		{"rtnetlink gets dropped", unix.NETLINK_ROUTE,
			cat(req(unix.RTM_GETLINK, unix.NLM_F_ACK), req(unix.RTM_GETADDR, unix.NLM_F_DUMP), req(unix.RTM_NEWADDR, unix.NLM_F_ACK)),
			req(unix.RTM_NEWADDR, 0)},
		{"genl control dropped", unix.NETLINK_GENERIC, req(unix.GENL_ID_CTRL, unix.NLM_F_ACK, 3, 1, 0, 0), nil},
		{"ipvs get service dropped", unix.NETLINK_GENERIC, req(ipvs, unix.NLM_F_ACK, ipvsCmdGetService, 1, 0, 0), nil},
		{"ipvs service dump dropped", unix.NETLINK_GENERIC, req(ipvs, unix.NLM_F_DUMP, ipvsCmdGetService, 1, 0, 0), nil},
		{"ipvs new service kept", unix.NETLINK_GENERIC,
			cat(req(ipvs, unix.NLM_F_ACK, 1, 1, 0, 0), req(ipvs, unix.NLM_F_ACK, ipvsCmdGetInfo, 1, 0, 0)),
			req(ipvs, 0, 1, 1, 0, 0)},
		{"ipset test and header dropped, add kept", unix.NETLINK_NETFILTER,
			cat(req(ipset(ipsetCmdTest), unix.NLM_F_ACK, 2, 0, 0, 0), req(ipset(ipsetCmdHeader), 0, 2, 0, 0, 0), req(ipset(9), unix.NLM_F_ACK|unix.NLM_F_EXCL, 2, 0, 0, 0)),
			req(ipset(9), unix.NLM_F_EXCL, 2, 0, 0, 0)},
		{"nftables get rule dropped", unix.NETLINK_NETFILTER, req(nft(unix.NFT_MSG_GETRULE), unix.NLM_F_ACK, 2, 0, 0, 0), nil},
		{"nftables get and reset set elements dropped", unix.NETLINK_NETFILTER, req(nft(nftMsgGetSetElemReset), 0, 2, 0, 0, 0), nil},
		{"nftables destroy table kept", unix.NETLINK_NETFILTER, req(nft(0x1a), 0, 2, 0, 0, 0), req(nft(0x1a), 0, 2, 0, 0, 0)},
		{"nftables batch kept whole", unix.NETLINK_NETFILTER,
			cat(req(unix.NFNL_MSG_BATCH_BEGIN, 0, 0, 0, 0, 10), req(nft(unix.NFT_MSG_NEWRULE), unix.NLM_F_ACK|unix.NLM_F_ECHO|unix.NLM_F_CREATE, 2, 0, 0, 0), req(unix.NFNL_MSG_BATCH_END, 0, 0, 0, 0, 10)),
			cat(req(unix.NFNL_MSG_BATCH_BEGIN, 0, 0, 0, 0, 10), req(nft(unix.NFT_MSG_NEWRULE), unix.NLM_F_CREATE, 2, 0, 0, 0), req(unix.NFNL_MSG_BATCH_END, 0, 0, 0, 0, 10))},
		{"other protocols dropped", unix.NETLINK_KOBJECT_UEVENT, req(20, 0), nil},
	} {
		got, err := keptWrites(tc.proto, ipvs, tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.name, got, tc.want)
		}
	}
	if _, err := keptWrites(unix.NETLINK_ROUTE, ipvs, []byte{200, 0, 0, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("a message longer than its skb: no error")
	}
}

func TestMergeWrites(t *testing.T) {
	batch := nl.AppendMessage(nil, unix.NFNL_MSG_BATCH_BEGIN, 0, 1, 0, []byte{0, 0, 0, 10})
	nfnl := nl.AppendMessage(nil, unix.NFNL_SUBSYS_IPSET<<8|9, 0, 1, 0, []byte{2, 0, 0, 0})
	route := nl.AppendMessage(nil, unix.RTM_NEWADDR, 0, 1, 0, make([]byte, 8))
	w := func(proto int, b []byte) floorWrite { return floorWrite{proto: proto, b: b} }
	in := []floorWrite{
		w(unix.NETLINK_ROUTE, route), w(unix.NETLINK_ROUTE, route),
		w(unix.NETLINK_NETFILTER, nfnl), w(unix.NETLINK_NETFILTER, batch), w(unix.NETLINK_NETFILTER, nfnl),
		w(unix.NETLINK_NETFILTER, nfnl), w(unix.NETLINK_NETFILTER, nfnl),
		w(unix.NETLINK_ROUTE, route),
	}
	got := mergeWrites(in, 2*len(route)) // two of either, not three
	want := []floorWrite{
		w(unix.NETLINK_ROUTE, append(bytes.Clone(route), route...)),
		w(unix.NETLINK_NETFILTER, nfnl), w(unix.NETLINK_NETFILTER, batch),
		w(unix.NETLINK_NETFILTER, append(bytes.Clone(nfnl), nfnl...)), w(unix.NETLINK_NETFILTER, nfnl),
		w(unix.NETLINK_ROUTE, route),
	}
	if len(got) != len(want) {
		t.Fatalf("%d writes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].proto != want[i].proto || !bytes.Equal(got[i].b, want[i].b) {
			t.Errorf("write %d: protocol %d %x, want %d %x", i, got[i].proto, got[i].b, want[i].proto, want[i].b)
		}
	}
	if &got[5].b[0] == &in[7].b[0] {
		t.Error("a write shares its bytes with the capture")
	}
}
