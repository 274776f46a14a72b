package main

import (
	"strings"
	"testing"
)

func TestCheckNATCore(t *testing.T) {
	for release, ok := range map[string]bool{
		"3.10.0-1160.el7.x86_64":   false,
		"4.14.336":                 false,
		"4.17.19":                  false,
		"4.18.0-553.el8_10.x86_64": true,
		"4.19.0-27-amd64":          true,
		"5.10.0-28-amd64":          true,
		"6.1.0-56-cloud-amd64":     true,
	} {
		err := checkNATCore(release)
		if (err == nil) != ok {
			t.Errorf("%s: %v", release, err)
		}
		if err != nil && (!strings.Contains(err.Error(), release) || !strings.Contains(err.Error(), "4.18")) {
			t.Errorf("%s: the error does not name the kernel and the version needed: %v", release, err)
		}
	}
	if err := checkNATCore("linux"); err == nil {
		t.Error("an unreadable release passed")
	}
}

// run and apply refuse a kernel before 4.18 before they touch it; the
// commands that only read it, or undo what ipvsplane made, do not.
func TestOldKernelRefused(t *testing.T) {
	dir := manifestDir(t, map[string]string{"web.yaml": webManifest})
	for _, tt := range []struct {
		args    []string
		refused bool
	}{
		// Without the check, a missing directory stops the daemon.
		{[]string{"run", "--source=files", "--manifests", "/nonexistent", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}, true},
		{[]string{"--source=files", "--manifests", dir, "--init-only"}, true},
		{[]string{"apply", "--source=files", "--manifests", dir}, true},
		{[]string{"plan", "--source=files", "--manifests", dir}, false},
		{[]string{"cleanup", "--state-file="}, false},
	} {
		n := newNode(t)
		a, stdout, stderr := testApp(n, nil)
		a.kernelRelease = func() (string, error) { return "4.14.336", nil }
		code := execute(a, tt.args)
		out := stdout.String() + stderr.String()
		refused := strings.Contains(out, "kernel 4.14.336 is older than 4.18")
		if refused != tt.refused || (refused && code != 1) {
			t.Errorf("%v: exit %d, output:\n%s", tt.args, code, out)
		}
		if refused {
			untouched(t, n, tt.args)
		}
	}
}
