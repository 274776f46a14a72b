package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseNodeArgs(t *testing.T) {
	c, err := parseNodeArgs([]string{"-proxy", "kube-proxy", "--", "go", "test"})
	if err != nil || c.proxy != "kube-proxy" || strings.Join(c.command, " ") != "go test" || c.deploy != "deploy" || c.install != "kubectl" {
		t.Errorf("kube-proxy without an image: %+v %v", c, err)
	}
	if c.kubeProxyMode != "ipvs" {
		t.Errorf("kube-proxy's mode by default: %q, want ipvs", c.kubeProxyMode)
	}
	if c, err := parseNodeArgs([]string{"-proxy", "kube-proxy", "-kube-proxy-mode", "nftables", "--", "true"}); err != nil || c.kubeProxyMode != "nftables" {
		t.Errorf("-kube-proxy-mode nftables: %+v %v", c, err)
	}
	if c, err := parseNodeArgs([]string{"-proxy", "kubeadm", "--", "true"}); err != nil || c.proxy != "kubeadm" {
		t.Errorf("kubeadm's kube-proxy without an image: %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{"-proxy", "ipvsplane", "--", "true"}, // no image
		{"-proxy", "iptables", "--", "true"},
		{"-image", "x.tar", "-image-ref", "r:1"}, // no command
		{"-proxy", "none", "-install", "kustomize", "--", "true"},
		{"-proxy", "kube-proxy", "-kube-proxy-mode", "userspace", "--", "true"},
	} {
		if _, err := parseNodeArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The overlay changes only what an operator changes: deploy/'s image and
// the API server's address.
func TestOverlayKustomization(t *testing.T) {
	k, err := overlayKustomization("../../deploy", "localhost:5000/team/ipvsplane:v1.2", 6443)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- ../../deploy\n",
		"newName: localhost:5000/team/ipvsplane\n",
		`newTag: "v1.2"`,
		`value: "control-plane.cluster.test"`,
		`value: "6443"`,
	} {
		if !strings.Contains(k, want) {
			t.Errorf("the overlay lacks %q:\n%s", want, k)
		}
	}
	if _, err := overlayKustomization("../deploy", "localhost:5000/ipvsplane", 1); err == nil {
		t.Error("an image reference without a tag was accepted")
	}
}

// One node's namespace is made as it always was: its tap device holds
// the namespace's addresses and takes all the pod ranges. Two nodes'
// taps are ports of a bridge, which holds the addresses; their pod ranges
// are routed as the controller manager gives them.
func TestNodeNetnsSetup(t *testing.T) {
	one := []string{
		"netns add ns",
		"-n ns link set lo up",
		"-n ns tuntap add dev tap0 mode tap",
		"-n ns addr add 10.0.2.2/24 dev tap0",
		"-n ns link set tap0 up",
		"-n ns route add 10.244.0.0/16 via 10.0.2.15",
		"-n ns route add 10.96.0.0/12 via 10.0.2.15",
		"-n ns route add 192.0.2.0/24 via 10.0.2.15",
		"-n ns addr add fd00:10:2::2/64 dev tap0 nodad",
		"-n ns route add fd00:10:244::/56 via fd00:10:2::15",
		"-n ns route add fd00:10:96::/108 via fd00:10:2::15",
		"-n ns route add 2001:db8::/64 via fd00:10:2::15",
		"-n ns addr add 203.0.113.2/32 dev lo",
		"-n ns addr add 2001:db8:ff::2/128 dev lo nodad",
	}
	if got := joinEach(nodeNetnsSetup("ns", 1)); !slices.Equal(got, one) {
		t.Errorf("one node:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(one, "\n"))
	}
	two := strings.Join(joinEach(nodeNetnsSetup("ns", 2)), "\n")
	for _, want := range []string{
		"-n ns link set tap0 master br0 up", "-n ns link set tap1 master br0 up",
		"-n ns addr add 10.0.2.2/24 dev br0", "-n ns addr add fd00:10:2::2/64 dev br0 nodad",
		"net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1",
	} {
		if !strings.Contains(two, want) {
			t.Errorf("two nodes lack %q:\n%s", want, two)
		}
	}
	if strings.Contains(two, "10.244.0.0/16") || strings.Contains(two, "fd00:10:244::/56") {
		t.Errorf("two nodes route all pod ranges to one:\n%s", two)
	}
}

func joinEach(cmds [][]string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = strings.Join(c, " ")
	}
	return out
}

// The second node follows the first: its name, addresses, tap device and
// MAC address its own.
func TestNewNodeVMs(t *testing.T) {
	vms, err := newNodeVMs(2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %s %s; %s %s %s %s %s",
		vms[0].name, vms[0].ip, vms[0].ip6, vms[0].tap, vms[0].mac, vms[1].name, vms[1].ip, vms[1].ip6, vms[1].tap, vms[1].mac)
	want := "kubenode 10.0.2.15 fd00:10:2::15 tap0 52:54:00:12:34:56; kubenode2 10.0.2.16 fd00:10:2::16 tap1 52:54:00:12:34:57"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A node that is not Ready in time is a notReadyError (which makes run
// boot the cluster once more) naming the node and ending with its
// console's last lines, as the serial console wrote them.
func TestNotReadyErrorShowsConsoleTail(t *testing.T) {
	vms, err := newNodeVMs(2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var console strings.Builder
	for i := range 40 {
		fmt.Fprintf(&console, "line %d\r\n", i)
	}
	console.WriteString("watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kubelet:312]\r\n")
	if err := os.WriteFile(vms[1].console, []byte(console.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	err = fmt.Errorf("%w\nlogs", &notReadyError{vm: vms[1], why: "registered", err: context.DeadlineExceeded})
	var stuck *notReadyError
	if !errors.As(err, &stuck) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v is not a notReadyError wrapping the deadline", err)
	}
	msg := err.Error()
	for _, want := range []string{"node kubenode2 not Ready (registered)", "line 11\n", "stuck for 22s! [kubelet:312]\nlogs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "line 10\n") || strings.Contains(msg, "\r") {
		t.Errorf("message has more than the last 30 lines, or carriage returns:\n%s", msg)
	}
}

// A node's VM writes a heartbeat on its third serial port, from its init's
// first steps, which vmtest watches through the file and answers through
// the QMP socket; its kernel reports lockups and hung tasks with their
// backtraces, and panics on the NMI a silent node gets.
func TestNodeHeartbeat(t *testing.T) {
	vms, err := newNodeVMs(1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := vms[0]
	args := nodeQemuArgs(vm, "file=disk.img", "vmlinuz", "initrd.gz", 2048)
	serials := []string{}
	for i, a := range args {
		if a == "-serial" {
			serials = append(serials, args[i+1])
		}
	}
	if want := []string{"file:" + vm.console, "file:" + vm.logFile, "file:" + vm.files.heartbeat}; !slices.Equal(serials, want) {
		t.Errorf("serial ports %q, want %q", serials, want)
	}
	if i := slices.Index(args, "-qmp"); i < 0 || args[i+1] != "unix:"+vm.files.qmp+",server=on,wait=off" {
		t.Errorf("no QMP socket in %q", args)
	}
	cmdline := args[slices.Index(args, "-append")+1]
	for _, want := range []string{" loglevel=7 ", " " + lockupReports + " ", " " + unknownNMIPanics + " ", " " + hungTaskReports + " "} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("kernel command line %q lacks %q", cmdline, want)
		}
	}
	if strings.Contains(cmdline, "softlockup_panic") {
		t.Errorf("kernel command line %q: a node that no one boots again panics on a soft lockup that may pass", cmdline)
	}
	init, err := nodeFiles.ReadFile("node/init-node")
	if err != nil {
		t.Fatal(err)
	}
	loop := heartbeatLoop("/dev/ttyS2")
	if i := strings.Index(string(init), loop); i < 0 || i > strings.Index(string(init), "modprobe") {
		t.Errorf("node/init-node does not start %q before it loads modules", loop)
	}
}
