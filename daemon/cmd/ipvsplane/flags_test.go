package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/spf13/pflag"
)

// kubeProxyFlags is every flag of kube-proxy v1.37 (cmd/kube-proxy/app
// options.go with its logging flags), each with a value an operator might
// give it.
var kubeProxyFlags = []string{
	"--bind-address=10.0.0.5", "--bind-address-hard-fail", "--cluster-cidr=10.244.0.0/16",
	"--config-sync-period=10m", "--conntrack-max-per-core=0", "--conntrack-min=262144",
	"--conntrack-tcp-be-liberal", "--conntrack-tcp-timeout-close-wait=2h",
	"--conntrack-tcp-timeout-established=12h", "--conntrack-udp-timeout=30s",
	"--conntrack-udp-timeout-stream=2m", "--detect-local-mode=ClusterCIDR",
	"--feature-gates=SomeGate=true,OtherGate=false", "--healthz-bind-address=0.0.0.0",
	"--healthz-port=10266", "--hostname-override=node-a", "--iptables-localhost-nodeports=false",
	"--iptables-masquerade-bit=13", "--iptables-min-sync-period=1s", "--iptables-sync-period=30s",
	"--ipvs-exclude-cidrs=10.0.0.0/24", "--ipvs-min-sync-period=1s", "--ipvs-scheduler=wrr",
	"--ipvs-strict-arp", "--ipvs-sync-period=45s", "--ipvs-tcp-timeout=10m",
	"--ipvs-tcpfin-timeout=30s", "--ipvs-udp-timeout=20s", "--kube-api-burst=20",
	"--kube-api-content-type=application/json", "--kube-api-qps=10", "--kubeconfig=/var/lib/kube-proxy/kubeconfig.conf",
	"--master=https://127.0.0.1:6443", "--masquerade-all", "--metrics-bind-address=127.0.0.1",
	"--metrics-port=10259", "--nodeport-addresses=192.168.0.0/16", "--oom-score-adj=-999",
	"--pod-bridge-interface=cbr0", "--pod-interface-name-prefix=veth", "--profiling",
	"--proxy-mode=ipvs", "--show-hidden-metrics-for-version=1.36",
	"--v=2", "-v=4", "--vmodule=proxier=5", "--logging-format=text", "--log-flush-frequency=5s",
	"--log-text-split-stream", "--log-text-info-buffer-size=1Ki", "--log-json-split-stream",
	"--log-json-info-buffer-size=1Ki", "--boot-id-file=/proc/sys/kernel/random/boot_id",
	"--machine-id-file=/etc/machine-id",
}

// Every kube-proxy flag is accepted; those that apply reach the
// configuration, the others are logged once as ignored.
func TestEveryKubeProxyFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "config.yaml")
	a, stdout, stderr := testApp(newNode(t), nil)
	args := append([]string{"run", "--write-config-to", out}, kubeProxyFlags...)
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	cfg, _, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Conntrack
	checks := map[string]bool{
		"conntrack-max-per-core":            *c.MaxPerCore == 0,
		"conntrack-min":                     *c.Min == 262144,
		"conntrack-tcp-be-liberal":          c.TCPBeLiberal,
		"conntrack-tcp-timeout-close-wait":  c.TCPCloseWaitTimeout.Duration.Hours() == 2,
		"conntrack-tcp-timeout-established": c.TCPEstablishedTimeout.Duration.Hours() == 12,
		"conntrack-udp-timeout":             c.UDPTimeout.Duration.Seconds() == 30,
		"conntrack-udp-timeout-stream":      c.UDPStreamTimeout.Duration.Minutes() == 2,
		"healthz-port":                      cfg.HealthzBindAddress == "0.0.0.0:10266",
		"metrics-port":                      cfg.MetricsBindAddress == "127.0.0.1:10259",
		"profiling":                         cfg.EnableProfiling,
		"ipvs-scheduler":                    cfg.IPVS.Scheduler == "wrr",
		"iptables-masquerade-bit":           *cfg.IPTables.MasqueradeBit == 13,
		"kube-api-qps":                      cfg.ClientConnection.QPS == 10,
	}
	for flag, ok := range checks {
		if !ok {
			t.Errorf("--%s did not reach the configuration:\n%+v", flag, cfg)
		}
	}
	logs := stderr.String()
	for _, f := range ignoredFlags {
		if strings.Count(logs, `"--`+f.name+`=`) != 1 {
			t.Errorf("--%s is not logged once as ignored:\n%s", f.name, logs)
		}
	}
}

// The arguments of kubeadm's kube-proxy DaemonSet (and the --v=2 many
// add) with its ConfigMap's config.conf.
func TestKubeadmDaemonSetArgs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "written.yaml")
	a, stdout, stderr := testApp(newNode(t), nil)
	args := []string{"--config=testdata/kube-proxy-config.yaml", "--hostname-override=node-a", "--v=2", "--write-config-to=" + out}
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	cfg, _, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostnameOverride != "node-a" || cfg.Mode != "ipvs" || cfg.IPVS.Scheduler != "wrr" || *cfg.Conntrack.MaxPerCore != 32768 {
		t.Errorf("configuration: %+v", cfg)
	}
}

// A bind address without a port gets one, as kube-proxy's flags and
// defaulting give it (AppendPortIfNeeded): --healthz-port and
// --metrics-port complete a bare IP, 0 turns the server off, and an
// address with a port keeps it.
func TestBindAddressPorts(t *testing.T) {
	tests := []struct {
		args             []string
		healthz, metrics string
	}{
		{nil, "0.0.0.0:10256", "127.0.0.1:10249"},
		{[]string{"--metrics-bind-address=0.0.0.0", "--healthz-bind-address=0.0.0.0"}, "0.0.0.0:10256", "0.0.0.0:10249"},
		{[]string{"--metrics-bind-address=::", "--healthz-bind-address=::1"}, "[::1]:10256", "[::]:10249"},
		{[]string{"--metrics-bind-address=0.0.0.0", "--metrics-port=9000"}, "0.0.0.0:10256", "0.0.0.0:9000"},
		{[]string{"--metrics-bind-address=0.0.0.0:10249", "--metrics-port=9000"}, "0.0.0.0:10256", "0.0.0.0:10249"},
		{[]string{"--healthz-port=0"}, "", "127.0.0.1:10249"},
		{[]string{"--config=testdata/lenient/kops-style.yaml"}, "0.0.0.0:10256", "0.0.0.0:10249"},
		{[]string{"--config=testdata/lenient/kops-style.yaml", "--metrics-bind-address=10.0.0.1"}, "0.0.0.0:10256", "10.0.0.1:10249"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := newOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if _, err := o.load(fs); err != nil {
				t.Fatal(err)
			}
			if o.kp.HealthzBindAddress != tt.healthz || o.kp.MetricsBindAddress != tt.metrics {
				t.Errorf("got %q, %q; want %q, %q", o.kp.HealthzBindAddress, o.kp.MetricsBindAddress, tt.healthz, tt.metrics)
			}
		})
	}
}
