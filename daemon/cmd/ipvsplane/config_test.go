package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/spf13/pflag"
)

// testdata/kube-proxy-config.yaml is a configuration as kubeadm writes it:
// empty values take the defaults, the IPVS settings apply, and the fields
// of other modes or of no use to ipvsplane are listed once.
func TestLoadKubeadmConfig(t *testing.T) {
	cfg, notes, err := loadConfig("testdata/kube-proxy-config.yaml")
	if err != nil || notes.lenient != nil {
		t.Fatal(err, notes.lenient)
	}
	ignored := notes.ignored
	if cfg.HealthzBindAddress != "0.0.0.0:10256" || cfg.MetricsBindAddress != "127.0.0.1:10249" {
		t.Errorf("empty bind addresses did not take the defaults: %q, %q", cfg.HealthzBindAddress, cfg.MetricsBindAddress)
	}
	if cfg.IPVS.SyncPeriod.Duration != 45*time.Second || cfg.IPVS.MinSyncPeriod.Duration != 2*time.Second || cfg.IPVS.Scheduler != "wrr" || !cfg.IPVS.StrictARP {
		t.Errorf("ipvs settings: %+v", cfg.IPVS)
	}
	if *cfg.IPTables.MasqueradeBit != 14 || cfg.ClientConnection.QPS != 5 {
		t.Errorf("defaults: masqueradeBit %d, qps %v", *cfg.IPTables.MasqueradeBit, cfg.ClientConnection.QPS)
	}
	// What kube-proxy's defaulting gives the fields ipvsplane does not
	// use, as /configz shows them (e2e's TestKubeProxyComparison compares
	// the two /configz).
	if !*cfg.IPTables.LocalhostNodePorts || *cfg.NFTables.MasqueradeBit != 14 || cfg.Logging.Format != "text" ||
		cfg.Logging.FlushFrequency.Duration.Duration != 5*time.Second || !cfg.Logging.FlushFrequency.SerializeAsString {
		t.Errorf("other modes' and logging defaults: localhostNodePorts %v, nftables.masqueradeBit %d, logging %+v",
			*cfg.IPTables.LocalhostNodePorts, *cfg.NFTables.MasqueradeBit, cfg.Logging)
	}
	want := []string{`bindAddress: "0.0.0.0"`, `oomScoreAdj: -999`}
	if diff := cmp.Diff(want, ignored); diff != "" {
		t.Errorf("ignored fields (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"wrong type", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs: {scheduler: [rr]}\n", "cannot unmarshal"},
		{"wrong type beside an unknown field", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nudpIdleTimeout: 1s\nipvs: {syncPeriod: often}\n", "often"},
		{"wrong kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", "want apiVersion"},
		{"not yaml", "apiVersion: [\n", "yaml"},
		{"unknown field of ipvsplane's section", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeOut: 1m}\n", `unknown field "ipvsplane.drainTimeOut"`},
		{"bad duration in ipvsplane's section", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeout: soon}\n", "ipvsplane"},
		{"ipvsplane's section twice", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {}\nipvsplane: {}\n", "already set"},
		{"a field of ipvsplane's section twice", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeout: 1m, drainTimeout: 2m}\n", "already defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := loadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A file that only strict decoding refuses (an unknown, removed or
// repeated field, a field in another case) is read leniently with a
// warning, as kube-proxy's loadConfig does.
func TestLoadConfigLenient(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	tests := []struct {
		name, body, warning string
		check               func(*configFile) bool
	}{
		{"unknown field", "ipvs: {schedular: rr, scheduler: wrr}\n", `unknown field "ipvs.schedular"`,
			func(c *configFile) bool { return c.IPVS.Scheduler == "wrr" }},
		{"field in another case", "Mode: iptables\n", `unknown field "Mode"`,
			func(c *configFile) bool { return c.Mode == "ipvs" }},
		{"field twice", "ipvs: {scheduler: rr, scheduler: wrr}\n", `key "scheduler" already set`,
			func(c *configFile) bool { return c.IPVS.Scheduler == "wrr" }},
		{"removed field beside ipvsplane's section", "resourceContainer: /kube-proxy\nipvsplane: {drainTimeout: 2m}\n", `unknown field "resourceContainer"`,
			func(c *configFile) bool { return c.IPVSPlane.DrainTimeout.Duration == 2*time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, notes, err := parseConfig("config.yaml", []byte(head+tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if notes.lenient == nil || !strings.Contains(notes.lenient.Error(), tt.warning) {
				t.Errorf("warning %v, want one with %q", notes.lenient, tt.warning)
			}
			if !tt.check(cfg) {
				t.Errorf("read as %+v", cfg)
			}
		})
	}
}

// Older installers' files, with fields since removed, load with a warning.
func TestLoadOlderConfigs(t *testing.T) {
	cfg, notes, err := loadConfig("testdata/lenient/kubeadm-1.13.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resourceContainer", "udpIdleTimeout", "conntrack.max"} {
		if notes.lenient == nil || !strings.Contains(notes.lenient.Error(), `unknown field "`+f+`"`) {
			t.Errorf("kubeadm 1.13: warning %v does not name %s", notes.lenient, f)
		}
	}
	if cfg.Mode != "ipvs" || cfg.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" || *cfg.Conntrack.Min != 131072 {
		t.Errorf("kubeadm 1.13: %+v", cfg)
	}

	cfg, notes, err = loadConfig("testdata/lenient/kops-style.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if notes.lenient == nil || !strings.Contains(notes.lenient.Error(), `unknown field "udpIdleTimeout"`) || !strings.Contains(notes.lenient.Error(), `key "scheduler" already set`) {
		t.Errorf("kops-style: warning %v", notes.lenient)
	}
	// kube-proxy's defaulting appends the port to a bare IP.
	if cfg.HealthzBindAddress != "0.0.0.0:10256" || cfg.MetricsBindAddress != "0.0.0.0:10249" {
		t.Errorf("kops-style: bind addresses %q, %q", cfg.HealthzBindAddress, cfg.MetricsBindAddress)
	}
	if cfg.IPVS.Scheduler != "lc" || cfg.HostnameOverride != "ip-172-20-40-10.ec2.internal" {
		t.Errorf("kops-style: %+v", cfg)
	}
	if !slices.Contains(notes.ignored, "featureGates.KubeProxyIPVS: true") {
		t.Errorf("kops-style: feature gates not noted as ignored: %v", notes.ignored)
	}
}

func TestIgnoredFieldsOfOtherModes(t *testing.T) {
	raw := map[string]any{
		"mode":         "iptables",
		"iptables":     map[string]any{"masqueradeAll": true, "syncPeriod": "10s", "localhostNodePorts": true},
		"nftables":     map[string]any{"syncPeriod": "0s"},
		"conntrack":    map[string]any{"maxPerCore": float64(32768)},
		"featureGates": map[string]any{"SomeGate": true},
		"ipvs":         map[string]any{"scheduler": "sh"},
	}
	want := []string{"featureGates.SomeGate: true", "iptables.localhostNodePorts: true", `iptables.syncPeriod: "10s"`}
	if diff := cmp.Diff(want, ignoredFields(raw)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Flags given on the command line override the file; the others keep the
// file's values.
func TestFlagsOverrideConfig(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, o *options)
	}{
		{"file only", []string{"--config=testdata/kube-proxy-config.yaml"}, func(t *testing.T, o *options) {
			if o.kp.IPVS.Scheduler != "wrr" || o.kp.IPVS.MinSyncPeriod.Duration != 2*time.Second {
				t.Errorf("got %+v", o.kp.IPVS)
			}
			if diff := cmp.Diff([]string{"10.0.0.0/24"}, o.kp.IPVS.ExcludeCIDRs); diff != "" {
				t.Error(diff)
			}
		}},
		{"flags win", []string{"--config=testdata/kube-proxy-config.yaml", "--ipvs-scheduler=lc", "--ipvs-min-sync-period=5s",
			"--ipvs-exclude-cidrs=192.0.2.0/24,198.51.100.0/24", "--iptables-masquerade-bit=15", "--hostname-override=Node-A"}, func(t *testing.T, o *options) {
			if o.kp.IPVS.Scheduler != "lc" || o.kp.IPVS.MinSyncPeriod.Duration != 5*time.Second || o.kp.IPVS.SyncPeriod.Duration != 45*time.Second {
				t.Errorf("got %+v", o.kp.IPVS)
			}
			if diff := cmp.Diff([]string{"192.0.2.0/24", "198.51.100.0/24"}, o.kp.IPVS.ExcludeCIDRs); diff != "" {
				t.Error(diff)
			}
			if *o.kp.IPTables.MasqueradeBit != 15 || o.kp.HostnameOverride != "Node-A" {
				t.Errorf("masqueradeBit %d, hostname %q", *o.kp.IPTables.MasqueradeBit, o.kp.HostnameOverride)
			}
		}},
		{"no file", []string{"--ipvs-sync-period=1m", "--source=files", "--manifests=/m"}, func(t *testing.T, o *options) {
			if o.kp.IPVS.SyncPeriod.Duration != time.Minute || o.kp.IPVS.MinSyncPeriod.Duration != 0 || o.manifests != "/m" {
				t.Errorf("got %+v", o.kp.IPVS)
			}
			if o.own.DrainTimeout.Duration != defaultDrainTimeout {
				t.Errorf("drain timeout %v, want the default %v", o.own.DrainTimeout.Duration, defaultDrainTimeout)
			}
			if o.binding() != dummy.BindAddresses {
				t.Errorf("binding %v, want kube-proxy's addresses", o.binding())
			}
		}},
		{"ipvsplane's section", []string{"--config=testdata/ipvsplane-config.yaml"}, func(t *testing.T, o *options) {
			if o.own.DrainTimeout.Duration != 5*time.Minute || o.kp.IPVS.Scheduler != "lc" {
				t.Errorf("drain timeout %v, scheduler %q", o.own.DrainTimeout.Duration, o.kp.IPVS.Scheduler)
			}
			if o.binding() != dummy.BindLocalRoutes {
				t.Errorf("binding %v, want the file's local-route", o.binding())
			}
		}},
		{"--service-address-binding wins", []string{"--config=testdata/ipvsplane-config.yaml", "--service-address-binding=address"}, func(t *testing.T, o *options) {
			if o.binding() != dummy.BindAddresses {
				t.Errorf("binding %v", o.binding())
			}
		}},
		{"--drain-timeout wins", []string{"--config=testdata/ipvsplane-config.yaml", "--drain-timeout=1h"}, func(t *testing.T, o *options) {
			if o.own.DrainTimeout.Duration != time.Hour {
				t.Errorf("drain timeout %v", o.own.DrainTimeout.Duration)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if _, err := o.load(fs); err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--source=files"}, "needs --manifests"},
		{[]string{"--source=etcd"}, "want kubernetes or files"},
		{[]string{"--ipvs-min-sync-period=1m", "--ipvs-sync-period=30s"}, "must be greater than or equal to KubeProxyConfiguration.MinSyncPeriod"},
		{[]string{"--ipvs-sync-period=0s"}, "KubeProxyConfiguration.SyncPeriod: Invalid value"},
		{[]string{"--drain-timeout=0s"}, "--drain-timeout (or ipvsplane.drainTimeout in --config) must be positive"},
		{[]string{"--service-address-binding=routes"}, `--service-address-binding (or ipvsplane.serviceAddressBinding in --config): want address or local-route, got "routes"`},
	}
	for _, tt := range tests {
		o := newOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if _, err := o.load(fs); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}

// The file's ipvsplane section sets ipvsplane's own settings under the
// flags of the same names, and is not reported as ignored.
func TestIPVSPlaneSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	body := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane:\n  serviceTrafficMetrics: true\n  serviceTrafficMetricsInterval: 30s\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args     []string
		on       bool
		interval time.Duration
		err      string
	}{
		{args: []string{"--config=" + path}, on: true, interval: 30 * time.Second},
		{args: []string{"--config=" + path, "--service-traffic-metrics-interval=1m"}, on: true, interval: time.Minute},
		{args: []string{"--config=" + path, "--service-traffic-metrics=false"}, interval: 30 * time.Second},
		{args: []string{"--service-traffic-metrics"}, on: true, interval: traffic.DefaultInterval},
		{args: []string{"--service-traffic-metrics-interval=10ms"}, err: "at least 1s"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := newOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			notes, err := o.load(fs)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil || len(notes.ignored) > 0 || notes.lenient != nil {
				t.Fatalf("%v, notes %+v", err, notes)
			}
			if o.own.ServiceTrafficMetrics != tt.on || o.own.ServiceTrafficMetricsInterval.Duration != tt.interval {
				t.Errorf("got %+v", o.own)
			}
		})
	}
}

// --write-config-to keeps --drain-timeout in ipvsplane's section, which
// is left out at its default so the file stays kube-proxy's.
func TestWriteConfigDrainTimeout(t *testing.T) {
	for _, tt := range []struct {
		flag        string
		want        time.Duration
		wantSection bool
	}{{"--drain-timeout=2m", 2 * time.Minute, true}, {"--drain-timeout=15m", defaultDrainTimeout, false}} {
		out := filepath.Join(t.TempDir(), "written.yaml")
		a, stdout, stderr := testApp(&fakeKernel{}, nil)
		if code := execute(a, []string{"--hostname-override=node-a", tt.flag, "--write-config-to=" + out}); code != 0 {
			t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
		}
		cfg, _, err := loadConfig(out)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(out)
		if cfg.IPVSPlane.DrainTimeout.Duration != tt.want || strings.Contains(string(data), "ipvsplane:") != tt.wantSection {
			t.Errorf("%s: drain timeout %v, file:\n%s", tt.flag, cfg.IPVSPlane.DrainTimeout.Duration, data)
		}
	}
}

// The file's logging.format and logging.verbosity choose the log's format
// and level under the --log-format and --log-level flags; the lenient
// read's warning is logged with them.
func TestConfigLogging(t *testing.T) {
	tests := []struct {
		args       []string
		json       bool
		debugLevel bool
	}{
		{[]string{"--config=testdata/lenient/kops-style.yaml"}, true, true},
		{[]string{"--config=testdata/lenient/kops-style.yaml", "--log-format=console", "--log-level=info"}, false, false},
		{[]string{"--config=testdata/lenient/kubeadm-1.13.yaml"}, false, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			lf := &logFlags{}
			root := (&app{}).newRootCommand(lf)
			o := newOptions()
			o.addFlags(root.Flags())
			if err := root.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			notes, err := o.load(root.Flags())
			if err != nil || notes.lenient == nil {
				t.Fatalf("%v, warning %v", err, notes.lenient)
			}
			level, format := lf.withFile(root.Flags(), o)
			if (format == "json") != tt.json || (level == "debug") != tt.debugLevel {
				t.Errorf("level %q, format %q", level, format)
			}
		})
	}
	a, stdout, stderr := testApp(&fakeKernel{}, nil)
	out := filepath.Join(t.TempDir(), "written.yaml")
	if code := execute(a, []string{"--config=testdata/lenient/kops-style.yaml", "--write-config-to=" + out}); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"using lenient decoding as strict decoding failed"`) {
		t.Errorf("no warning in JSON:\n%s", stderr)
	}
}

// kube-proxy's --v is logging.verbosity: 4 and above is debug.
func TestVerbosityFlag(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		level string
	}{
		{nil, "info"},
		{[]string{"--v=2"}, "info"},
		{[]string{"-v", "4"}, "debug"},
		{[]string{"--v=5", "--log-level=warn"}, "warn"},
	} {
		lf := &logFlags{}
		root := (&app{}).newRootCommand(lf)
		o := newOptions()
		o.addFlags(root.Flags())
		if err := root.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		if _, err := o.load(root.Flags()); err != nil {
			t.Fatal(err)
		}
		if level, _ := lf.withFile(root.Flags(), o); level != tt.level {
			t.Errorf("%v: level %q, want %q", tt.args, level, tt.level)
		}
	}
}

// The conntrack settings default to kube-proxy's, which
// conntracksettings' tests apply.
func TestConntrackDefaults(t *testing.T) {
	c := defaultConfig().Conntrack
	if *c.MaxPerCore != 32768 || *c.Min != 131072 || c.TCPEstablishedTimeout.Duration != 24*time.Hour ||
		c.TCPCloseWaitTimeout.Duration != time.Hour || c.TCPBeLiberal || c.UDPTimeout.Duration != 0 || c.UDPStreamTimeout.Duration != 0 {
		t.Errorf("conntrack defaults %+v", c)
	}
}
