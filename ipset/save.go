package ipset

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Saved is one set as a file in `ipset save` syntax holds it.
type Saved struct {
	Set     Set
	Entries []Entry
}

// ParseSave reads the output of `ipset save`: "create" lines, each followed
// by the set's "add" lines. Blank lines and lines starting with # are
// skipped. Errors name the line.
func ParseSave(r io.Reader) ([]Saved, error) {
	var sets []Saved
	byName := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for lineno := 1; sc.Scan(); lineno++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		name, rest, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		switch verb {
		case "create":
			s, err := parseCreate(name, rest)
			if err != nil {
				return nil, fmt.Errorf("ipset: line %d: %w", lineno, err)
			}
			if _, dup := byName[name]; dup {
				return nil, fmt.Errorf("ipset: line %d: set %s created twice", lineno, name)
			}
			byName[name] = len(sets)
			sets = append(sets, Saved{Set: s})
		case "add":
			i, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("ipset: line %d: add to set %s before its create line", lineno, name)
			}
			e, err := parseEntry(sets[i].Set.Type, rest)
			if err != nil {
				return nil, fmt.Errorf("ipset: line %d: %w", lineno, err)
			}
			sets[i].Entries = append(sets[i].Entries, e)
		default:
			return nil, fmt.Errorf("ipset: line %d: unknown command %q", lineno, verb)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ipset: reading a save file: %w", err)
	}
	return sets, nil
}

func parseCreate(name, rest string) (Set, error) {
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return Set{}, fmt.Errorf("create %s: no type", name)
	}
	s := Set{Name: name, Type: Type(fields[0])}
	fields = fields[1:]
	for len(fields) > 0 {
		opt := fields[0]
		fields = fields[1:]
		switch opt {
		case "counters":
			s.Counters = true
			continue
		case "comment":
			s.Comment = true
			continue
		}
		if len(fields) == 0 {
			return Set{}, fmt.Errorf("create %s: option %q needs a value", name, opt)
		}
		val := fields[0]
		fields = fields[1:]
		if err := setCreateOption(&s, opt, val); err != nil {
			return Set{}, fmt.Errorf("create %s: %w", name, err)
		}
	}
	if err := s.validate(); err != nil {
		return Set{}, err
	}
	return s, nil
}

func setCreateOption(s *Set, opt, val string) error {
	var err error
	switch opt {
	case "family":
		s.Family, err = parseFamily(val)
	case "hashsize":
		s.HashSize, err = parseUint32(val)
	case "maxelem":
		s.MaxElem, err = parseUint32(val)
	case "timeout":
		var t uint32
		t, err = parseUint32(val)
		s.Timeout = time.Duration(t) * time.Second
	case "range":
		from, to, ok := strings.Cut(val, "-")
		if !ok {
			return fmt.Errorf("range %q is not FROM-TO", val)
		}
		var f, t uint64
		if f, err = strconv.ParseUint(from, 10, 16); err == nil {
			t, err = strconv.ParseUint(to, 10, 16)
		}
		s.PortFrom, s.PortTo = uint16(f), uint16(t)
	case "bucketsize", "initval":
		// The kernel's tuning of a hash, reported by save; a new set
		// gets its own.
	default:
		return fmt.Errorf("unknown option %q", opt)
	}
	if err != nil {
		return fmt.Errorf("%s %q: %w", opt, val, err)
	}
	return nil
}

func parseUint32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 0, 32)
	return uint32(n), err
}

// String prints the header as ipset save's "create" line.
func (h Header) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "create %s %s", h.Name, h.Type)
	if h.Type == BitmapPort {
		fmt.Fprintf(&b, " range %d-%d", h.PortFrom, h.PortTo)
	} else {
		fmt.Fprintf(&b, " family %s hashsize %d maxelem %d", familyName(h.family()), h.HashSize, h.MaxElem)
	}
	if h.Timeout != 0 {
		fmt.Fprintf(&b, " timeout %d", h.Timeout/time.Second)
	}
	if h.Counters {
		b.WriteString(" counters")
	}
	if h.Comment {
		b.WriteString(" comment")
	}
	// Like ipset save, only what the kernel reports: Linux 5.10 reports
	// neither (TestHostLargeSet on that kernel), newer kernels both.
	if h.BucketSize != 0 {
		fmt.Fprintf(&b, " bucketsize %d", h.BucketSize)
	}
	if h.InitVal != 0 {
		fmt.Fprintf(&b, " initval 0x%08x", h.InitVal)
	}
	return b.String()
}

// WriteSave writes a set in `ipset save` syntax: its create line, then one
// add line per entry.
func WriteSave(w io.Writer, h Header, entries []Entry) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, h)
	for _, e := range entries {
		fmt.Fprintf(bw, "add %s %s\n", h.Name, e)
	}
	return bw.Flush()
}
