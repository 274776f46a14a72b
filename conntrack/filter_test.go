package conntrack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/mdlayher/netlink"
)

// attr builds a netlink attribute for expected bytes; nested marks it
// NLA_F_NESTED.
func attr(typ uint16, payload ...[]byte) []byte {
	data := bytes.Join(payload, nil)
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func nested(typ uint16, children ...[]byte) []byte { return attr(typ|0x8000, children...) }

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func ne32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func ip4(s string) []byte  { a := netip.MustParseAddr(s).As4(); return a[:] }

func TestDumpRequest(t *testing.T) {
	svc := netip.MustParseAddr("10.96.0.10")
	ep := netip.MustParseAddrPort("10.244.1.5:5353")
	zone := uint16(4)
	tests := []struct {
		name   string
		filter Filter
		family inet.Family
		level  kernelLevel
		want   []byte
	}{
		{
			name:   "destination address and port",
			filter: ByDestination(inet.UDP, svc, 53), family: inet.IPv4, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleIP, attr(ctaIPv4Dst, ip4("10.96.0.10"))),
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoDstPort, be16(53)))),
				nested(ctaFilter, attr(ctaFilterOrigFlags, ne32(filterIPDst|filterProto|filterDstPort))),
			}, nil),
		},
		{
			name:   "destination address only",
			filter: ByDestination(inet.UDP, svc, 0), family: inet.IPv4, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleIP, attr(ctaIPv4Dst, ip4("10.96.0.10"))),
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}))),
				nested(ctaFilter, attr(ctaFilterOrigFlags, ne32(filterIPDst|filterProto))),
			}, nil),
		},
		{
			name:   "node port",
			filter: ByDestinationPort(0, inet.UDP, 30053), family: inet.IPv4, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoDstPort, be16(30053)))),
				nested(ctaFilter, attr(ctaFilterOrigFlags, ne32(filterProto|filterDstPort))),
			}, nil),
		},
		{
			name:   "endpoint",
			filter: ByEndpoint(inet.UDP, netip.AddrPortFrom(svc, 53), ep), family: inet.IPv4, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleIP, attr(ctaIPv4Dst, ip4("10.96.0.10"))),
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoDstPort, be16(53)))),
				nested(ctaTupleReply,
					nested(ctaTupleIP, attr(ctaIPv4Src, ip4("10.244.1.5"))),
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoSrcPort, be16(5353)))),
				nested(ctaFilter,
					attr(ctaFilterOrigFlags, ne32(filterIPDst|filterProto|filterDstPort)),
					attr(ctaFilterReplyFlags, ne32(filterIPSrc|filterProto|filterSrcPort))),
			}, nil),
		},
		{
			name:   "stale endpoints: the exclusion stays in Go",
			filter: ByStaleEndpoints(inet.UDP, netip.AddrPortFrom(svc, 53), []netip.AddrPort{ep}), family: inet.IPv4, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleIP, attr(ctaIPv4Dst, ip4("10.96.0.10"))),
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoDstPort, be16(53)))),
				nested(ctaFilter, attr(ctaFilterOrigFlags, ne32(filterIPDst|filterProto|filterDstPort))),
			}, nil),
		},
		{
			name:   "IPv6 addresses stay in Go",
			filter: ByDestination(inet.UDP, netip.MustParseAddr("fd00::10"), 53), family: inet.IPv6, level: levelTuple,
			want: bytes.Join([][]byte{
				nested(ctaTupleOrig,
					nested(ctaTupleProto, attr(ctaProtoNum, []byte{17}), attr(ctaProtoDstPort, be16(53)))),
				nested(ctaFilter, attr(ctaFilterOrigFlags, ne32(filterProto|filterDstPort))),
			}, nil),
		},
		{
			name:   "mark and zone",
			filter: Filter{Mark: 0x4321, MarkMask: 0xff00, Zone: &zone}, family: 0, level: levelTuple,
			want: bytes.Join([][]byte{
				attr(ctaMark, be32(0x4300)), attr(ctaMarkMask, be32(0xff00)), attr(ctaZone, be16(4)),
			}, nil),
		},
		{
			name:   "kernel without CTA_FILTER",
			filter: Filter{Protocol: inet.UDP, Orig: TupleFilter{Dst: svc}, Mark: 1, MarkMask: 1}, family: inet.IPv4, level: levelMark,
			want: bytes.Join([][]byte{attr(ctaMark, be32(1)), attr(ctaMarkMask, be32(1))}, nil),
		},
		{
			name:   "kernel with family filtering only",
			filter: ByDestination(inet.UDP, svc, 53), family: inet.IPv4, level: levelFamily,
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.filter.dumpRequest(tt.family, tt.level)
			if err != nil {
				t.Fatal(err)
			}
			if want := netlink.Request | netlink.Dump; netlink.Request|m.Flags != want {
				t.Errorf("flags %v, want %v", netlink.Request|m.Flags, want)
			}
			if m.Data[0] != byte(tt.family) {
				t.Errorf("family %d, want %d", m.Data[0], tt.family)
			}
			if got := m.Data[4:]; !bytes.Equal(got, tt.want) {
				t.Errorf("attributes\ngot:  % x\nwant: % x", got, tt.want)
			}
		})
	}
}

