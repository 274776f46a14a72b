package ipset

import (
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

// familyName names a family as ipset(8) does: inet, inet6.
func familyName(f inet.Family) string {
	switch f {
	case inet.IPv4:
		return "inet"
	case inet.IPv6:
		return "inet6"
	}
	return f.String()
}

func parseFamily(s string) (inet.Family, error) {
	switch s {
	case "inet":
		return inet.IPv4, nil
	case "inet6":
		return inet.IPv6, nil
	}
	return 0, fmt.Errorf("unknown family %q", s)
}

// Type is a set type, named as ipset(8) names it.
type Type string

// The set types this package encodes and decodes.
const (
	HashIP        Type = "hash:ip"
	HashIPPort    Type = "hash:ip,port"
	HashIPPortIP  Type = "hash:ip,port,ip"
	HashIPPortNet Type = "hash:ip,port,net"
	HashNet       Type = "hash:net"
	HashNetPort   Type = "hash:net,port"
	BitmapPort    Type = "bitmap:port"
)

// Types lists every supported set type.
func Types() []Type {
	return []Type{HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, HashNet, HashNetPort, BitmapPort}
}

// layout says which parts make up an entry of a type, in save syntax order.
type layout struct {
	first  part // address or network, or nothing for bitmap:port
	port   bool // proto:port follows
	second part // trailing address or network
	bitmap bool // a bare port, no family
	hasFam bool
}

type part uint8

const (
	partNone part = iota
	partAddr
	partNet
)

func (t Type) layout() (layout, bool) {
	switch t {
	case HashIP:
		return layout{first: partAddr, hasFam: true}, true
	case HashIPPort:
		return layout{first: partAddr, port: true, hasFam: true}, true
	case HashIPPortIP:
		return layout{first: partAddr, port: true, second: partAddr, hasFam: true}, true
	case HashIPPortNet:
		return layout{first: partAddr, port: true, second: partNet, hasFam: true}, true
	case HashNet:
		return layout{first: partNet, hasFam: true}, true
	case HashNetPort:
		return layout{first: partNet, port: true, hasFam: true}, true
	case BitmapPort:
		return layout{bitmap: true}, true
	}
	return layout{}, false
}

func (t Type) isHash() bool { return len(t) > 5 && t[:5] == "hash:" }

// Set describes a set to create. The kernel picks nothing for us: zero
// values mean the kernel's defaults (hashsize 1024, maxelem 65536), no
// timeouts, no counters, no comments.
type Set struct {
	Name string
	Type Type
	// Family is IPv4 or IPv6 for hash types (zero means IPv4) and ignored
	// for bitmap:port.
	Family   inet.Family
	HashSize uint32
	MaxElem  uint32
	// Timeout is the default lifetime of entries; nonzero turns timeout
	// support on for the set.
	Timeout  time.Duration
	Counters bool
	Comment  bool
	// PortFrom and PortTo bound a bitmap:port set.
	PortFrom, PortTo uint16
}

func (s Set) family() inet.Family {
	if s.Type == BitmapPort {
		return 0
	}
	if s.Family == 0 {
		return inet.IPv4
	}
	return s.Family
}

func (s Set) validate() error {
	if err := validName(s.Name); err != nil {
		return err
	}
	if _, ok := s.Type.layout(); !ok {
		return typeError(s.Type)
	}
	if f := s.family(); s.Type != BitmapPort && f != inet.IPv4 && f != inet.IPv6 {
		return fmt.Errorf("set %s: family %v is not inet or inet6", s.Name, f)
	}
	if s.Type == BitmapPort && s.PortFrom > s.PortTo {
		return fmt.Errorf("set %s: port range %d-%d is reversed", s.Name, s.PortFrom, s.PortTo)
	}
	if s.Type == BitmapPort && (s.HashSize != 0 || s.MaxElem != 0) {
		return fmt.Errorf("set %s: a bitmap has no hashsize or maxelem", s.Name)
	}
	if s.Type != BitmapPort && (s.PortFrom != 0 || s.PortTo != 0) {
		return fmt.Errorf("set %s: only a bitmap:port set has a port range", s.Name)
	}
	if s.Timeout < 0 || s.Timeout%time.Second != 0 {
		return fmt.Errorf("set %s: timeout %v is not a whole number of seconds", s.Name, s.Timeout)
	}
	return nil
}

func validName(name string) error {
	if name == "" || len(name) >= maxNameLen {
		return fmt.Errorf("set name %q must have 1 to %d bytes", name, maxNameLen-1)
	}
	return nil
}

// Header is what the kernel reports about a set.
type Header struct {
	Set
	// Revision is the type revision the set was created with.
	Revision   uint8
	BucketSize uint8
	InitVal    uint32
	Entries    uint32
	References uint32
	MemSize    uint32
}
