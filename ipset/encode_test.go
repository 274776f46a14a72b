package ipset

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

func ipPort(a string, p inet.Protocol, port uint16) Entry {
	return Entry{Addr: netip.MustParseAddr(a), Protocol: p, Port: port}
}

// TestEncodeMatchesIPSet compares each request with the one ipset(8) sent
// for the same command (testdata/strace, made by testdata/capture.sh).
func TestEncodeMatchesIPSet(t *testing.T) {
	entry := func(t *testing.T, typ Type, s string) Entry {
		e, err := ParseEntry(typ, s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// The revision ipset(8) asked for comes from the kernel's type reply.
	revision := func(t *testing.T, capture string) uint8 {
		rev, err := decodeType(repliesTo(t, capture, cmdType))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	tests := []struct {
		capture string
		cmd     uint8
		build   func(t *testing.T) *nl.Request
	}{
		{"create_hash_ip_port", cmdProtocol, func(t *testing.T) *nl.Request {
			return encodeProtocol(7)
		}},
		{"create_hash_ip_port", cmdType, func(t *testing.T) *nl.Request {
			return encodeType(7, HashIPPort, inet.IPv4)
		}},
		{"create_hash_ip_port", cmdCreate, func(t *testing.T) *nl.Request {
			s := Set{Name: "kube", Type: HashIPPort, Family: inet.IPv4, HashSize: 1024, MaxElem: 65536}
			return encodeCreate(7, s, revision(t, "create_hash_ip_port"), true)
		}},
		{"create_exist", cmdCreate, func(t *testing.T) *nl.Request {
			s := Set{Name: "kube", Type: HashIPPort, HashSize: 1024, MaxElem: 65536}
			return encodeCreate(7, s, revision(t, "create_exist"), false)
		}},
		{"create_bitmap_port", cmdCreate, func(t *testing.T) *nl.Request {
			s := Set{Name: "b", Type: BitmapPort, PortFrom: 0, PortTo: 1000, Timeout: 100 * time.Second, Counters: true, Comment: true}
			return encodeCreate(7, s, revision(t, "create_bitmap_port"), true)
		}},
		{"create_hash_ip6", cmdCreate, func(t *testing.T) *nl.Request {
			s := Set{Name: "h6", Type: HashIP, Family: inet.IPv6, HashSize: 64, MaxElem: 100, Timeout: 300 * time.Second, Counters: true, Comment: true}
			return encodeCreate(7, s, revision(t, "create_hash_ip6"), true)
		}},
		{"add_ip_port", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "kube", ipPort("10.0.0.1", inet.TCP, 80), true)
		}},
		{"add_exist", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "kube", ipPort("10.0.0.1", inet.TCP, 80), false)
		}},
		{"add_net_comment", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "n", entry(t, HashNet, `10.0.0.0/8 comment "hi"`), true)
		}},
		{"add_ip_port_net6", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "ipn", entry(t, HashIPPortNet, "fd00::1,udp:53,fd00::/64"), true)
		}},
		{"add_ip_port_ip", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "ipp", entry(t, HashIPPortIP, "10.0.0.2,tcp:8080,10.0.0.2"), true)
		}},
		{"add_net_port", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "np", entry(t, HashNetPort, "10.1.0.0/16,sctp:9"), true)
		}},
		{"add_bitmap", cmdAdd, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdAdd, "b", entry(t, BitmapPort, "81 timeout 0 comment x"), true)
		}},
		{"add_ip_port", cmdHeader, func(t *testing.T) *nl.Request {
			return encodeNamed(7, cmdHeader, 0, "kube")
		}},
		{"test_member", cmdTest, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdTest, "kube", ipPort("10.0.0.1", inet.TCP, 80), false)
		}},
		{"del", cmdDel, func(t *testing.T) *nl.Request {
			return encodeEntryCmd(7, cmdDel, "kube", ipPort("10.0.0.1", inet.TCP, 80), true)
		}},
		{"flush", cmdFlush, func(t *testing.T) *nl.Request {
			return encodeNamed(7, cmdFlush, namedFlags(cmdFlush), "x")
		}},
		{"destroy", cmdDestroy, func(t *testing.T) *nl.Request {
			return encodeNamed(7, cmdDestroy, namedFlags(cmdDestroy), "y")
		}},
		{"rename", cmdRename, func(t *testing.T) *nl.Request {
			return encodeTwoNames(7, cmdRename, "x", "y")
		}},
		{"swap", cmdSwap, func(t *testing.T) *nl.Request {
			return encodeTwoNames(7, cmdSwap, "a", "y")
		}},
		{"list_names", cmdList, func(t *testing.T) *nl.Request {
			return encodeList(7, "", flagListSetName)
		}},
		{"list_header", cmdList, func(t *testing.T) *nl.Request {
			return encodeList(7, "kube", flagListHeader)
		}},
		{"list_kube", cmdList, func(t *testing.T) *nl.Request {
			return encodeList(7, "kube", 0)
		}},
		{"restore", cmdAdd, func(t *testing.T) *nl.Request {
			entries := []Entry{ipPort("10.0.0.2", inet.UDP, 53), ipPort("10.0.0.3", inet.SCTP, 9), ipPort("10.0.0.4", inet.TCP, 443)}
			chunks := packChunks(7, cmdAdd, "kube", entries, []int{0, 1, 2}, true)
			if len(chunks) != 1 {
				t.Fatalf("packChunks: %d chunks", len(chunks))
			}
			return chunks[0].req
		}},
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			want := sentCommand(t, tt.capture, tt.cmd)
			got := tt.build(t)
			gotFlags := netlink.Request | got.Flags
			if netlink.HeaderType(got.Type) != want.Header.Type || gotFlags != want.Header.Flags {
				t.Errorf("header type %#x flags %#x, ipset sent type %#x flags %#x",
					got.Type, gotFlags, want.Header.Type, want.Header.Flags)
			}
			if !bytes.Equal(got.Data, want.Data) {
				t.Errorf("payload differs from ipset's\n got % x\nwant % x", got.Data, want.Data)
			}
		})
	}
}

func TestPackChunksSplitsAtAttributeLimit(t *testing.T) {
	entries := make([]Entry, 5000)
	indexes := make([]int, len(entries))
	for i := range entries {
		entries[i] = ipPort("10.0.0.1", inet.TCP, uint16(i))
		indexes[i] = i
	}
	chunks := packChunks(7, cmdAdd, "s", entries, indexes, false)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks for 5000 entries, want several", len(chunks))
	}
	next := 0
	for _, ch := range chunks {
		if len(ch.req.Data) > maxMessage {
			t.Errorf("message of %d bytes", len(ch.req.Data))
		}
		for _, idx := range ch.indexes {
			if idx != next {
				t.Fatalf("chunk holds entry %d, want %d", idx, next)
			}
			next++
		}
	}
	if next != len(entries) {
		t.Errorf("chunks hold %d entries, want %d", next, len(entries))
	}
}
