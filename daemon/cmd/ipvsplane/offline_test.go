package main

import (
	"context"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden plans under testdata/offline")

// plan --offline prints what the demo's manifests and kubeadm's
// configuration program on an empty node, without the kernel: no IPVS,
// no reading of the node's interfaces. The node's addresses come from the
// Node manifest, or from --node-addresses. The scheduled case's Services
// choose their schedulers and flags by annotation.
func TestPlanOffline(t *testing.T) {
	for name, extra := range map[string][]string{
		"demo":                {"--manifests=testdata/demo"},
		"demo-node-addresses": {"--manifests=testdata/demo", "--node-addresses=192.168.0.1,192.168.7.7"},
		"scheduled":           {"--manifests=testdata/scheduled"},
	} {
		t.Run(name, func(t *testing.T) {
			a, stdout, stderr := testApp(newNode(t), errors.New("the kernel must not be opened"))
			a.nodeAddrs = func(context.Context, string) ([]netip.Addr, error) {
				return nil, errors.New("the interfaces must not be read")
			}
			args := append([]string{"plan", "--offline", "--source=files",
				"--config=testdata/kube-proxy-config.yaml", "--hostname-override=node-a"}, extra...)
			if code := execute(a, args); code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			got := stdout.String()
			golden := filepath.Join("testdata", "offline", name+".txt")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("plan (-golden +got; go test -run TestPlanOffline -update rewrites it):\n%s", diff)
			}
			if name == "scheduled" {
				// What the Services ask and do not get is logged.
				for _, want := range []string{`scheduler \"fastest\"`, `schedulerFlags \"sh-port\" is ignored`, `ipvsplane.io/drain-timeout \"a while\" is ignored`} {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("the log does not have %s:\n%s", want, stderr)
					}
				}
			}
			if len(extra) > 1 && !strings.Contains(got, "192.168.7.7:30080") {
				t.Errorf("--node-addresses did not give node ports on 192.168.7.7")
			}
		})
	}
}

// --node-addresses belongs to plan --offline.
func TestNodeAddressesOnlyOffline(t *testing.T) {
	a, _, stderr := testApp(newNode(t), nil)
	if code := execute(a, []string{"plan", "--source=files", "--manifests=testdata/demo", "--node-addresses=192.168.0.1"}); code != 1 ||
		!strings.Contains(stderr.String(), "--offline") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// Without node addresses (no --node-addresses, and no Node manifest of
// the node's name) plan --offline warns that node ports are left out,
// naming the node it looked for.
func TestPlanOfflineWarnsWithoutNodeAddresses(t *testing.T) {
	const warning = "node ports are left out of the plan"
	for _, tt := range []struct {
		extra []string
		warns bool
	}{
		{[]string{"--hostname-override=node-b"}, true},
		{[]string{"--hostname-override=node-a"}, false},
		{[]string{"--hostname-override=node-b", "--node-addresses=192.168.0.1"}, false},
	} {
		a, stdout, stderr := testApp(newNode(t), errors.New("the kernel must not be opened"))
		args := append([]string{"plan", "--offline", "--source=files", "--manifests=testdata/demo"}, tt.extra...)
		if code := execute(a, args); code != 0 {
			t.Fatalf("%v: exit %d:\n%s", tt.extra, code, stderr)
		}
		if warned := strings.Contains(stderr.String(), warning); warned != tt.warns {
			t.Errorf("%v: warned %v, want %v:\n%s", tt.extra, warned, tt.warns, stderr)
		}
		if tt.warns && !strings.Contains(stderr.String(), `"node": "node-b"`) {
			t.Errorf("%v: the warning does not name the node:\n%s", tt.extra, stderr)
		}
		if hasPorts := strings.Contains(stdout.String(), ":30080"); hasPorts == tt.warns {
			t.Errorf("%v: node port 30080 planned: %v", tt.extra, hasPorts)
		}
	}
}

// The guards against what tenants write reach the plan from their flags:
// an external IP outside --external-ip-ranges, one on the node's address
// at the kubelet's or the daemon's port, and a scheduler outside
// --allowed-schedulers are not programmed, and are logged.
func TestPlanOfflineGuards(t *testing.T) {
	dir := t.TempDir()
	node, err := os.ReadFile("testdata/demo/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	grab := `apiVersion: v1
kind: Service
metadata:
  name: grab
  namespace: tenant
  annotations: {ipvsplane.io/scheduler: mh}
spec:
  clusterIP: 10.96.5.1
  clusterIPs: [10.96.5.1]
  externalIPs: [198.51.100.9, 203.0.113.9, 192.168.0.1]
  ports:
  - {name: web, port: 443}
  - {name: kubelet, port: 10250}
  - {name: healthz, port: 10256}
`
	for name, body := range map[string]string{"node.yaml": string(node), "grab.yaml": grab} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, stdout, stderr := testApp(newNode(t), errors.New("the kernel must not be opened"))
	args := []string{"plan", "--offline", "--source=files", "--manifests=" + dir, "--hostname-override=node-a",
		"--external-ip-ranges=198.51.100.0/24,192.168.0.0/24", "--allowed-schedulers=wrr"}
	if code := execute(a, args); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	got := stdout.String()
	for _, want := range []string{"ipvs add TCP 198.51.100.9:443 rr (tenant/grab:web)", "ipvs add TCP 192.168.0.1:443 rr"} {
		if !strings.Contains(got, want) {
			t.Errorf("the plan lacks %q:\n%s", want, got)
		}
	}
	for _, refused := range []string{"203.0.113.9", "192.168.0.1:10250", "192.168.0.1:10256", " mh "} {
		if strings.Contains(got, refused) {
			t.Errorf("the plan has %q", refused)
		}
	}
	for _, want := range []string{`externalIPs \"203.0.113.9\" is ignored`, `externalIPs \"192.168.0.1\" is ignored: a node address, whose port 10250/tcp`, `port 10256/tcp`, `scheduler \"mh\"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, stderr)
		}
	}
}
