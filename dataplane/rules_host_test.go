//go:build hosttest

package dataplane

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The rules judged by real packets between namespaces on the host kernel,
// which has no IPVS: the node's own listeners stand in for virtual servers.
// This checks the set matches' dimensions and the mark and masquerade
// plumbing; the VM tests check the rules together with IPVS.
func TestRulesOnRealTraffic(t *testing.T) {
	testutil.RequireProgram(t, "ipset")
	node, client, backend := testutil.NewNetNS(t), testutil.NewNetNS(t), testutil.NewNetNS(t)
	node.Link(t, "n-c", client, "c0", "192.0.2.1/24", "192.0.2.2/24")
	node.Link(t, "n-b", backend, "b0", "10.10.0.1/24", "10.10.0.2/24")
	node.IP(t, "addr", "add", "198.51.100.1/24", "dev", "n-c")
	node.IP(t, "addr", "add", "203.0.113.10/32", "dev", "lo")
	client.IP(t, "addr", "add", "198.51.100.2/24", "dev", "c0")
	if err := node.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644) }); err != nil {
		t.Fatal(err)
	}

	writeRulesInNetNS(t, node, [][2]string{
		{model.SetLoadBalancer, "203.0.113.10,tcp:80"},
		{model.SetLoadBalancerFW, "203.0.113.10,tcp:80"},
		{model.SetLoadBalancerSourceNet, "203.0.113.10,tcp:80,198.51.100.0/24"},
		{model.SetIPVSAddresses, "203.0.113.10"},
		{model.SetClusterIP, "10.10.0.2,tcp:8080"},
	})

	node.ServeTCP(t, "203.0.113.10:80", "lb")
	node.ServeTCP(t, "203.0.113.10:81", "host-port")
	backend.ServeTCP(t, "10.10.0.2:8080", "service")
	backend.ServeTCP(t, "10.10.0.2:8081", "other")

	const wait = 2 * time.Second
	tests := []struct {
		name, from, to string
		want           string // the reply's beginning; "" for a dropped connection
		refused        bool
	}{
		{"source range allows", "198.51.100.2", "203.0.113.10:80", "lb 198.51.100.2:", false},
		{"source range drops", "192.0.2.2", "203.0.113.10:80", "", false},
		{"host port behind a VIP is rejected", "192.0.2.2", "203.0.113.10:81", "", true},
		{"service traffic from outside the cluster is masqueraded", "192.0.2.2", "10.10.0.2:8080", "service 10.10.0.1:", false},
		{"other traffic keeps its source", "192.0.2.2", "10.10.0.2:8081", "other 192.0.2.2:", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply, err := client.DialTCP(tt.from, tt.to, wait)
			switch {
			case tt.refused:
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("got %q, %v; want connection refused", reply, err)
				}
			case tt.want == "":
				if !testutil.IsTimeout(err) {
					t.Errorf("got %q, %v; want the connection dropped", reply, err)
				}
			case err != nil || !strings.HasPrefix(reply, tt.want):
				t.Errorf("got %q, %v; want %q...", reply, err, tt.want)
			}
		})
	}
}
