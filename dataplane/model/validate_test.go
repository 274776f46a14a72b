package model

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
)

// The node's guards against tenants' addresses and schedulers are
// checked: an invalid one names its field.
func TestNodeValidateGuards(t *testing.T) {
	for _, tt := range []struct {
		field string
		node  Node
	}{
		{"externalIPRanges[1]", Node{ExternalIPRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), {}}}},
		{"protectedPorts[0]", Node{ProtectedPorts: []ProtectedPort{{Protocol: inet.TCP}}}},
		{"protectedPorts[1]", Node{ProtectedPorts: []ProtectedPort{{Protocol: inet.UDP, Port: 8472}, {Protocol: inet.ICMP, Port: 1}}}},
		{"allowedSchedulers[0]", Node{AllowedSchedulers: []string{"fastest"}}},
	} {
		var fe *FieldError
		if err := tt.node.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%+v: error %v, want one of field %s", tt.node, err, tt.field)
		}
	}
	ok := Node{ExternalIPRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		ProtectedPorts: []ProtectedPort{{Protocol: inet.TCP, Port: 10250}}, AllowedSchedulers: []string{"rr", "mh"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid guards: %v", err)
	}
}
