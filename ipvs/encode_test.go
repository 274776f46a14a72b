package ipvs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// sendmsgRE picks the flags and the payload after the nlmsghdr out of a
// line of `strace -xx`.
var sendmsgRE = regexp.MustCompile(`nlmsg_flags=([A-Z_|]+).*?\}, "((?:\\x[0-9a-f]{2})*)"\]`)

// capturedRequest returns the IPVS command ipvsadm sent, as recorded under
// testdata/ipvsadm: the last message that is neither the family lookup
// nor ipvsadm's GET_INFO probe.
func capturedRequest(t *testing.T, name string) (flags string, payload []byte) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "ipvsadm", name+".strace"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sendmsg(") || strings.Contains(line, "nlmsg_type=0x10 ") {
			continue
		}
		m := sendmsgRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: unparsable line %q", name, line)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[2], `\x`, ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= 1 && b[0] == cmdGetInfo {
			continue
		}
		flags, payload = m[1], b
	}
	if payload == nil {
		t.Fatalf("%s: no IPVS request found", name)
	}
	return flags, payload
}

// nestedAttrs returns the attributes nested in first-level attribute typ
// of a generic netlink payload, keyed by type.
func nestedAttrs(t *testing.T, payload []byte, typ uint16) map[uint16][]byte {
	t.Helper()
	top, err := netlink.UnmarshalAttributes(payload[4:])
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range top {
		if a.Type&^netlink.Nested == typ {
			inner, err := netlink.UnmarshalAttributes(a.Data)
			if err != nil {
				t.Fatal(err)
			}
			m := map[uint16][]byte{}
			for _, ia := range inner {
				m[ia.Type] = ia.Data
			}
			return m
		}
	}
	t.Fatalf("no attribute %d", typ)
	return nil
}

var (
	vip4 = netip.MustParseAddr("10.0.0.1")
	tcp4 = Service{Protocol: inet.TCP, Addr: vip4, Port: 80}
)

// The requests this package sends, against what ipvsadm 1.31 sent for the
// same change on Linux 6.1 (testdata/ipvsadm, captured in the VM with
// strace).
func TestEncodeMatchesIpvsadm(t *testing.T) {
	tests := []struct {
		capture string
		op      op
		// keyOnly: ipvsadm sends the whole service (empty scheduler and
		// all) even where the kernel reads only its key, and the whole
		// destination when deleting one; this package sends just the key,
		// so only the key attributes are compared.
		keyOnly bool
	}{
		{"create-service-tcp4", op{kind: opCreateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "rr"}}, false},
		{"create-service-udp6-persistent", op{kind: opCreateService, svc: Service{
			Protocol: inet.UDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 53, Scheduler: "wrr",
			Flags: Persistent, Timeout: 300 * time.Second,
		}}, false},
		{"create-service-fwmark-sh", op{kind: opCreateService, svc: Service{
			Family: inet.IPv4, FirewallMark: 7, Scheduler: "sh", Flags: SHFallback | SHPort,
		}}, false},
		{"create-service-sctp-netmask", op{kind: opCreateService, svc: Service{
			Protocol: inet.SCTP, Addr: netip.MustParseAddr("10.0.0.3"), Port: 9, Scheduler: "lc",
			Flags: Persistent, Timeout: time.Minute, Netmask: 24,
		}}, false},
		{"update-service", op{kind: opUpdateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "wlc"}}, false},
		{"delete-service", op{kind: opDeleteService, svc: tcp4}, true},
		{"create-destination-masq", op{kind: opCreateDestination, svc: tcp4, dest: Destination{
			Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080, Forward: Masquerade, Weight: 3,
			UpperThreshold: 100, LowerThreshold: 10,
		}}, true},
		{"create-destination-gue", op{kind: opCreateDestination, svc: tcp4, dest: Destination{
			Addr: netip.MustParseAddr("10.1.0.2"), Port: 80, Forward: Tunnel, Weight: 1,
			TunnelType: GUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum,
		}}, true},
		{"update-destination-route", op{kind: opUpdateDestination, svc: tcp4, dest: Destination{
			Addr: netip.MustParseAddr("10.1.0.1"), Port: 80, Forward: Route, Drained: true,
		}}, true},
		{"delete-destination", op{kind: opDeleteDestination, svc: tcp4, dest: Destination{
			Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080,
		}}, true},
		{"set-timeouts", op{kind: opSetTimeouts, timeouts: Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}}, false},
		{"flush", op{kind: opFlush}, false},
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			flags, want := capturedRequest(t, tt.capture)
			if err := tt.op.validate(); err != nil {
				t.Fatal(err)
			}
			var w nl.Writer
			tt.op.encode(&w)
			data := append(nl.AppendGenlHeader(nil, tt.op.command(), genlVersion), w.B...)
			msgs, err := nl.ParseMessages(nl.AppendMessage(nil, 42, netlink.Request|netlink.Acknowledge, 1, 0, data))
			if err != nil || len(msgs) != 1 {
				t.Fatalf("framing: %v, %v", msgs, err)
			}
			m := msgs[0]
			if got := m.Header.Flags.String(); flags != "NLM_F_REQUEST|NLM_F_ACK" || got != "request|acknowledge" {
				t.Errorf("flags: ipvsadm %s, we %s", flags, got)
			}
			if !tt.keyOnly {
				if !bytes.Equal(m.Data, want) {
					t.Fatalf("request differs from ipvsadm's\n got %x\nwant %x", m.Data, want)
				}
				return
			}
			if !bytes.Equal(m.Data[:4], want[:4]) {
				t.Fatalf("generic netlink header %x, ipvsadm %x", m.Data[:4], want[:4])
			}
			compareNest(t, "service", nestedAttrs(t, m.Data, cmdAttrService), nestedAttrs(t, want, cmdAttrService), nil)
			if tt.op.hasDestination() {
				var all []uint16
				if tt.op.kind != opDeleteDestination {
					all = []uint16{destAttrFwdMethod, destAttrWeight, destAttrUThresh, destAttrLThresh, destAttrTunType, destAttrTunPort, destAttrTunFlags}
				}
				compareNest(t, "destination", nestedAttrs(t, m.Data, cmdAttrDest), nestedAttrs(t, want, cmdAttrDest), all)
			}
		})
	}
}

