package ipset

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

// ParseEntry parses an entry of a set of type t in the syntax of
// `ipset save` (the part after "add NAME "), extensions included.
func ParseEntry(t Type, s string) (Entry, error) {
	e, err := parseEntry(t, s)
	if err != nil {
		return Entry{}, fmt.Errorf("ipset: %w", err)
	}
	return e, nil
}

func parseEntry(t Type, s string) (Entry, error) {
	l, ok := t.layout()
	if !ok {
		return Entry{}, typeError(t)
	}
	fields, err := splitFields(s)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %q: %w", s, err)
	}
	if len(fields) == 0 {
		return Entry{}, errors.New("empty entry")
	}
	e, err := parseElem(l, fields[0])
	if err != nil {
		return Entry{}, fmt.Errorf("entry %q of %s: %w", fields[0], t, err)
	}
	if err := parseExtensions(&e, fields[1:]); err != nil {
		return Entry{}, fmt.Errorf("entry %q: %w", s, err)
	}
	if err := e.check(t); err != nil {
		return Entry{}, fmt.Errorf("entry %q: %w", s, err)
	}
	return e, nil
}

func parseElem(l layout, s string) (Entry, error) {
	var e Entry
	parts := strings.Split(s, ",")
	want := 0
	for _, p := range []bool{l.first != partNone, l.port || l.bitmap, l.second != partNone} {
		if p {
			want++
		}
	}
	if len(parts) != want {
		return e, fmt.Errorf("want %d comma-separated parts, have %d", want, len(parts))
	}
	var err error
	if l.first != partNone {
		if e.Addr, e.Net, err = parsePart(l.first, parts[0]); err != nil {
			return e, err
		}
		parts = parts[1:]
	}
	if l.port || l.bitmap {
		if e.Protocol, e.Port, err = parsePort(parts[0], l.bitmap); err != nil {
			return e, err
		}
		parts = parts[1:]
	}
	if l.second != partNone {
		if e.Addr2, e.Net2, err = parsePart(l.second, parts[0]); err != nil {
			return e, err
		}
	}
	return e, nil
}

func parsePart(p part, s string) (netip.Addr, netip.Prefix, error) {
	if p == partAddr {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, netip.Prefix{}, err
		}
		return a, netip.Prefix{}, nil
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, netip.Prefix{}, err
		}
		return netip.Addr{}, netip.PrefixFrom(a, a.BitLen()), nil
	}
	n, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, err
	}
	return netip.Addr{}, n, nil
}

// parsePort reads "proto:port"; a bitmap takes a bare port and ignores the
// protocol, as the kernel does.
func parsePort(s string, bitmap bool) (inet.Protocol, uint16, error) {
	name, num, found := strings.Cut(s, ":")
	if !found {
		if !bitmap {
			return 0, 0, fmt.Errorf("port %q needs a protocol (tcp:80)", s)
		}
		num = name
	}
	port, err := strconv.ParseUint(num, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("port %q: %w", num, err)
	}
	if bitmap {
		if found {
			if _, err := parseProtocol(name); err != nil {
				return 0, 0, err
			}
		}
		return 0, uint16(port), nil
	}
	proto, err := parseProtocol(name)
	if err != nil {
		return 0, 0, err
	}
	return proto, uint16(port), nil
}

func parseExtensions(e *Entry, fields []string) error {
	for len(fields) > 0 {
		if len(fields) < 2 {
			return fmt.Errorf("option %q needs a value", fields[0])
		}
		name, val := fields[0], fields[1]
		fields = fields[2:]
		switch name {
		case "timeout":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil {
				return fmt.Errorf("timeout %q: %w", val, err)
			}
			e.Timeout = time.Duration(n) * time.Second
			if n == 0 {
				e.Timeout = Permanent
			}
		case "comment":
			e.Comment = val
		case "packets", "bytes":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return fmt.Errorf("%s %q: %w", name, val, err)
			}
			if e.Counters == nil {
				e.Counters = &Counters{}
			}
			if name == "packets" {
				e.Counters.Packets = n
			} else {
				e.Counters.Bytes = n
			}
		default:
			return fmt.Errorf("unknown option %q", name)
		}
	}
	return nil
}

// splitFields splits on blanks, keeping a double-quoted field (a comment)
// whole and without its quotes.
func splitFields(s string) ([]string, error) {
	var fields []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return fields, nil
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote")
			}
			fields = append(fields, s[1:1+end])
			s = s[2+end:]
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		fields = append(fields, s[:end])
		s = s[end:]
	}
}
