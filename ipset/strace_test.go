package ipset

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"encoding/binary"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// syscallData is the bytes of one sendto or recvmsg in a file written by
// strace -e write=3,4 -e read=3,4 (see testdata/capture.sh).
type syscallData struct {
	send bool
	data []byte
}

func readStrace(t *testing.T, name string) []syscallData {
	t.Helper()
	f, err := os.Open("testdata/strace/" + name + ".strace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []syscallData
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "sendto("):
			calls = append(calls, syscallData{send: true})
		case strings.HasPrefix(line, "recvmsg("):
			calls = append(calls, syscallData{})
		case strings.HasPrefix(line, " | ") && len(calls) > 0:
			// " | 00000  1c 00 ... 00  ascii |": the hex sits in
			// columns 10 to 58.
			b, err := hex.DecodeString(strings.Join(strings.Fields(line[10:min(58, len(line))]), ""))
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			last := &calls[len(calls)-1]
			last.data = append(last.data, b...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

// messages splits the captured datagrams in one direction into netlink
// messages.
func messages(t *testing.T, calls []syscallData, send bool) []netlink.Message {
	t.Helper()
	var msgs []netlink.Message
	for _, c := range calls {
		if c.send != send {
			continue
		}
		b := c.data
		for len(b) >= nl.HeaderLen {
			var m netlink.Message
			n := int(binary.NativeEndian.Uint32(b))
			if err := m.UnmarshalBinary(b[:n]); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
			b = b[min(nl.Align(n), len(b)):]
		}
	}
	return msgs
}

// sentCommand returns the last request of a command in a capture.
func sentCommand(t *testing.T, name string, cmd uint8) netlink.Message {
	t.Helper()
	var found *netlink.Message
	for _, m := range messages(t, readStrace(t, name), true) {
		if m.Header.Type == netlink.HeaderType(nfnlSubsysIPSet<<8|uint16(cmd)) {
			found = &m
		}
	}
	if found == nil {
		t.Fatalf("%s: no request of command %d", name, cmd)
	}
	return *found
}

// repliesTo returns the replies to the last request of a command.
func repliesTo(t *testing.T, name string, cmd uint8) []netlink.Message {
	t.Helper()
	req := sentCommand(t, name, cmd)
	var out []netlink.Message
	for _, m := range messages(t, readStrace(t, name), false) {
		if m.Header.Sequence == req.Header.Sequence {
			out = append(out, m)
		}
	}
	return out
}
