//go:build vmtest

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The example runs as a newcomer would run it, in the guest's namespace:
// it programs a virtual server, reprograms it with other backends, shows
// the table, and deletes it.
func TestExampleRuns(t *testing.T) {
	testutil.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := options{proto: "tcp", sched: "rr", device: "ipvs0", interval: time.Millisecond, rounds: 2}
	var out bytes.Buffer
	if err := run(ctx, o, []string{"10.96.0.10:80", "10.244.0.5:8080", "10.244.0.6:8080"}, &out); err != nil {
		t.Fatal(err)
	}
	o.sched, o.persist = "wlc", time.Minute
	out.Reset()
	if err := run(ctx, o, []string{"10.96.0.10:80", "10.244.0.6:8080", "10.244.0.7:8080"}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"TCP 10.96.0.10:80", "wlc", "10.244.0.6:8080", "10.244.0.7:8080"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "10.244.0.5:8080") {
		t.Fatal("a removed backend is still shown")
	}
	o.delete = true
	if err := run(ctx, o, []string{"10.96.0.10:80"}, &out); err != nil {
		t.Fatal(err)
	}
}
