//go:build vmtest

package e2e

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// slirpDNS is qemu's DNS server in the guest's user network, which would
// pass queries on to the host's resolver.
const slirpDNS = "10.0.2.3:53"

// TestGuestNetworkIsContained shows that test traffic stays inside the
// machine: the guest reaches the host's API server and daemon/internal/testing/vmtest's
// request server through their forwards, and nothing else. The host
// targets are daemon/internal/testing/vmtest's own listeners on the host's loopback (the
// guest's gateway 10.0.2.2) and on the host's own addresses, which would
// answer a TCP connection and echo a UDP datagram if reached; a DNS query
// to qemu's resolver gets no answer either.
func TestGuestNetworkIsContained(t *testing.T) {
	testutil.RequireVM(t)
	cp := controlplane.FromVM(t) // fetched the kubeconfig through the request server's forward
	cfg := cp.RESTConfig()
	client := kubernetes.NewForConfigOrDie(cfg)
	version, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("the API server at %s: %v", cfg.Host, err)
	}
	t.Logf("the API server at %s answers through the forward, certificate verified: %s", cfg.Host, version.GitVersion)

	env := os.Getenv(controlplane.HostTargetsEnv)
	testutil.Require(t, env != "", controlplane.HostTargetsEnv+" from daemon/internal/testing/vmtest")
	targets := strings.Split(env, ",")
	if len(targets) < 2 {
		t.Logf("daemon/internal/testing/vmtest found no address of the host's own; trying only %v", targets)
	}
	for _, target := range targets {
		t.Run("tcp "+target, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", target, 3*time.Second)
			if err == nil {
				reply := make([]byte, 64)
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				n, _ := c.Read(reply)
				c.Close()
				t.Fatalf("connected to the host's %s from the guest (it said %q)", target, reply[:n])
			}
			t.Logf("connection failed, as it must: %v", err)
		})
		t.Run("udp "+target, func(t *testing.T) {
			if reply, err := exchangeUDP(target, []byte("ipvsplane containment probe")); err == nil {
				t.Fatalf("the host's %s echoed %q to the guest", target, reply)
			} else {
				t.Logf("no answer, as it must be: %v", err)
			}
		})
	}
	t.Run("dns "+slirpDNS, func(t *testing.T) {
		if reply, err := exchangeUDP(slirpDNS, dnsQuery("containment-probe.invalid")); err == nil {
			t.Fatalf("qemu's DNS server answered the guest (%d bytes)", len(reply))
		} else {
			t.Logf("no answer, as it must be: %v", err)
		}
	})
}

// exchangeUDP sends one datagram to addr and waits 3 s for one back.
func exchangeUDP(addr string, msg []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := new(net.Dialer).DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	reply := make([]byte, 2048)
	n, err := c.Read(reply)
	if err != nil {
		return nil, err
	}
	return reply[:n], nil
}

// dnsQuery is a DNS query (RFC 1035) for name's A record, recursion
// desired.
func dnsQuery(name string) []byte {
	msg := binary.BigEndian.AppendUint16(nil, 0x1505) // ID
	msg = binary.BigEndian.AppendUint16(msg, 0x0100)  // flags: RD
	msg = binary.BigEndian.AppendUint16(msg, 1)       // QDCOUNT
	msg = append(msg, 0, 0, 0, 0, 0, 0)               // AN, NS, AR counts
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, 1) // QTYPE A
	msg = binary.BigEndian.AppendUint16(msg, 1) // QCLASS IN
	return msg
}
