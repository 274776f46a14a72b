//go:build hosttest

package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// TestLoad loads a save file in a fresh namespace and compares the output
// with the real `ipset save` there.
func TestLoad(t *testing.T) {
	ns := testutil.NewNetNS(t)
	testutil.RequireProgram(t, "ipset")
	input := `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add KUBE-LOOP-BACK 10.0.0.2,tcp:8080,10.0.0.2
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536 comment
add KUBE-LOAD-BALANCER-SOURCE-CIDR 1.2.3.4,tcp:443,10.0.0.0/8 comment "lb"
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &ipset.Config{NetNS: ns.FD()}, strings.NewReader(input), &out); err != nil {
		t.Fatal(err)
	}
	got := sortedLines(out.String())
	want := sortedLines(ns.Run(t, "ipset", "save"))
	if !slices.Equal(got, want) {
		t.Errorf("printed\n%s\nipset save says\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(got) != 9 {
		t.Errorf("%d lines, want 9", len(got))
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}
