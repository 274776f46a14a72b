//go:build hosttest || vmtest

package conntrack

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// hostConn returns a Conn in a fresh namespace, closed at the end of the
// test.
func hostConn(t testing.TB) (*Conn, *testutil.NetNS) {
	t.Helper()
	ns := testutil.NewNetNS(t)
	return testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: ns.FD()}) }), ns
}

// listed is one line of `conntrack -L` output reduced to what the tests
// compare.
type listed struct {
	proto            string
	origSrc, origDst netip.AddrPort
	replySrc         netip.AddrPort
}

// conntrackList runs the real conntrack program in the namespace: the
// independent reader of what the kernel holds.
func conntrackList(t testing.TB, ns *testutil.NetNS, args ...string) []listed {
	t.Helper()
	testutil.RequireProgram(t, "conntrack")
	out := ns.Run(t, "conntrack", append([]string{"-L"}, args...)...)
	var entries []listed
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		e := listed{proto: fields[0]}
		var srcs, dsts, sports, dports []string
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch k {
			case "src":
				srcs = append(srcs, v)
			case "dst":
				dsts = append(dsts, v)
			case "sport":
				sports = append(sports, v)
			case "dport":
				dports = append(dports, v)
			}
		}
		if len(srcs) < 2 || len(dsts) < 2 || len(sports) < 2 || len(dports) < 2 {
			t.Fatalf("unexpected conntrack -L line: %q", line)
		}
		ap := func(a, p string) netip.AddrPort {
			port, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				t.Fatalf("port %q in %q", p, line)
			}
			return netip.AddrPortFrom(netip.MustParseAddr(a), uint16(port))
		}
		e.origSrc = ap(srcs[0], sports[0])
		e.origDst = ap(dsts[0], dports[0])
		e.replySrc = ap(srcs[1], sports[1])
		entries = append(entries, e)
	}
	return entries
}
