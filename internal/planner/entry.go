package planner

import (
	"cmp"
	"net/netip"
	"strconv"

	"github.com/ipvsplane/ipvsplane/inet"
)

// Entry is one member of an ipset, with the dimensions of its set's type
// set and the others zero: hash:ip holds Addr; hash:ip,port Addr,
// Protocol and Port; hash:ip,port,ip adds Addr2; hash:ip,port,net adds
// the network Addr2/Bits2; bitmap:port holds Port alone. Entries compare
// with ==, and print as `ipset save` writes them.
type Entry struct {
	Addr     netip.Addr
	Protocol inet.Protocol
	Port     uint16
	Addr2    netip.Addr
	// Bits2 is the prefix length of the network in a hash:ip,port,net
	// entry, and 0 in the other types (a source range of length 0 is
	// never an entry).
	Bits2 uint8
}

// portEntry is the hash:ip,port entry of an address, protocol and port.
func portEntry(ip netip.Addr, p inet.Protocol, port uint16) Entry {
	return Entry{Addr: ip, Protocol: p, Port: port}
}

// OwnedEntry is the entry of KUBE-IPVSPLANE-OWNED that records k as
// ipvsplane's.
func (k VirtualKey) OwnedEntry() Entry { return portEntry(k.Addr, k.Protocol, k.Port) }

// Net2 returns the network of a hash:ip,port,net entry.
func (e Entry) Net2() (netip.Prefix, bool) {
	if e.Bits2 == 0 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(e.Addr2, int(e.Bits2)), true
}

// String returns the entry in `ipset save` syntax: "10.96.0.1",
// "10.96.0.1,tcp:80", "10.96.0.1,tcp:80,10.244.1.5",
// "10.96.0.1,tcp:80,192.168.0.0/24" or "30080".
func (e Entry) String() string {
	switch {
	case !e.Addr.IsValid():
		return strconv.Itoa(int(e.Port))
	case e.Protocol == 0:
		return e.Addr.String()
	}
	s := e.Addr.String() + "," + e.Protocol.String() + ":" + strconv.Itoa(int(e.Port))
	if net, ok := e.Net2(); ok {
		return s + "," + net.String()
	}
	if e.Addr2.IsValid() {
		s += "," + e.Addr2.String()
	}
	return s
}

// compare orders entries by address, protocol, port and third dimension.
func (e Entry) compare(o Entry) int {
	if c := e.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if c := cmp.Compare(e.Protocol, o.Protocol); c != 0 {
		return c
	}
	if c := cmp.Compare(e.Port, o.Port); c != 0 {
		return c
	}
	if c := e.Addr2.Compare(o.Addr2); c != 0 {
		return c
	}
	return cmp.Compare(e.Bits2, o.Bits2)
}
