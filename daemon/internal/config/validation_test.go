package config

import (
	"strings"
	"testing"
)

// What kube-proxy's validation refuses is refused, with its message
// naming the field by its internal type's path.
func TestValidateKubeProxy(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	tests := []struct{ body, want string }{
		{"detectLocalMode: Bogus\n", `KubeProxyConfiguration.DetectLocalMode: Unsupported value: "Bogus": supported values: "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""`},
		{"detectLocalMode: BridgeInterface\n", `KubeProxyConfiguration.DetectLocalConfiguration.InterfaceName: Invalid value: "": must not be empty`},
		{"detectLocalMode: InterfaceNamePrefix\n", `KubeProxyConfiguration.DetectLocalConfiguration.InterfacePrefix: Invalid value: "": must not be empty`},
		{"clusterCIDR: 10.0.0.0/8,10.1.0.0/16\n", "KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value"},
		{"clusterCIDR: 10.0.0.0/8,nonsense\n", `KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs[1]: Invalid value: "nonsense": must be a valid CIDR block`},
		{"iptables: {masqueradeBit: 32}\n", "KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value: 32: must be within the range [0, 31]"},
		{"ipvs: {tcpTimeout: -1s}\n", `KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPTimeout: Invalid value: "-1s": must be greater than or equal to 0`},
		{"ipvs: {excludeCIDRs: [10.0.0.0/33]}\n", `KubeProxyConfiguration.KubeProxyIPVSConfiguration.ExcludeCidrs[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR`},
		{"ipvs: {syncPeriod: 10s, minSyncPeriod: 20s}\n", "KubeProxyConfiguration.SyncPeriod: Invalid value: \"20s\": must be greater than or equal to KubeProxyConfiguration.MinSyncPeriod"},
		{"conntrack: {maxPerCore: -1}\n", "KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.MaxPerCore: Invalid value: -1: must be greater than or equal to 0"},
		{"conntrack: {udpTimeout: -5s}\n", "KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPTimeout: Invalid value"},
		{"oomScoreAdj: 1001\n", "KubeProxyConfiguration.KubeProxyLinuxConfiguration.OOMScoreAdj: Invalid value: 1001: must be within the range [-1000, 1000]"},
		{"mode: userspace\n", `KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "userspace": must be iptables, ipvs, nftables or blank`},
		{"healthzBindAddress: localhost:10256\n", `KubeProxyConfiguration.HealthzBindAddress: Invalid value: "localhost": must be a valid IP`},
		{"metricsBindAddress: 127.0.0.1:99999\n", `KubeProxyConfiguration.MetricsBindAddress: Invalid value: "99999": must be a valid port`},
		{"bindAddress: nowhere\n", `KubeProxyConfiguration.BindAddress: Invalid value: "nowhere": not a valid textual representation of an IP address`},
		{"nodePortAddresses: [primary, primary]\n", `KubeProxyConfiguration.NodePortAddresses[1]: Duplicate value: "primary"`},
		{"nodePortAddresses: [eth0]\n", `KubeProxyConfiguration.NodePortAddresses[0]: Invalid value: "eth0": must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'`},
		{"clientConnection: {burst: -1}\n", "KubeProxyConfiguration.ClientConnection.Burst: Invalid value: -1: must be greater than or equal to 0"},
		{"logging: {format: xml}\n", `KubeProxyConfiguration.logging.format: Invalid value: "xml": Unsupported log format`},
		// component-base's logging validation, which kube-proxy runs whole.
		{"logging: {flushFrequency: -1s}\n", `KubeProxyConfiguration.logging.flushFrequency: Invalid value: "-1s": Must be greater than zero`},
		{"logging: {verbosity: 2147483648}\n", `KubeProxyConfiguration.logging.verbosity: Invalid value: 2147483648: Must be <= 2147483647`},
		{"logging: {format: json, vmodule: [{filePattern: proxier.go, verbosity: 4}]}\n", `KubeProxyConfiguration.logging.vmodule: Forbidden: Only supported for text log format`},
		{"logging: {vmodule: [{filePattern: \"\", verbosity: 4}]}\n", `KubeProxyConfiguration.logging.vmodule[0]: Required value: File pattern must not be empty`},
		{"logging: {vmodule: [{filePattern: a=b, verbosity: 4}]}\n", `KubeProxyConfiguration.logging.vmodule[0]: Invalid value: "a=b": File pattern must not contain equal sign or comma`},
		{"logging: {vmodule: [{filePattern: a.go, verbosity: 2147483648}]}\n", `KubeProxyConfiguration.logging.vmodule[0]: Invalid value: 2147483648: Must be <= 2147483647`},
		{"logging: {options: {text: {splitStream: true}}}\n", `KubeProxyConfiguration.logging.options.text.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled`},
		{"logging: {options: {json: {infoBufferSize: 1Mi}}}\n", `KubeProxyConfiguration.logging.options.json.infoBufferSize: Forbidden: Feature LoggingAlphaOptions is disabled`},
		{"featureGates: {LoggingBetaOptions: false}\nlogging: {format: json}\n", `KubeProxyConfiguration.logging.format: Forbidden: Log format json is disabled, see LoggingBetaOptions feature`},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSpace(tt.body), func(t *testing.T) {
			cfg, _, err := parse("config.yaml", []byte(head+tt.body))
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(&cfg.KubeProxyConfiguration)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
	// What kube-proxy accepts, sloppy addresses included.
	for _, body := range []string{"", "clusterCIDR: 010.244.0.0/16,fd00::/48\n", "nodePortAddresses: [primary, 010.0.0.0/8]\ndetectLocalMode: NodeCIDR\n", "ipvs: {excludeCIDRs: [10.0.0.0/8]}\nmode: iptables\n",
		// v1.37 takes the keywords with CIDRs, each once.
		"nodePortAddresses: [all, localhost, primary, 10.0.0.0/8, fd00::/8]\n",
		// clusterCIDR is checked in ClusterCIDR mode alone.
		"clusterCIDR: pods\ndetectLocalMode: NodeCIDR\n",
		"logging: {format: json, options: {json: {infoBufferSize: 0}}}\n",
		"featureGates: {LoggingAlphaOptions: true}\nlogging: {options: {text: {splitStream: true, infoBufferSize: 1Mi}}}\n"} {
		cfg, _, err := parse("config.yaml", []byte(head+body))
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(&cfg.KubeProxyConfiguration); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}
