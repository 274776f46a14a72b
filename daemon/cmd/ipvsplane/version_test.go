package main

import (
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
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
			a, stdout, stderr := testApp(newNode(t), nil)
			a.build.Version = "v9.8.7"
			if code := execute(a, tt.args); code != 0 {
				t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout.String(), tt.want) {
				t.Errorf("printed %q, want %q first", stdout, tt.want)
			}
		})
	}
	a, stdout, stderr := testApp(newNode(t), nil)
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
	a, stdout, stderr := testApp(newNode(t), nil)
	args := []string{"run", "--write_config_to", out, "--hostname_override=node-u", "--ipvs_scheduler=lc", "--log_level=debug"}
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	cfg, _, err := config.Load(out)
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
	a, stdout, stderr := testApp(newNode(t), nil)
	if code := execute(a, []string{"--proxy-port-range=30000-32767", "--write-config-to", filepath.Join(t.TempDir(), "c")}); code == 0 {
		t.Errorf("accepted:\n%s%s", stdout, stderr)
	}
}

// `ipvsplane version` prints the build's version, commit, toolchain and
// platform, as text or JSON.
func TestVersionCommand(t *testing.T) {
	b := buildInfo{Version: "v9.8.7", Revision: "0123abc", GoVersion: "go1.99.1", Compiler: "gc", Platform: "linux/arm64"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "ipvsplane v9.8.7\nrevision: 0123abc\ngo: go1.99.1 (gc, linux/arm64)\n"},
		{[]string{"version", "-o", "json"}, `{
  "version": "v9.8.7",
  "revision": "0123abc",
  "goVersion": "go1.99.1",
  "compiler": "gc",
  "platform": "linux/arm64"
}
`},
	} {
		a, stdout, stderr := testApp(newNode(t), nil)
		a.build = b
		if code := execute(a, tt.args); code != 0 {
			t.Fatalf("%v: exit %d:\n%s%s", tt.args, code, stdout, stderr)
		}
		if stdout.String() != tt.want {
			t.Errorf("%v printed:\n%s\nwant:\n%s", tt.args, stdout, tt.want)
		}
	}
	a, stdout, stderr := testApp(newNode(t), nil)
	if code := execute(a, []string{"version", "-o", "yaml"}); code == 0 || !strings.Contains(stderr.String(), "text or json") {
		t.Errorf("-o yaml: exit %d:\n%s%s", code, stdout, stderr)
	}
}

// The version set at build time (-X main.version) is the one reported;
// without it, the module's; the commit is go build's stamp when no
// -X main.revision is given.
func TestReadBuildInfo(t *testing.T) {
	b := readBuildInfo()
	if b.Version == "" || b.Revision == "" || !strings.HasPrefix(b.GoVersion, "go") || b.Compiler == "" || !strings.Contains(b.Platform, "/") {
		t.Errorf("build info %+v", b)
	}
	for _, tt := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, ""},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}, "abc"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "abc"}}, "abc-dirty"},
	} {
		if got := vcsRevision(tt.settings); got != tt.want {
			t.Errorf("vcsRevision(%v) = %q, want %q", tt.settings, got, tt.want)
		}
	}
}