// compareNest checks that every attribute we send equals ipvsadm's, and
// that we send each of must.
func compareNest(t *testing.T, what string, got, want map[uint16][]byte, must []uint16) {
	t.Helper()
	for typ, g := range got {
		if w, ok := want[typ]; !ok || !bytes.Equal(g, w) {
			t.Errorf("%s attribute %d: got %x, ipvsadm %x", what, typ, g, w)
		}
	}
	for _, typ := range must {
		if _, ok := got[typ]; !ok {
			t.Errorf("%s attribute %d missing", what, typ)
		}
	}
}

// A batch's requests are the ops' own encodings, whether a destination's
// service key was written or copied from the destination before it.
func TestBatchEncodesAsOps(t *testing.T) {
	udp6 := Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 53}
	fwm := Service{Family: inet.IPv4, FirewallMark: 7}
	dest := func(i int) Destination {
		return Destination{Addr: netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), Port: 8080, Forward: Masquerade, Weight: i}
	}
	ops := []op{
		{kind: opCreateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "rr"}},
		{kind: opCreateDestination, svc: tcp4, dest: dest(1)},
		{kind: opCreateDestination, svc: tcp4, dest: dest(2)},
		{kind: opUpdateDestination, svc: tcp4, dest: dest(3)},
		{kind: opDeleteDestination, svc: tcp4, dest: dest(4)},
		{kind: opCreateDestination, svc: Service{Protocol: inet.TCP, Addr: vip4, Port: 81}, dest: dest(1)},
		{kind: opCreateDestination, svc: Service{Protocol: inet.UDP, Addr: vip4, Port: 81}, dest: dest(1)},
		{kind: opCreateDestination, svc: udp6, dest: Destination{Addr: netip.MustParseAddr("2001:db8::5"), Port: 53}},
		{kind: opCreateDestination, svc: udp6, dest: Destination{Addr: netip.MustParseAddr("2001:db8::6"), Port: 53}},
		{kind: opCreateDestination, svc: fwm, dest: dest(1)},
		{kind: opCreateDestination, svc: Service{Family: inet.IPv4, FirewallMark: 8}, dest: dest(1)},
		{kind: opDeleteService, svc: tcp4},
		{kind: opCreateDestination, svc: tcp4, dest: dest(5)},
	}
	var b Batch
	check := func(ops []op) {
		t.Helper()
		for i, o := range ops {
			var w nl.Writer
			o.encode(&w)
			want := append(nl.AppendGenlHeader(nil, o.command(), genlVersion), w.B...)
			if got := b.payload(i); !bytes.Equal(got, want) {
				t.Errorf("request %d (%s %s):\n got %x\nwant %x", i, o.name(), o.object(), got, want)
			}
		}
	}
	for _, o := range ops {
		b.add(o)
	}
	check(ops)
	// A reset batch copies nothing from before it.
	b.Reset()
	b.add(ops[8])
	b.add(ops[2])
	check([]op{ops[8], ops[2]})
}
