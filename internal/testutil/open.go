package testutil

import (
	"io"
	"testing"
)

// Open returns what open opens, most often a package's connection into a
// test's namespace ("func() (*Conn, error) { return Dial(&Config{NetNS:
// ns.FD()}) }"), failing the test on its error, and closes it when the
// test ends.
func Open[C io.Closer](t testing.TB, open func() (C, error)) C {
	t.Helper()
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
