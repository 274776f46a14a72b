//go:build vmtest

package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// TestGuestReachesControlPlane checks the plumbing every other test here
// stands on: the host's API server answers the guest, survives a restart
// the guest asks for, and the programs are in the guest.
func TestGuestReachesControlPlane(t *testing.T) {
	testutil.RequireVM(t)
	cp := controlplane.FromVM(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("reading namespace default through %s: %v", cp.RESTConfig().Host, err)
	}
	if err := cp.KillAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered after it was killed")
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	for _, prog := range [][]string{
		{"kube-proxy", "--version"},
		{"ipvsplane", "--help"},
		{"iptables", "--version"},
		{"ip6tables-restore", "--version"},
		{"ipset", "--version"},
	} {
		out, err := exec.CommandContext(ctx, prog[0], prog[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", prog, err, out)
			continue
		}
		t.Logf("%v: %.80s", prog, out)
	}
}
