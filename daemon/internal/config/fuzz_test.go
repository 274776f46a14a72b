package config

import (
	"net/netip"
	"os"
	"testing"
)

// FuzzParseConfig feeds arbitrary KubeProxyConfiguration files to the
// parser and what it accepts to Resolve: nothing may panic, and settings
// that Resolve accepts must be accepted by the dataplane.
func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile("testdata/kube-proxy-config.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nclusterCIDR: 10.244.0.0/16\nipvs:\n  scheduler: rr\n  excludeCIDRs: [10.0.0.0/8]\n  syncPeriod: 5s\niptables:\n  masqueradeBit: 14\nnodePortAddresses: [192.168.0.0/24]\n"))
	f.Add([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\ndetectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: veth\niptables:\n  masqueradeBit: 40\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := parse("config.yaml", data)
		if err != nil {
			return
		}
		s, err := Resolve(&cfg.KubeProxyConfiguration, "node-a", []netip.Addr{netip.MustParseAddr("192.168.0.1")})
		if err != nil {
			return
		}
		if err := s.Node.Validate(); err != nil {
			t.Fatalf("settings resolve accepted are rejected by the dataplane: %v", err)
		}
	})
}
