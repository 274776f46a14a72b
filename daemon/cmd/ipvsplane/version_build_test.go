//go:build !vmtest

// The VM has no Go toolchain.

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Makefile's -X main.version and -X main.revision reach the binary's
// --version, `version` and build info.
func TestVersionLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ipvsplane")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-test.1 -X main.revision=feedface", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ipvsplane v0.0.0-test.1\nrevision: feedface\n") {
		t.Errorf("ipvsplane version: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--version").CombinedOutput()
	if err != nil || string(out) != "ipvsplane v0.0.0-test.1\n" {
		t.Errorf("ipvsplane --version: %v\n%s", err, out)
	}
}
