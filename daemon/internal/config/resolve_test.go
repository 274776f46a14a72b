package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

func TestResolve(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("192.168.0.1")}
	tests := []struct {
		name      string
		edit      func(kp *kubeproxy.KubeProxyConfiguration)
		node      func(n *model.Node)
		wantNotes []string
		wantErr   string
		// podCIDRsFromNode is expected with detectLocalMode NodeCIDR.
		podCIDRsFromNode bool
	}{
		{name: "defaults"},
		{
			name: "everything",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.HostnameOverride = " Node-A "
				kp.ClusterCIDR = "10.244.0.0/16, fd00:10:244::/56"
				kp.IPTables.MasqueradeAll = true
				kp.IPVS = kubeproxy.KubeProxyIPVSConfiguration{
					Scheduler: "wrr", StrictARP: true, ExcludeCIDRs: []string{"10.0.0.1/24"},
					SyncPeriod: metav1.Duration{Duration: time.Minute}, MinSyncPeriod: metav1.Duration{Duration: 2 * time.Second},
					TCPTimeout: metav1.Duration{Duration: time.Hour}, TCPFinTimeout: metav1.Duration{Duration: time.Minute}, UDPTimeout: metav1.Duration{Duration: 5 * time.Minute},
				}
				kp.NodePortAddresses = []string{"192.168.0.0/24"}
			},
			node: func(n *model.Node) {
				n.Name = "node-a"
				n.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}
				n.MasqueradeAll = true
				n.Scheduler, n.StrictARP = "wrr", true
				n.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
				n.TCPTimeout, n.TCPFinTimeout, n.UDPTimeout = time.Hour, time.Minute, 5*time.Minute
				n.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")}
			},
		},
		{
			// kube-proxy tells pods apart by the first range of each family.
			name: "cluster CIDRs, the first of each family",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "10.244.0.0/16,fd00:10:244::/56,10.245.0.0/16,fd00:10:245::/56"
			},
			node: func(n *model.Node) {
				n.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}
			},
		},
		{
			name: "interface prefix",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "10.244.0.0/16"
				kp.DetectLocalMode = "InterfaceNamePrefix"
				kp.DetectLocal.InterfaceNamePrefix = "veth"
			},
			node: func(n *model.Node) { n.PodInterfacePrefix = "veth" },
		},
		{
			name: "bridge",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.DetectLocalMode = "BridgeInterface"
				kp.DetectLocal.BridgeInterface = "cni0"
			},
			node: func(n *model.Node) { n.PodBridge = "cni0" },
		},
		{
			name: "all and keywords",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.NodePortAddresses = []string{"192.168.0.0/24", "all", "primary"}
				kp.Mode = "nftables"
			},
			wantNotes: []string{
				`mode: "nftables" is ignored; ipvsplane always programs IPVS`,
			},
		},
		{
			// kube-proxy turns "primary" into the node's IPs in every mode.
			name: "primary",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.NodePortAddresses = []string{"primary", "10.0.0.0/8"}
			},
			node: func(n *model.Node) {
				n.NodePortPrimary = true
				n.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			},
		},
		{
			name: "NodeCIDR",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "10.244.0.0/16"
				kp.DetectLocalMode = "NodeCIDR"
			},
			podCIDRsFromNode: true,
		},
		{
			// kube-proxy reads clusterCIDR in ClusterCIDR mode alone: in
			// another mode it is neither validated nor used.
			name: "NodeCIDR with a clusterCIDR that is not one",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "10.244.0.0"
				kp.DetectLocalMode = "NodeCIDR"
			},
			podCIDRsFromNode: true,
		},
		{
			name: "bridge with clusterCIDRs that are not",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "pods,10.0.0.0/8,fd00::/8"
				kp.DetectLocalMode = "BridgeInterface"
				kp.DetectLocal.BridgeInterface = "cni0"
			},
			node: func(n *model.Node) { n.PodBridge = "cni0" },
		},
		{
			// kube-proxy's bit 0 is mark 1, not its default.
			name: "masquerade bit 0",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) { *kp.IPTables.MasqueradeBit = 0 },
			node: func(n *model.Node) { n.MasqueradeMark = 1 },
		},
		{
			// kube-proxy parses CIDRs sloppily: leading zeros are decimal.
			name: "leading zeros",
			edit: func(kp *kubeproxy.KubeProxyConfiguration) {
				kp.ClusterCIDR = "010.244.0.0/16"
				kp.NodePortAddresses = []string{"010.000.0.0/8"}
			},
			node: func(n *model.Node) {
				n.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
				n.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			},
		},
		{name: "bad cidr", edit: func(kp *kubeproxy.KubeProxyConfiguration) { kp.ClusterCIDR = "10.244.0.0" }, wantErr: "clusterCIDR"},
		{name: "bad bit", edit: func(kp *kubeproxy.KubeProxyConfiguration) { *kp.IPTables.MasqueradeBit = 32 }, wantErr: "masqueradeBit"},
		{name: "unknown scheduler", edit: func(kp *kubeproxy.KubeProxyConfiguration) { kp.IPVS.Scheduler = "0" }, wantErr: "ipvs.scheduler"},
		{name: "negative timeout", edit: func(kp *kubeproxy.KubeProxyConfiguration) { kp.IPVS.UDPTimeout.Duration = -time.Second }, wantErr: "ipvs.timeouts"},
		{name: "prefix without name", edit: func(kp *kubeproxy.KubeProxyConfiguration) { kp.DetectLocalMode = "InterfaceNamePrefix" }, wantErr: "interfaceNamePrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp := Default()
			if tt.edit != nil {
				tt.edit(kp)
			}
			s, err := Resolve(kp, "Host-1", addrs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := model.Node{Name: "host-1", Addresses: addrs, MasqueradeMark: 1 << 14}
			if tt.node != nil {
				tt.node(&want)
			}
			if diff := cmp.Diff(want, s.Node, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			if s.PodCIDRsFromNode != tt.podCIDRsFromNode {
				t.Errorf("podCIDRsFromNode %v, want %v", s.PodCIDRsFromNode, tt.podCIDRsFromNode)
			}
			if diff := cmp.Diff(tt.wantNotes, s.Notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

// The ipvsplane section's guards reach the node: the external-IP ranges,
// the protected ports with the daemon's own servers' ports, the allowed
// schedulers; a bad entry names its field and flag.
func TestResolveOwn(t *testing.T) {
	tcp := func(p uint16) model.ProtectedPort { return model.ProtectedPort{Protocol: inet.TCP, Port: p} }
	tests := []struct {
		name    string
		edit    func(o *Own, kp *kubeproxy.KubeProxyConfiguration)
		want    func(n *model.Node)
		wantErr string
	}{
		{
			name: "defaults",
			want: func(n *model.Node) { n.ProtectedPorts = []model.ProtectedPort{tcp(10250), tcp(10256), tcp(10249)} },
		},
		{
			name: "everything",
			edit: func(o *Own, kp *kubeproxy.KubeProxyConfiguration) {
				o.ExternalIPRanges = []string{"203.0.113.0/24", " 2001:db8::/64"}
				o.ProtectedPorts = []string{"10250/tcp", "8472/udp", "9100", "10256/TCP"}
				o.AllowedSchedulers = []string{"rr", " mh"}
				kp.MetricsBindAddress = ""
			},
			want: func(n *model.Node) {
				n.ExternalIPRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/64")}
				n.ProtectedPorts = []model.ProtectedPort{tcp(10250), {Protocol: inet.UDP, Port: 8472}, tcp(9100), tcp(10256)}
				n.AllowedSchedulers = []string{"rr", "mh"}
			},
		},
		{
			name: "none protected but the daemon's",
			edit: func(o *Own, kp *kubeproxy.KubeProxyConfiguration) {
				o.ProtectedPorts = []string{}
				kp.HealthzBindAddress = "0.0.0.0:12345"
			},
			want: func(n *model.Node) { n.ProtectedPorts = []model.ProtectedPort{tcp(12345), tcp(10249)} },
		},
		{name: "bad range", edit: func(o *Own, _ *kubeproxy.KubeProxyConfiguration) { o.ExternalIPRanges = []string{"203.0.113.0"} }, wantErr: "--external-ip-ranges"},
		{name: "bad protocol", edit: func(o *Own, _ *kubeproxy.KubeProxyConfiguration) { o.ProtectedPorts = []string{"1/icmp"} }, wantErr: `--protected-ports): "1/icmp"`},
		{name: "port 0", edit: func(o *Own, _ *kubeproxy.KubeProxyConfiguration) { o.ProtectedPorts = []string{"0/tcp"} }, wantErr: "1-65535"},
		{name: "unknown scheduler", edit: func(o *Own, _ *kubeproxy.KubeProxyConfiguration) { o.AllowedSchedulers = []string{"fastest"} }, wantErr: `--allowed-schedulers): "fastest"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, own := Default(), DefaultOwn()
			if tt.edit != nil {
				tt.edit(&own, kp)
			}
			s, err := Resolve(kp, "node-a", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.ResolveOwn(own)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want model.Node
			tt.want(&want)
			got := model.Node{ExternalIPRanges: s.Node.ExternalIPRanges, ProtectedPorts: s.Node.ProtectedPorts, AllowedSchedulers: s.Node.AllowedSchedulers}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
		})
	}
}
