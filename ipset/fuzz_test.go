package ipset

import (
	"reflect"
	"strings"
	"testing"

	"encoding/binary"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

func FuzzParseEntry(f *testing.F) {
	f.Add(uint8(1), "10.96.0.1,tcp:80")
	f.Add(uint8(3), "1.2.3.4,tcp:443,10.0.0.0/8 timeout 30")
	f.Fuzz(func(t *testing.T, typ uint8, s string) {
		types := Types()
		tp := types[int(typ)%len(types)]
		e, err := ParseEntry(tp, s)
		if err != nil {
			return
		}
		again, err := ParseEntry(tp, e.String())
		if err != nil {
			t.Fatalf("%s entry %q printed as %q, which does not parse: %v", tp, s, e.String(), err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("%s entry %q: %#v, reparsed %#v", tp, s, e, again)
		}
		if err := e.check(tp); err != nil {
			t.Fatalf("parsed entry fails check: %v", err)
		}
	})
}

func FuzzParseSave(f *testing.F) {
	f.Add("create s hash:ip family inet hashsize 1024 maxelem 65536\nadd s 10.0.0.1\n")
	f.Fuzz(func(t *testing.T, s string) {
		sets, err := ParseSave(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, set := range sets {
			if err := set.Set.validate(); err != nil {
				t.Fatalf("parsed set fails validation: %v", err)
			}
			for _, e := range set.Entries {
				if err := e.check(set.Set.Type); err != nil {
					t.Fatalf("parsed entry fails check: %v", err)
				}
			}
		}
	})
}

// splitMessages splits bytes as a datagram of netlink messages, as the
// socket would deliver them.
func splitMessages(b []byte) []netlink.Message {
	var msgs []netlink.Message
	for len(b) >= nl.HeaderLen {
		n := int(binary.NativeEndian.Uint32(b))
		if n < nl.HeaderLen || n > len(b) {
			break
		}
		var m netlink.Message
		if m.UnmarshalBinary(b[:n]) != nil {
			break
		}
		msgs = append(msgs, m)
		b = b[min(nl.Align(n), len(b)):]
	}
	return msgs
}

func FuzzDecodeList(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		sets, err := decodeList(splitMessages(b))
		if err != nil {
			return
		}
		for _, s := range sets {
			_ = s.header.String()
			for _, e := range s.entries {
				_ = e.String()
			}
		}
	})
}

func FuzzDecodeReplies(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs := splitMessages(b)
		_, _, _ = decodeProtocol(msgs)
		_, _ = decodeType(msgs)
		_, _ = decodeIndex(msgs)
		for _, m := range msgs {
			_, _ = decodeLineNo(m.Data[min(4, len(m.Data)):])
		}
	})
}
