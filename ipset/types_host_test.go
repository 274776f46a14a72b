//go:build hosttest || vmtest

package ipset

import (
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// TestHostEveryType creates a set of every type and family with options,
// adds entries one at a time and in bulk, and checks them against ipset
// save.
func TestHostEveryType(t *testing.T) {
	tests := []struct {
		set     Set
		entries []string
	}{
		{Set{Type: HashIP, Family: inet.IPv4}, []string{"10.0.0.1", "192.168.1.1"}},
		{Set{Type: HashIP, Family: inet.IPv6, HashSize: 64, MaxElem: 100}, []string{"fd00::1", "2001:db8::5"}},
		{Set{Type: HashIPPort, Family: inet.IPv4}, []string{"10.96.0.1,tcp:80", "10.96.0.1,udp:53", "10.96.0.2,sctp:9", "10.96.0.3,udplite:7"}},
		{Set{Type: HashIPPort, Family: inet.IPv6}, []string{"fd00::1,tcp:443", "fd00::2,udp:53"}},
		{Set{Type: HashIPPortIP, Family: inet.IPv4}, []string{"10.0.0.2,tcp:8080,10.0.0.2", "10.0.0.3,udp:53,10.0.0.4"}},
		{Set{Type: HashIPPortIP, Family: inet.IPv6}, []string{"fd00::2,tcp:8080,fd00::2"}},
		{Set{Type: HashIPPortNet, Family: inet.IPv4}, []string{"1.2.3.4,tcp:443,10.0.0.0/8", "1.2.3.4,tcp:443,10.1.2.3"}},
		{Set{Type: HashIPPortNet, Family: inet.IPv6}, []string{"fd00::1,udp:53,fd00::/64"}},
		{Set{Type: HashNet, Family: inet.IPv4}, []string{"10.0.0.0/8", "10.0.0.1", "192.168.0.0/24"}},
		{Set{Type: HashNet, Family: inet.IPv6}, []string{"fd00::/8", "2001:db8::1"}},
		{Set{Type: HashNetPort, Family: inet.IPv4}, []string{"10.1.0.0/16,sctp:9", "10.2.0.1,tcp:80"}},
		{Set{Type: HashNetPort, Family: inet.IPv6}, []string{"fd00::/64,tcp:80"}},
		{Set{Type: BitmapPort, PortFrom: 0, PortTo: 1000}, []string{"0", "80", "1000"}},
		{Set{Type: HashIP, Family: inet.IPv4, Comment: true, Counters: true}, []string{
			`10.0.0.1 packets 0 bytes 0 comment "kube-system/dns"`, "10.0.0.2 packets 5 bytes 300"}},
		{Set{Type: HashIPPort, Family: inet.IPv4, Timeout: time.Hour}, []string{"10.0.0.1,tcp:80 timeout 0"}},
		{Set{Type: BitmapPort, PortFrom: 30000, PortTo: 32767, Timeout: 100 * time.Second, Counters: true, Comment: true}, []string{
			`30000 timeout 0 packets 0 bytes 0 comment "np"`}},
	}
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	for i, tt := range tests {
		s := tt.set
		s.Name = "s" + string(rune('a'+i))
		t.Run(string(s.Type)+"/"+s.family().String(), func(t *testing.T) {
			if err := c.Create(ctx, s, Exclusive); err != nil {
				t.Fatal(err)
			}
			crossCheck(t, ns, c, s.Name, nil)
			var entries []Entry
			for _, line := range tt.entries {
				e, err := ParseEntry(s.Type, line)
				if err != nil {
					t.Fatal(err)
				}
				entries = append(entries, e)
			}
			if err := c.Add(ctx, s.Name, entries[0], Exclusive); err != nil {
				t.Fatal(err)
			}
			crossCheck(t, ns, c, s.Name, tt.entries[:1])
			if err := c.AddEntries(ctx, s.Name, entries, ExistOK); err != nil {
				t.Fatal(err)
			}
			crossCheck(t, ns, c, s.Name, tt.entries)
			for _, e := range entries {
				if ok, err := c.Test(ctx, s.Name, e); err != nil || !ok {
					t.Errorf("Test(%s) = %v, %v", e, ok, err)
				}
			}
			if err := c.Delete(ctx, s.Name, entries[0], Exclusive); err != nil {
				t.Fatal(err)
			}
			crossCheck(t, ns, c, s.Name, tt.entries[1:])
			if err := c.DeleteEntries(ctx, s.Name, entries, ExistOK); err != nil {
				t.Fatal(err)
			}
			crossCheck(t, ns, c, s.Name, nil)
		})
	}
}
