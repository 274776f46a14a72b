//go:build hosttest

package legacyiptables

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The leftovers of kube-proxy's iptables mode written with iptables-legacy
// (both families), among kubelet's, the portmap plugin's and Docker's
// chains: RemoveKubeProxy removes exactly kube-proxy's chains and
// the jumps to them, as iptables-legacy-save shows, and leaves the
// iptables-nft tables alone.
func TestRemoveLegacyKubeProxy(t *testing.T) {
	for _, p := range []string{"iptables-legacy-save", "iptables-legacy-restore", "ip6tables-legacy-save", "ip6tables-legacy-restore", "iptables-restore", "iptables-save"} {
		testutil.RequireProgram(t, p)
	}
	const dir = "../../../dataplane/testdata/kube-proxy-leftovers/"
	ns := testutil.NewNetNS(t)
	remove := func() (Report, error) {
		var r Report
		err := ns.Do(func() (err error) {
			r, err = RemoveKubeProxy(context.Background(), "/proc/thread-self/net")
			return err
		})
		return r, err
	}
	// Nothing in use: nothing read, nothing loaded.
	if r, err := remove(); err != nil || len(r.Removed) != 0 || len(r.Unreadable) != 0 {
		t.Fatalf("an unused legacy iptables: %+v %v", r, err)
	}
	if names := ns.Run(t, "cat", "/proc/thread-self/net/ip_tables_names"); names != "" {
		t.Fatalf("legacy tables loaded: %q", names)
	}
	for _, load := range []struct{ program, file string }{
		{"iptables-legacy-restore", "iptables-mode.v4"}, {"ip6tables-legacy-restore", "iptables-mode.v6"}, {"iptables-restore", "iptables-mode.v4"},
	} {
		data, err := os.ReadFile(dir + load.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := ns.Do(func() error {
			cmd := exec.Command(load.program)
			cmd.Stdin = strings.NewReader(string(data))
			_, err := cmd.Output()
			return err
		}); err != nil {
			t.Fatalf("%s < %s: %v", load.program, load.file, err)
		}
	}
	nftBefore := ns.Run(t, "iptables-save")
	r, err := remove()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %d chains: %v", len(r.Removed), r.Removed)
	for _, want := range []string{"iptables-legacy nat KUBE-SVC-XPGD46QRK7WJZT7O", "iptables-legacy filter KUBE-SERVICES", "iptables-legacy mangle KUBE-PROXY-CANARY",
		"ip6tables-legacy nat KUBE-SEP-GD2LDVTGRXWXSWFA", "ip6tables-legacy filter KUBE-FORWARD"} {
		if !strings.Contains(strings.Join(r.Removed, "\n")+"\n", want+"\n") {
			t.Errorf("not removed: %s", want)
		}
	}
	for _, p := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
		saved := ns.Run(t, p)
		for _, line := range strings.Split(saved, "\n") {
			if strings.Contains(line, "KUBE-") && !strings.Contains(line, "KUBE-FIREWALL") && !strings.Contains(line, "KUBE-KUBELET-CANARY") {
				t.Errorf("%s: kube-proxy's rule left: %s", p, line)
			}
		}
		for _, keep := range []string{"-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT", ":KUBE-KUBELET-CANARY - [0:0]"} {
			if !strings.Contains(saved, keep+"\n") {
				t.Errorf("%s: another program's rule went: %s", p, keep)
			}
		}
	}
	saved := ns.Run(t, "iptables-legacy-save")
	for _, keep := range []string{
		"-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER", "-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
		"-A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
		`-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: cbr0 id: 8c6e1a5f" -m multiport --dports 443 -j CNI-DN-8c6e1a5f0e2b9a7d4c3b2`,
		"-A INPUT -j KUBE-FIREWALL", "-A FORWARD -o docker0 -j DOCKER", "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE",
	} {
		if !strings.Contains(saved, keep+"\n") {
			t.Errorf("another program's rule went: %s\n%s", keep, saved)
		}
	}
	if got := ns.Run(t, "iptables-save"); stripSaveComments(got) != stripSaveComments(nftBefore) {
		t.Errorf("iptables-nft's tables changed:\n%s", got)
	}
	// Done: a second run finds nothing.
	if r, err := remove(); err != nil || len(r.Removed) != 0 {
		t.Errorf("again: %+v %v", r, err)
	}

	// Another program's conditional jump into kube-proxy's nat chains keeps
	// that table's chains, and says so; the other tables are cleaned.
	data, err := os.ReadFile(dir + "iptables-mode.v4")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error {
		cmd := exec.Command("iptables-legacy-restore")
		cmd.Stdin = strings.NewReader(string(data))
		return cmd.Run()
	}); err != nil {
		t.Fatal(err)
	}
	ns.Run(t, "iptables-legacy", "-t", "nat", "-A", "DOCKER", "-p", "tcp", "-j", "KUBE-MARK-MASQ")
	r, err = remove()
	if err == nil || !strings.Contains(err.Error(), "table nat") {
		t.Errorf("with a foreign reference: %v", err)
	}
	if strings.Contains(strings.Join(r.Removed, " "), " nat ") || !strings.Contains(strings.Join(r.Removed, " "), "filter KUBE-SERVICES") {
		t.Errorf("with a foreign reference in nat, removed %v", r.Removed)
	}
}

// stripSaveComments drops a save program's comments, which carry the time.
func stripSaveComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Legacy tables in use without the programs to read them are reported,
// not touched.
func TestRemoveLegacyKubeProxyWithoutPrograms(t *testing.T) {
	testutil.RequireProgram(t, "iptables-legacy")
	ns := testutil.NewNetNS(t)
	ns.Run(t, "iptables-legacy", "-t", "nat", "-N", "KUBE-SERVICES")
	t.Setenv("PATH", t.TempDir())
	var r Report
	err := ns.Do(func() (err error) {
		r, err = RemoveKubeProxy(context.Background(), "/proc/thread-self/net")
		return err
	})
	if err != nil || len(r.Removed) != 0 || strings.Join(r.Unreadable, " ") != "iptables-legacy-save iptables-legacy-restore" {
		t.Errorf("%+v %v", r, err)
	}
}
