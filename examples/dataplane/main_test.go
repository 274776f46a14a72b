package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	state, err := load("testdata/services.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Services) != 3 || state.Node.Name != "node-a" {
		t.Errorf("loaded %d services for node %q", len(state.Services), state.Node.Name)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"services": [{"name": "x", "protocol": "ICMP"}]}`), 0o644)
	if _, err := load(bad); err == nil || !strings.Contains(err.Error(), "services[0].protocol") {
		t.Errorf("an unknown protocol: %v", err)
	}
}
