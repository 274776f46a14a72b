package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/spf13/pflag"
)

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
			if err != nil || len(notes.Ignored) > 0 || notes.Lenient != nil {
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
		a, stdout, stderr := testApp(newNode(t), nil)
		if code := execute(a, []string{"--hostname-override=node-a", tt.flag, "--write-config-to=" + out}); code != 0 {
			t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
		}
		cfg, _, err := config.Load(out)
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
			if err != nil || notes.Lenient == nil {
				t.Fatalf("%v, warning %v", err, notes.Lenient)
			}
			level, format := lf.withFile(root.Flags(), o)
			if (format == "json") != tt.json || (level == "debug") != tt.debugLevel {
				t.Errorf("level %q, format %q", level, format)
			}
		})
	}
	a, stdout, stderr := testApp(newNode(t), nil)
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

// kubeadm's mode: "" is logged once, at info level, as not read.
func TestEmptyModeLogged(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, _, stderr := testApp(newNode(t), nil)
	if code := execute(a, []string{"plan", "--offline", "--source=files", "--manifests=testdata/demo", "--hostname-override=node-a", "--config", cfg}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if n := strings.Count(stderr.String(), "INFO\tmode is empty (kube-proxy's iptables mode); ipvsplane does not read mode"); n != 1 {
		t.Errorf("%d info lines about mode:\n%s", n, stderr)
	}
}

// --write-config-to writes the guards into ipvsplane's section, and an
// empty --protected-ports stays empty when the file is read back.
func TestWriteConfigGuards(t *testing.T) {
	out := filepath.Join(t.TempDir(), "written.yaml")
	a, stdout, stderr := testApp(newNode(t), nil)
	args := []string{"--hostname-override=node-a", "--external-ip-ranges=203.0.113.0/24", "--protected-ports=", "--allowed-schedulers=rr,sh", "--write-config-to=" + out}
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	cfg, _, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultOwn()
	want.ExternalIPRanges, want.ProtectedPorts, want.AllowedSchedulers = []string{"203.0.113.0/24"}, []string{}, []string{"rr", "sh"}
	if got := cfg.IPVSPlane; !got.Equal(want) || got.ProtectedPorts == nil {
		data, _ := os.ReadFile(out)
		t.Errorf("read back %+v, want %+v; file:\n%s", got, want, data)
	}
}