func TestFilterMatch(t *testing.T) {
	a := netip.MustParseAddr
	flow := func(src, dst string, sport, dport uint16, rsrc string, rsport uint16) Flow {
		return Flow{
			Orig:  Tuple{Src: a(src), Dst: a(dst), Protocol: inet.UDP, SrcPort: sport, DstPort: dport},
			Reply: Tuple{Src: a(rsrc), Dst: a(src), Protocol: inet.UDP, SrcPort: rsport, DstPort: sport},
		}
	}
	toSvc := flow("10.0.0.1", "10.96.0.10", 4000, 53, "10.244.1.5", 5353)
	toSvc6 := flow("fd00::1", "fd00::10", 4000, 53, "fd00:244::5", 5353)
	tcp := toSvc
	tcp.Orig.Protocol, tcp.Reply.Protocol = inet.TCP, inet.TCP
	marked := toSvc
	marked.Mark, marked.Zone = 0x4321, 4
	zone4 := uint16(4)
	zone0 := uint16(0)
	svc := netip.MustParseAddrPort("10.96.0.10:53")
	tests := []struct {
		name   string
		filter Filter
		flow   Flow
		want   bool
	}{
		{"all", All(), toSvc, true},
		{"destination", ByDestination(inet.UDP, a("10.96.0.10"), 53), toSvc, true},
		{"destination any port", ByDestination(inet.UDP, a("10.96.0.10"), 0), toSvc, true},
		{"other destination", ByDestination(inet.UDP, a("10.96.0.11"), 0), toSvc, false},
		{"other port", ByDestination(inet.UDP, a("10.96.0.10"), 54), toSvc, false},
		{"other protocol", ByDestination(inet.UDP, a("10.96.0.10"), 53), tcp, false},
		{"other family", ByDestination(inet.UDP, a("10.96.0.10"), 53), toSvc6, false},
		{"IPv6 destination", ByDestination(inet.UDP, a("fd00::10"), 53), toSvc6, true},
		{"node port", ByDestinationPort(0, inet.UDP, 53), toSvc6, true},
		{"node port in IPv4 only", ByDestinationPort(inet.IPv4, inet.UDP, 53), toSvc6, false},
		{"endpoint", ByEndpoint(inet.UDP, svc, netip.MustParseAddrPort("10.244.1.5:5353")), toSvc, true},
		{"endpoint any port", ByEndpoint(inet.UDP, svc, netip.MustParseAddrPort("10.244.1.5:0")), toSvc, true},
		{"other endpoint", ByEndpoint(inet.UDP, svc, netip.MustParseAddrPort("10.244.1.6:5353")), toSvc, false},
		{"endpoint other port", ByEndpoint(inet.UDP, svc, netip.MustParseAddrPort("10.244.1.5:53")), toSvc, false},
		{"stale endpoint", ByStaleEndpoints(inet.UDP, svc, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.6:5353")}), toSvc, true},
		{"kept endpoint", ByStaleEndpoints(inet.UDP, svc, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.5:5353")}), toSvc, false},
		{"kept endpoint any port", ByStaleEndpoints(inet.UDP, svc, []netip.AddrPort{netip.MustParseAddrPort("10.244.1.5:0")}), toSvc, false},
		{"no endpoints kept", ByStaleEndpoints(inet.UDP, svc, nil), toSvc, true},
		{"mark", Filter{Mark: 0x4300, MarkMask: 0xff00}, marked, true},
		{"other mark", Filter{Mark: 0x4400, MarkMask: 0xff00}, marked, false},
		{"zone", Filter{Zone: &zone4}, marked, true},
		{"default zone", Filter{Zone: &zone0}, marked, false},
		{"original source", Filter{Orig: TupleFilter{Src: a("10.0.0.1"), SrcPort: 4000}, Protocol: inet.UDP}, toSvc, true},
		{"reply destination", Filter{Reply: TupleFilter{Dst: a("10.0.0.2")}}, toSvc, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.Match(&tt.flow); got != tt.want {
				t.Errorf("Match(%v) with %v = %v, want %v", tt.flow, tt.filter, got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestFilterFamilies(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name   string
		filter *Filter
		want   []inet.Family
	}{
		{"nil", nil, []inet.Family{0}},
		{"mark only", &Filter{Mark: 1, MarkMask: 1}, []inet.Family{0}},
		{"family", &Filter{Family: inet.IPv6}, []inet.Family{inet.IPv6}},
		{"address", ptr(ByDestination(inet.UDP, a("10.0.0.1"), 0)), []inet.Family{inet.IPv4}},
		{"IPv6 reply address", &Filter{Reply: TupleFilter{Src: a("fd00::1")}}, []inet.Family{inet.IPv6}},
		{"port on both families", ptr(ByDestinationPort(0, inet.UDP, 30000)), []inet.Family{inet.IPv4, inet.IPv6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.families(); !slices.Equal(got, tt.want) {
				t.Errorf("families() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name    string
		filter  Filter
		wantErr bool
	}{
		{"empty", Filter{}, false},
		{"consistent", Filter{Family: inet.IPv4, Orig: TupleFilter{Dst: a("10.0.0.1")}}, false},
		{"family contradicts address", Filter{Family: inet.IPv6, Orig: TupleFilter{Dst: a("10.0.0.1")}}, true},
		{"addresses of both families", Filter{Orig: TupleFilter{Dst: a("10.0.0.1")}, Reply: TupleFilter{Src: a("fd00::1")}}, true},
		{"IPv4-mapped address", Filter{Orig: TupleFilter{Dst: a("::ffff:10.0.0.1")}}, true},
		{"unknown family", Filter{Family: 7}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.filter.validate(); (err != nil) != tt.wantErr {
				t.Errorf("validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
