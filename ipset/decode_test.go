package ipset

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

// TestDecodeListCaptures decodes the kernel's list replies captured from
// ipset(8) and compares them with what ipset list printed.
func TestDecodeListCaptures(t *testing.T) {
	tests := []struct {
		capture string
		header  string // the save "create" line, without bucketsize/initval
		entries []string
	}{
		{"list_kube", "create kube hash:ip,port family inet hashsize 1024 maxelem 65536", []string{"10.0.0.1,tcp:80"}},
		{"list_n", "create n hash:net family inet hashsize 1024 maxelem 65536 comment", []string{`10.0.0.0/8 comment "hi"`, "10.0.0.1"}},
		{"list_b", "create b bitmap:port range 0-1000 timeout 100 counters comment", []string{
			"80 timeout 60 packets 0 bytes 0", `81 timeout 0 packets 0 bytes 0 comment "x"`}},
		{"list_ipn", "create ipn hash:ip,port,net family inet6 hashsize 1024 maxelem 65536", []string{"fd00::1,udp:53,fd00::/64"}},
		{"list_ipp", "create ipp hash:ip,port,ip family inet hashsize 1024 maxelem 65536", []string{"10.0.0.2,tcp:8080,10.0.0.2"}},
		{"list_np", "create np hash:net,port family inet hashsize 1024 maxelem 65536", []string{"10.1.0.0/16,sctp:9"}},
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			sets, err := decodeList(repliesTo(t, tt.capture, cmdList))
			if err != nil {
				t.Fatal(err)
			}
			if len(sets) != 1 {
				t.Fatalf("%d sets, want 1", len(sets))
			}
			h := sets[0].header
			line, _, _ := strings.Cut(h.String(), " bucketsize")
			if line != tt.header {
				t.Errorf("header\n got %s\nwant %s", line, tt.header)
			}
			if h.Revision == 0 || h.MemSize == 0 || int(h.Entries) != len(tt.entries) {
				t.Errorf("header counts: revision %d, memsize %d, entries %d", h.Revision, h.MemSize, h.Entries)
			}
			var got []string
			for _, e := range sets[0].entries {
				// A counting-down timeout differs run to run.
				if e.Timeout > 0 {
					e.Timeout = time.Minute
				}
				got = append(got, e.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.entries) {
				t.Errorf("entries\n got %q\nwant %q", got, tt.entries)
			}
		})
	}
}

func TestDecodeListNamesAndHeader(t *testing.T) {
	sets, err := decodeList(repliesTo(t, "list_names", cmdList))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sets {
		names = append(names, s.header.Name)
	}
	if want := []string{"kube", "b", "h6", "n", "ipn", "ipp", "np", "a", "x"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	sets, err = decodeList(repliesTo(t, "list_header", cmdList))
	if err != nil {
		t.Fatal(err)
	}
	h := sets[0].header
	if h.Name != "kube" || h.Type != HashIPPort || h.Family != inet.IPv4 || h.Entries != 1 || h.BucketSize != 12 || h.InitVal == 0 || len(sets[0].entries) != 0 {
		t.Errorf("header %+v, entries %v", h, sets[0].entries)
	}
}

func TestDecodeHeaderCommand(t *testing.T) {
	sets, err := decodeList(repliesTo(t, "add_ip_port", cmdHeader))
	if err != nil || len(sets) != 1 {
		t.Fatalf("%d sets, %v", len(sets), err)
	}
	h := sets[0].header
	if h.Name != "kube" || h.Type != HashIPPort || h.Family != inet.IPv4 || h.Revision != 7 {
		t.Errorf("header %+v", h)
	}
}

func TestDecodeReplies(t *testing.T) {
	proto, minimum, err := decodeProtocol(repliesTo(t, "add_ip_port", cmdProtocol))
	if err != nil || proto != 7 || minimum != 6 {
		t.Errorf("decodeProtocol = %d, %d, %v; want 7, 6", proto, minimum, err)
	}
	rev, err := decodeType(repliesTo(t, "create_hash_ip_port", cmdType))
	if err != nil || rev != 7 {
		t.Errorf("decodeType = %d, %v; want 7", rev, err)
	}
	if _, err := decodeType(nil); err == nil {
		t.Error("decodeType of no reply succeeded")
	}
}

// TestDecodeLineNo reads the entry number out of the error the kernel sent
// ipset restore for its second line, an entry already in the set.
func TestDecodeLineNo(t *testing.T) {
	replies := repliesTo(t, "restore_duplicate", cmdAdd)
	if len(replies) != 1 {
		t.Fatalf("%d replies", len(replies))
	}
	payload := replies[0].Data
	if code := int32(binary.NativeEndian.Uint32(payload)); code != -errExist {
		t.Fatalf("error code %d, want %d", code, -errExist)
	}
	if n, ok := decodeLineNo(payload[4:]); !ok || n != 2 {
		t.Errorf("decodeLineNo = %d, %v; want 2", n, ok)
	}
	if _, ok := decodeLineNo(payload[:10]); ok {
		t.Error("decodeLineNo of a short payload succeeded")
	}
}
