package ipset

import (
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

func TestParseSave(t *testing.T) {
	in := `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x7cb9f396
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
# a comment line

create KUBE-NODE-PORT-TCP bitmap:port range 30000-32767 timeout 100 counters comment
add KUBE-NODE-PORT-TCP 30080 timeout 0 packets 0 bytes 0 comment "svc"
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
`
	sets, err := ParseSave(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 {
		t.Fatalf("%d sets", len(sets))
	}
	want0 := Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, Family: inet.IPv4, HashSize: 1024, MaxElem: 65536}
	if sets[0].Set != want0 || len(sets[0].Entries) != 2 || sets[0].Entries[1].String() != "10.96.0.10,udp:53" {
		t.Errorf("first set %+v", sets[0])
	}
	want1 := Set{Name: "KUBE-NODE-PORT-TCP", Type: BitmapPort, PortFrom: 30000, PortTo: 32767, Timeout: 100 * time.Second, Counters: true, Comment: true}
	if sets[1].Set != want1 || len(sets[1].Entries) != 1 || sets[1].Entries[0].String() != `30080 timeout 0 packets 0 bytes 0 comment "svc"` {
		t.Errorf("second set %+v", sets[1])
	}

	var out strings.Builder
	h := Header{Set: sets[1].Set}
	if err := WriteSave(&out, h, sets[1].Entries); err != nil {
		t.Fatal(err)
	}
	want := "create KUBE-NODE-PORT-TCP bitmap:port range 30000-32767 timeout 100 counters comment\n" +
		`add KUBE-NODE-PORT-TCP 30080 timeout 0 packets 0 bytes 0 comment "svc"` + "\n"
	if out.String() != want {
		t.Errorf("WriteSave:\n%s\nwant\n%s", out.String(), want)
	}
}

func TestParseSaveErrors(t *testing.T) {
	tests := map[string]string{
		"add before create":  "add s 10.0.0.1\n",
		"unknown command":    "flush s\n",
		"unknown type":       "create s list:set\n",
		"unknown option":     "create s hash:ip bogus 1\n",
		"missing value":      "create s hash:ip hashsize\n",
		"bad family":         "create s hash:ip family ipx\n",
		"bad range":          "create s bitmap:port range 10\n",
		"created twice":      "create s hash:ip\ncreate s hash:ip\n",
		"bad entry":          "create s hash:ip\nadd s 10.0.0.0/8\n",
		"name too long":      "create " + strings.Repeat("x", 32) + " hash:ip\n",
		"hashsize on bitmap": "create s bitmap:port range 1-2 hashsize 64\n",
	}
	for name, in := range tests {
		if _, err := ParseSave(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "ipset: line ") {
			t.Errorf("%s: error %q names no line", name, err)
		}
	}
}

// A header says bucketsize and initval only when the kernel reported them,
// as ipset save does; Linux 5.10 reports neither.
func TestHeaderBucketSizeOnlyWhenReported(t *testing.T) {
	set := Set{Name: "s", Type: HashIP, Family: inet.IPv4, HashSize: 1024, MaxElem: 65536}
	for _, tt := range []struct {
		h    Header
		want string
	}{
		{Header{Set: set}, "create s hash:ip family inet hashsize 1024 maxelem 65536"},
		{Header{Set: set, BucketSize: 12, InitVal: 0x7cb9f396}, "create s hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x7cb9f396"},
	} {
		if got := tt.h.String(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
