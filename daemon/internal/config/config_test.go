package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testdata/kube-proxy-config.yaml is a configuration as kubeadm writes it:
// empty values take the defaults, the IPVS settings apply, and the fields
// of other modes or of no use to ipvsplane are listed once.
func TestLoadKubeadmConfig(t *testing.T) {
	cfg, notes, err := Load("testdata/kube-proxy-config.yaml")
	if err != nil || notes.Lenient != nil {
		t.Fatal(err, notes.Lenient)
	}
	ignored := notes.Ignored
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
		// A value that does not decode is named with its field and line.
		{"wrong type", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs: {scheduler: [rr]}\n", "line 3: field ipvs.scheduler: json: cannot unmarshal array"},
		{"wrong type beside an unknown field", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nudpIdleTimeout: 1s\nipvs: {syncPeriod: often}\n", `line 4: field ipvs.syncPeriod: time: invalid duration "often"`},
		{"wrong type, nested", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nconntrack:\n  min: 10\n  maxPerCore: many\n", "line 6: field conntrack.maxPerCore: json: cannot unmarshal string"},
		{"number for a duration", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs:\n  scheduler: rr\n  syncPeriod: 30\n", "line 5: field ipvs.syncPeriod: json: cannot unmarshal number"},
		{"section of the wrong type", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs: [1]\n", "line 3: field ipvs: json: cannot unmarshal array"},
		{"wrong type in JSON", "{\n  \"apiVersion\": \"kubeproxy.config.k8s.io/v1alpha1\",\n  \"kind\": \"KubeProxyConfiguration\",\n  \"ipvs\": {\"strictARP\": \"yes\"}\n}\n", "line 4: field ipvs.strictARP: json: cannot unmarshal string"},
		{"wrong kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", "want apiVersion"},
		{"not yaml", "apiVersion: [\n", "yaml"},
		{"unknown field of ipvsplane's section", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeOut: 1m}\n", `unknown field "ipvsplane.drainTimeOut"`},
		{"bad duration in ipvsplane's section", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeout: soon}\n", "line 3: field ipvsplane.drainTimeout: time: invalid duration"},
		{"ipvsplane's section twice", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {}\nipvsplane: {}\n", "already set"},
		{"a field of ipvsplane's section twice", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvsplane: {drainTimeout: 1m, drainTimeout: 2m}\n", "already defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := Load(path)
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
		check               func(*File) bool
	}{
		{"unknown field", "ipvs: {schedular: rr, scheduler: wrr}\n", `unknown field "ipvs.schedular"`,
			func(c *File) bool { return c.IPVS.Scheduler == "wrr" }},
		{"field in another case", "Mode: iptables\n", `unknown field "Mode"`,
			func(c *File) bool { return c.Mode == "ipvs" }},
		{"field twice", "ipvs: {scheduler: rr, scheduler: wrr}\n", `key "scheduler" already set`,
			func(c *File) bool { return c.IPVS.Scheduler == "wrr" }},
		{"removed field beside ipvsplane's section", "resourceContainer: /kube-proxy\nipvsplane: {drainTimeout: 2m}\n", `unknown field "resourceContainer"`,
			func(c *File) bool { return c.IPVSPlane.DrainTimeout.Duration == 2*time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, notes, err := parse("config.yaml", []byte(head+tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if notes.Lenient == nil || !strings.Contains(notes.Lenient.Error(), tt.warning) {
				t.Errorf("warning %v, want one with %q", notes.Lenient, tt.warning)
			}
			if !tt.check(cfg) {
				t.Errorf("read as %+v", cfg)
			}
		})
	}
}

// Older installers' files, with fields since removed, load with a warning.
func TestLoadOlderConfigs(t *testing.T) {
	cfg, notes, err := Load("testdata/lenient/kubeadm-1.13.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resourceContainer", "udpIdleTimeout", "conntrack.max"} {
		if notes.Lenient == nil || !strings.Contains(notes.Lenient.Error(), `unknown field "`+f+`"`) {
			t.Errorf("kubeadm 1.13: warning %v does not name %s", notes.Lenient, f)
		}
	}
	if cfg.Mode != "ipvs" || cfg.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" || *cfg.Conntrack.Min != 131072 {
		t.Errorf("kubeadm 1.13: %+v", cfg)
	}

	cfg, notes, err = Load("testdata/lenient/kops-style.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if notes.Lenient == nil || !strings.Contains(notes.Lenient.Error(), `unknown field "udpIdleTimeout"`) || !strings.Contains(notes.Lenient.Error(), `key "scheduler" already set`) {
		t.Errorf("kops-style: warning %v", notes.Lenient)
	}
	// kube-proxy's defaulting appends the port to a bare IP.
	if cfg.HealthzBindAddress != "0.0.0.0:10256" || cfg.MetricsBindAddress != "0.0.0.0:10249" {
		t.Errorf("kops-style: bind addresses %q, %q", cfg.HealthzBindAddress, cfg.MetricsBindAddress)
	}
	if cfg.IPVS.Scheduler != "lc" || cfg.HostnameOverride != "ip-172-20-40-10.ec2.internal" {
		t.Errorf("kops-style: %+v", cfg)
	}
	if !slices.Contains(notes.Ignored, "featureGates.KubeProxyIPVS: true") {
		t.Errorf("kops-style: feature gates not noted as ignored: %v", notes.Ignored)
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

// The conntrack settings default to kube-proxy's, which
// conntracksettings' tests apply.
func TestConntrackDefaults(t *testing.T) {
	c := Default().Conntrack
	if *c.MaxPerCore != 32768 || *c.Min != 131072 || c.TCPEstablishedTimeout.Duration != 24*time.Hour ||
		c.TCPCloseWaitTimeout.Duration != time.Hour || c.TCPBeLiberal || c.UDPTimeout.Duration != 0 || c.UDPStreamTimeout.Duration != 0 {
		t.Errorf("conntrack defaults %+v", c)
	}
}

// kube-proxy's defaulting takes the bind addresses' family from
// bindAddress: kubeadm writes "::" on IPv6 clusters, whose defaults are
// [::]:10256 and [::1]:10249; an address that is not IPv4 (an invalid one
// too, which validation then refuses) counts as IPv6.
func TestDefaultBindAddressesFollowBindAddress(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	tests := []struct{ body, healthz, metrics string }{
		{"", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"bindAddress: 0.0.0.0\n", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"bindAddress: 10.0.0.1\n", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"bindAddress: \"::\"\n", "[::]:10256", "[::1]:10249"},
		{"bindAddress: fd00::1\n", "[::]:10256", "[::1]:10249"},
		{"bindAddress: nowhere\n", "[::]:10256", "[::1]:10249"},
		{"bindAddress: \"::\"\nhealthzBindAddress: 10.0.0.1\nmetricsBindAddress: 0.0.0.0:9000\n", "10.0.0.1:10256", "0.0.0.0:9000"},
	}
	for _, tt := range tests {
		cfg, _, err := parse("config.yaml", []byte(head+tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HealthzBindAddress != tt.healthz || cfg.MetricsBindAddress != tt.metrics {
			t.Errorf("%q: bind addresses %q, %q; want %q, %q", tt.body, cfg.HealthzBindAddress, cfg.MetricsBindAddress, tt.healthz, tt.metrics)
		}
	}
	if d := Default(); d.HealthzBindAddress != "0.0.0.0:10256" || d.MetricsBindAddress != "127.0.0.1:10249" {
		t.Errorf("Default: %q, %q", d.HealthzBindAddress, d.MetricsBindAddress)
	}
}

// kubeadm's mode: "" (kube-proxy's iptables mode) gets a line at info
// level saying ipvsplane does not read it; mode: ipvs gets none.
func TestEmptyModeNoted(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for body, want := range map[string]int{`mode: ""` + "\n": 1, "": 1, "mode: ipvs\n": 0} {
		_, notes, err := parse("config.yaml", []byte(head+body))
		if err != nil {
			t.Fatal(err)
		}
		if len(notes.Info) != want || (want > 0 && !strings.Contains(notes.Info[0], "does not read mode")) {
			t.Errorf("%q: info %q, want %d line(s) saying mode is not read", body, notes.Info, want)
		}
	}
}

// The section's guards: protectedPorts left out (or null) is the
// kubelet's port, an empty list none; the lists are read as written, and
// Equal compares them.
func TestOwnGuards(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for _, tt := range []struct {
		name, section string
		want          Own
	}{
		{"left out", "", DefaultOwn()},
		{"null", "ipvsplane: {protectedPorts: null}\n", DefaultOwn()},
		{"empty", "ipvsplane: {protectedPorts: []}\n", func() Own { o := DefaultOwn(); o.ProtectedPorts = []string{}; return o }()},
		{"all", "ipvsplane: {externalIPRanges: [203.0.113.0/24], protectedPorts: [8472/udp], allowedSchedulers: [rr, sh]}\n", func() Own {
			o := DefaultOwn()
			o.ExternalIPRanges, o.ProtectedPorts, o.AllowedSchedulers = []string{"203.0.113.0/24"}, []string{"8472/udp"}, []string{"rr", "sh"}
			return o
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, notes, err := parse("config.yaml", []byte(head+tt.section))
			if err != nil || len(notes.Ignored) > 0 || notes.Lenient != nil {
				t.Fatal(err, notes)
			}
			if !cfg.IPVSPlane.Equal(tt.want) || (cfg.IPVSPlane.ProtectedPorts == nil) != (tt.want.ProtectedPorts == nil) {
				t.Errorf("got %+v, want %+v", cfg.IPVSPlane, tt.want)
			}
		})
	}
	if o := DefaultOwn(); o.Equal(Own{ServiceTrafficMetricsInterval: o.ServiceTrafficMetricsInterval, DrainTimeout: o.DrainTimeout, ServiceAddressBinding: o.ServiceAddressBinding}) {
		t.Errorf("Equal misses the protected ports")
	}
}

// Own.Equal must compare every field, or --write-config-to would leave
// out a section that differs from the defaults in it alone.
func TestOwnEqualComparesEveryField(t *testing.T) {
	typ := reflect.TypeFor[Own]()
	for i := range typ.NumField() {
		changed := DefaultOwn()
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.ValueOf("x")))
		case reflect.Struct: // a metav1.Duration
			f.Field(0).SetInt(f.Field(0).Int() + 1)
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		if changed.Equal(DefaultOwn()) {
			t.Errorf("Equal misses a change of %s", typ.Field(i).Name)
		}
	}
}
