package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// On a kernel without IPv6 the node is served IPv4Only (so the
// health-check servers leave :: alone), as kube-proxy runs single-stack.
func TestServedFamilies(t *testing.T) {
	open := func(opts *dataplanetest.Options) kernel {
		n, err := dataplanetest.New(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		dp, err := n.Open(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
		return dp
	}
	for _, tt := range []struct {
		name string
		k    kernel
		want bool
	}{
		{"kernel with IPv6", open(nil), false},
		{"kernel without IPv6", open(&dataplanetest.Options{WithoutIPv6: true}), true},
		// A wrapper that does not pass the method on hides even a
		// kernel without IPv6: the node is taken to have it.
		{"kernel that does not tell", struct{ kernel }{open(&dataplanetest.Options{WithoutIPv6: true})}, false},
	} {
		node := model.Node{Name: "node-a"}
		servedFamilies(zap.NewNop(), tt.k, &node)
		if node.IPv4Only != tt.want {
			t.Errorf("%s: IPv4Only %v, want %v", tt.name, node.IPv4Only, tt.want)
		}
	}
}
