package main

import (
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

func TestParseDest(t *testing.T) {
	tests := []struct {
		in      string
		addr    string
		port    uint16
		wantErr bool
	}{
		{"10.96.0.10", "10.96.0.10", 0, false},
		{"10.96.0.10:53", "10.96.0.10", 53, false},
		{"fd00:96::10", "fd00:96::10", 0, false},
		{"[fd00:96::10]:53", "fd00:96::10", 53, false},
		{"::ffff:10.96.0.10", "10.96.0.10", 0, false},
		{"service", "", 0, true},
		{"10.96.0.10:http", "", 0, true},
	}
	for _, tt := range tests {
		addr, port, err := parseDest(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseDest(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && (addr != netip.MustParseAddr(tt.addr) || port != tt.port) {
			t.Errorf("parseDest(%q) = %v, %d; want %s, %d", tt.in, addr, port, tt.addr, tt.port)
		}
	}
}
