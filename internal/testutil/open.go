package testutil

import (
	"context"
	"io"
	"testing"
	"time"
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

// Context is a context for a test's calls into the kernel: it ends with
// the test, or after five minutes if the test hangs.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
