package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --version prints the version and exits, in kube-proxy's flag's shapes.
func TestVersionFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, "ipvsplane v9.8.7\n"},
		{[]string{"run", "--version"}, "ipvsplane v9.8.7\n"},
		{[]string{"--version=true", "--config=/nonexistent"}, "ipvsplane v9.8.7\n"},
		{[]string{"--version=v1.2.3"}, "ipvsplane v1.2.3\n"},
		{[]string{"--version=raw"}, "version\tv9.8.7\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			a, stdout, stderr := testApp(&fakeKernel{}, nil)
			a.version = "v9.8.7"
			if code := execute(a, tt.args); code != 0 {
				t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout.String(), tt.want) {
				t.Errorf("printed %q, want %q first", stdout, tt.want)
			}
		})
	}
	a, stdout, stderr := testApp(&fakeKernel{}, nil)
	if code := execute(a, []string{"--version=maybe"}); code == 0 {
		t.Errorf("--version=maybe accepted:\n%s%s", stdout, stderr)
	}
}

func TestBuildVersion(t *testing.T) {
	if buildVersion() == "" {
		t.Error("no version")
	}
}

// Underscores in flag names are dashes, as kube-proxy's flag set
// normalises them.
func TestFlagUnderscores(t *testing.T) {
	out := filepath.Join(t.TempDir(), "config.yaml")
	a, stdout, stderr := testApp(&fakeKernel{}, nil)
	args := []string{"run", "--write_config_to", out, "--hostname_override=node-u", "--ipvs_scheduler=lc", "--log_level=debug"}
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	cfg, _, err := loadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostnameOverride != "node-u" || cfg.IPVS.Scheduler != "lc" {
		t.Errorf("configuration: %+v", cfg)
	}
}

// kube-proxy v1.31 removed --proxy-port-range (kubernetes PR #126293):
// v1.37 refuses it, and so does ipvsplane.
func TestProxyPortRangeRefused(t *testing.T) {
	a, stdout, stderr := testApp(&fakeKernel{}, nil)
	if code := execute(a, []string{"--proxy-port-range=30000-32767", "--write-config-to", filepath.Join(t.TempDir(), "c")}); code == 0 {
		t.Errorf("accepted:\n%s%s", stdout, stderr)
	}
}
