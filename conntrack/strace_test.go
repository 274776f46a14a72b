package conntrack

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readStrace returns the data of each system call in a file written by
// `strace -e write=FD` or `-e read=FD` (see testdata/capture.sh): one byte
// slice per call, from strace's hex dump lines.
func readStrace(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "strace", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls [][]byte
	var cur []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " | ") {
			if cur != nil {
				calls = append(calls, cur)
				cur = nil
			}
			continue
		}
		// " | 00000  xx xx ... xx  ascii |": the hex columns are 10 to 59.
		for _, h := range strings.Fields(line[10:min(59, len(line))]) {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("%s: bad hex dump line %q", name, line)
			}
			cur = append(cur, b...)
		}
	}
	if cur != nil {
		calls = append(calls, cur)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatalf("%s: no data in the capture", name)
	}
	return calls
}

// splitMessages splits a datagram into its netlink messages.
func splitMessages(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var msgs [][]byte
	for len(b) >= 16 {
		n := int(binary.NativeEndian.Uint32(b))
		if n < 16 || n > len(b) {
			t.Fatalf("bad netlink message length %d", n)
		}
		msgs = append(msgs, b[:n])
		b = b[min(len(b), (n+3)&^3):]
	}
	return msgs
}

// canonical zeroes the padding after every attribute of a ctnetlink
// message, nested ones included: the conntrack program leaves garbage
// there, which the kernel ignores.
func canonical(msg []byte) []byte {
	out := append([]byte(nil), msg...)
	if len(out) >= 20 {
		zeroPadding(out[20:])
	}
	return out
}

func zeroPadding(b []byte) {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:])
		if n < 4 || n > len(b) {
			return
		}
		if typ&0x8000 != 0 {
			zeroPadding(b[4:n])
		}
		end := min(len(b), (n+3)&^3)
		clear(b[n:end])
		b = b[end:]
	}
}
