package main

import (
	"strings"
	"testing"
)

// A misspelt command is refused with the nearest command named.
func TestUnknownCommandSuggests(t *testing.T) {
	for typed, want := range map[string]string{
		"stauts":  `did you mean "status"?`,
		"pln":     `did you mean "plan"?`,
		"aplly":   `did you mean "apply"?`,
		"versoin": `did you mean "version"?`,
		"xyzzy":   `unknown command "xyzzy" for "ipvsplane"`,
	} {
		a, stdout, stderr := testApp(newNode(t), nil)
		code := execute(a, []string{typed})
		if out := stdout.String() + stderr.String(); code != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, output %q; want %q", typed, code, out, want)
		}
		if typed == "xyzzy" && strings.Contains(stderr.String(), "did you mean") {
			t.Errorf("%s: a suggestion far off: %s", typed, stderr)
		}
	}
}

// A command refuses the flags it does not read, naming the commands that
// read them; a misspelt flag gets the nearest.
func TestFlagsRefusedPerCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--log-level=debug"}, "--log-level: ipvsplane status does not read it; it is a flag of ipvsplane apply, ipvsplane plan, ipvsplane run"},
		{[]string{"cleanup", "--source=files"}, "--source: ipvsplane cleanup does not read it"},
		{[]string{"version", "--config=x.yaml"}, "--config: ipvsplane version does not read it"},
		{[]string{"plan", "--healthz-bind-address="}, "--healthz-bind-address: ipvsplane plan does not read it; it is a flag of ipvsplane run"},
		{[]string{"plan", "--ipvs-tcp-timeout=1m"}, "it is a flag of ipvsplane apply, ipvsplane run"},
		{[]string{"plan", "--feature-gates=X=true"}, "it is a flag of ipvsplane run"},
		{[]string{"apply", "--state-file=x"}, "--state-file: ipvsplane apply does not read it; it is a flag of ipvsplane cleanup, ipvsplane run, ipvsplane status"},
		{[]string{"apply", "--cleanup"}, "it is a flag of ipvsplane run"},
		{[]string{"cleanup", "--top=3"}, "it is a flag of ipvsplane status"},
		{[]string{"run", "--ipvs-schedular=rr"}, "unknown flag: --ipvs-schedular; did you mean --ipvs-scheduler?"},
		{[]string{"status", "--outptu=json"}, "did you mean --output?"},
		{[]string{"plan", "--no-such-thing"}, "unknown flag: --no-such-thing"},
	} {
		a, stdout, stderr := testApp(newNode(t), nil)
		code := execute(a, tt.args)
		if out := stdout.String() + stderr.String(); code != 1 || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, output %q; want %q", tt.args, code, out, tt.want)
		}
	}
}

// plan --help lists what plan reads, and none of the daemon's flags.
func TestPlanHelpListsOnlyPlanFlags(t *testing.T) {
	a, stdout, stderr := testApp(newNode(t), nil)
	if code := execute(a, []string{"plan", "--help"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	help := stdout.String()
	for _, want := range []string{"--offline", "--node-addresses", "--config", "--manifests", "--source", "--hostname-override", "--cluster-cidr", "--ipvs-scheduler", "--service-address-binding", "--log-level"} {
		if !strings.Contains(help, want+" ") {
			t.Errorf("plan --help lacks %s", want)
		}
	}
	for _, unread := range []string{"--healthz-bind-address", "--metrics-bind-address", "--conntrack-", "--state-file", "--cleanup", "--init-only",
		"--write-config-to", "--feature-gates", "--ipvs-sync-period", "--ipvs-tcp-timeout", "--drain-timeout", "--memory-limit", "--service-traffic-metrics", "--profiling"} {
		if strings.Contains(help, unread) {
			t.Errorf("plan --help lists %s, which plan does not read", unread)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"plan", "plan", 0}, {"pln", "plan", 1},
		{"stauts", "status", 2}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want || editDistance(tt.b, tt.a) != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
