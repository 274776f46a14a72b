//go:build hosttest

package randomcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// storedAs gives the cluster's Services the addresses an API server
// would: a cluster IP per family and node ports, for Rules to resolve.
func storedAs(c *Cluster) func(string) *corev1.Service {
	out := map[string]*corev1.Service{}
	for i, s := range c.Services {
		svc := s.Service.DeepCopy()
		svc.Namespace = "kp-diff"
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			svc.Spec.ClusterIPs = []string{fmt.Sprintf("10.96.0.%d", 10+i), fmt.Sprintf("fd00:10:96::%x", 10+i)}
		}
		for j := range svc.Spec.Ports {
			svc.Spec.Ports[j].NodePort = int32(30000 + 3*i + j)
		}
		out[svc.Name] = svc
	}
	return func(name string) *corev1.Service { return out[name] }
}

// TestNeighbourRulesLoad: the rules of many seeds' neighbours load into
// a fresh namespace with the programs the neighbours use
// (iptables-nft-restore, nft), with the leftovers' jumps first.
func TestNeighbourRulesLoad(t *testing.T) {
	for _, p := range []string{"iptables-nft-restore", "ip6tables-nft-restore", "iptables-nft-save", "nft"} {
		testutil.RequireProgram(t, p)
	}
	dir := t.TempDir()
	for seed := range uint64(8) {
		c := withNeighbours(seed, 40)
		rules := c.Neighbours.Rules(c.Env, storedAs(c))
		ns := testutil.NewNetNS(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for f, restore := range map[corev1.IPFamily]string{corev1.IPv4Protocol: "iptables-nft-restore", corev1.IPv6Protocol: "ip6tables-nft-restore"} {
			file := filepath.Join(dir, fmt.Sprintf("%d-%s", seed, f))
			if err := os.WriteFile(file, []byte(rules.IPTables[f]), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ns.Output(ctx, restore, "--noflush", file); err != nil {
				t.Errorf("seed %d: %v\n%s", seed, err, rules.IPTables[f])
			}
		}
		file := filepath.Join(dir, fmt.Sprintf("%d.nft", seed))
		if err := os.WriteFile(file, []byte(rules.NFT), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Output(ctx, "nft", "-f", file); err != nil {
			t.Errorf("seed %d: %v\n%s", seed, err, rules.NFT)
		}
		saved, err := ns.Output(ctx, "iptables-nft-save", "-t", "nat")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var pre []string
		for _, l := range strings.Split(saved, "\n") {
			if strings.HasPrefix(l, "-A PREROUTING ") {
				pre = append(pre, l)
			}
		}
		if strings.Contains(saved, "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") && !strings.HasSuffix(pre[0], "-j KUBE-SERVICES") {
			t.Errorf("seed %d: PREROUTING does not start with the leftovers' jump:\n%s", seed, strings.Join(pre, "\n"))
		}
	}
}
