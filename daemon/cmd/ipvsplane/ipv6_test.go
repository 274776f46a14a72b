package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// ipv6Kernel is a fake kernel that says whether it has IPv6.
type ipv6Kernel struct {
	*fakeKernel
	ipv6 bool
}

func (k ipv6Kernel) IPv6() bool { return k.ipv6 }

// On a kernel without IPv6 the node is served IPv4Only (so the
// health-check servers leave :: alone), as kube-proxy runs single-stack.
func TestServedFamilies(t *testing.T) {
	for _, tt := range []struct {
		name string
		k    kernel
		want bool
	}{
		{"kernel with IPv6", ipv6Kernel{&fakeKernel{}, true}, false},
		{"kernel without IPv6", ipv6Kernel{&fakeKernel{}, false}, true},
		{"kernel that does not tell", &fakeKernel{}, false},
	} {
		node := model.Node{Name: "node-a"}
		servedFamilies(zap.NewNop(), tt.k, &node)
		if node.IPv4Only != tt.want {
			t.Errorf("%s: IPv4Only %v, want %v", tt.name, node.IPv4Only, tt.want)
		}
	}
}
