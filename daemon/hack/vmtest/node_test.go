package main

import (
	"strings"
	"testing"
)

func TestParseNodeArgs(t *testing.T) {
	c, err := parseNodeArgs([]string{"-proxy", "kube-proxy", "--", "go", "test"})
	if err != nil || c.proxy != "kube-proxy" || strings.Join(c.command, " ") != "go test" || c.deploy != "deploy" || c.install != "kubectl" {
		t.Errorf("kube-proxy without an image: %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{"-proxy", "ipvsplane", "--", "true"}, // no image
		{"-proxy", "iptables", "--", "true"},
		{"-image", "x.tar", "-image-ref", "r:1"}, // no command
		{"-proxy", "none", "-install", "kustomize", "--", "true"},
	} {
		if _, err := parseNodeArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The overlay changes only what an operator changes: deploy/'s image and
// the API server's address.
func TestOverlayKustomization(t *testing.T) {
	k, err := overlayKustomization("../../deploy", "localhost:5000/team/ipvsplane:v1.2", 6443)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- ../../deploy\n",
		"newName: localhost:5000/team/ipvsplane\n",
		`newTag: "v1.2"`,
		`value: "10.0.2.2"`,
		`value: "6443"`,
	} {
		if !strings.Contains(k, want) {
			t.Errorf("the overlay lacks %q:\n%s", want, k)
		}
	}
	if _, err := overlayKustomization("../deploy", "localhost:5000/ipvsplane", 1); err == nil {
		t.Error("an image reference without a tag was accepted")
	}
}
