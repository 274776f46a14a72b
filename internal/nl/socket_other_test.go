//go:build !linux

package nl

import (
	"errors"
	"strings"
	"testing"
)

// Off Linux the packages build and their kernel calls fail, saying why.
func TestDialLinuxOnly(t *testing.T) {
	_, err := Dial(0, 0)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "Linux only") {
		t.Fatalf("Dial = %v, want an error wrapping errors.ErrUnsupported saying Linux only", err)
	}
}
