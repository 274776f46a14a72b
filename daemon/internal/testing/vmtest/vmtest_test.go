package main

import (
	"bytes"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The archive must read back with the cpio program, entry for entry.
func TestArchiveReadsBackWithCpio(t *testing.T) {
	cpio := testutil.RequireProgram(t, "cpio")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("copied\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := newArchive()
	a.file("/init", 0o755, []byte("#!/bin/sh\n"))
	a.symlink("/sbin/modprobe", "/bin/busybox")
	if err := a.copy("/test/x.test", src); err != nil {
		t.Fatal(err)
	}
	a.dir("/proc")
	var buf bytes.Buffer
	if err := a.write(&buf); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cpio, "-idm", "--quiet")
	cmd.Dir, cmd.Stdin = out, &buf
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v: %s", err, msg)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "test/x.test")); string(data) != "copied\n" {
		t.Errorf("test/x.test holds %q", data)
	}
	if info, err := os.Stat(filepath.Join(out, "init")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("init: %v %v", info, err)
	}
	if target, _ := os.Readlink(filepath.Join(out, "sbin/modprobe")); target != "/bin/busybox" {
		t.Errorf("sbin/modprobe links to %q", target)
	}
	if info, err := os.Stat(filepath.Join(out, "proc")); err != nil || !info.IsDir() {
		t.Errorf("proc: %v %v", info, err)
	}
}

func TestGuestArgsDropHostPaths(t *testing.T) {
	got := guestArgs([]string{"-test.v=true", "-test.testlogfile=/tmp/x/testlog.txt", "-test.run=TestA", "-test.outputdir=/tmp/y", "-test.timeout=10m0s"})
	want := []string{"-test.v=true", "-test.run=TestA", "-test.timeout=10m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("guestArgs = %q, want %q", got, want)
	}
}

func TestGuestEnvPassesOnlyWhatTestsRead(t *testing.T) {
	got := guestEnv([]string{"CI=true", "PATH=/usr/bin", "IPVSPLANE_REQUIRE_KERNEL=1", "IPVSPLANE_CACHE=/root/.cache", "HOME=/home/me"})
	want := []string{"HOME=/root", "TMPDIR=/tmp", "IPVSPLANE_VM=1", "CI=true", "IPVSPLANE_REQUIRE_KERNEL=1"}
	if !slices.Equal(got, want) {
		t.Errorf("guestEnv = %q, want %q", got, want)
	}
}

func TestInitScriptQuotesArguments(t *testing.T) {
	script := initScript(guest{args: []string{"-test.run=Test'A"}, env: []string{"CI=true"}, network: true}, "/test/x.test")
	for _, want := range []string{
		`'/test/x.test' '-test.run=Test'\''A'`,
		"exec </dev/ttyS0 >/dev/ttyS0 2>&1",
		`[ "$line" = vmtest-quit ] && { busiest; echo l >/proc/sysrq-trigger; kill -QUIT "$(cat /run/vmtest-test.pid)"; }`,
		`sh -c 'echo $$ >/run/vmtest-test.pid && exec "$@"' vmtest '/test/x.test'`,
		"export 'CI=true'",
		"ip addr add 10.0.2.15/24 dev eth0",
		"echo $? > /dev/ttyS1",
		"modprobe dummy numdummies=0",
		"(while :; do echo; sleep 5; done) >/dev/ttyS3 2>/dev/null &\necho $! >/run/vmtest-heartbeat.pid\nrenice -n -20 -p $! >/dev/null\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("init script lacks %q:\n%s", want, script)
		}
	}
	// A guest stuck from its first module on stops its heartbeat too.
	if strings.Index(script, "/dev/ttyS3") > strings.Index(script, "modprobe") {
		t.Errorf("the heartbeat starts after the modules load:\n%s", script)
	}
}

// The init script's list of the busiest processes, run by the busybox the
// guest gets over this machine's /proc: the header, then processes with
// their CPU time, most first.
func TestInitScriptListsBusiestProcesses(t *testing.T) {
	busybox := testutil.RequireProgram(t, "busybox")
	script := initScript(guest{binary: "/x.test"}, "/test/x.test")
	start := strings.Index(script, "busiest() {")
	if start < 0 {
		t.Fatalf("no busiest function in the init script:\n%s", script)
	}
	end := strings.Index(script[start:], "\n}\n")
	dir := t.TempDir()
	cmd := exec.Command(busybox, "sh", "-c", script[start:start+end+3]+"busiest")
	for _, c := range []string{"cat", "awk", "sort", "head"} {
		if err := os.Symlink(busybox, filepath.Join(dir, c)); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Env = []string{"PATH=" + dir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1+busiestShown || !strings.HasPrefix(lines[0], "vmtest: the guest's busiest processes") {
		t.Fatalf("busiest printed:\n%s", out)
	}
	row := regexp.MustCompile(`^vmtest: +([0-9]+\.[0-9]{2}) s  [A-Za-z]  +[0-9]+  .+$`)
	last := math.Inf(1)
	for _, l := range lines[1:] {
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("row %q is not CPU time, state, pid, name:\n%s", l, out)
		}
		cpu, _ := strconv.ParseFloat(m[1], 64)
		if cpu > last {
			t.Errorf("rows not busiest first:\n%s", out)
		}
		last = cpu
	}
}

// Each direction of a relayed connection carries its data and its close.
func TestRelayPassesDataAndClose(t *testing.T) {
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	go func() {
		c, err := upstream.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c) // until the guest side's close arrives
		_, _ = c.Write(append([]byte("echo: "), got...))
	}()
	guestSide, relaySide := tcpPair(t)
	done := make(chan error, 1)
	go func() { done <- relayConn(relaySide, upstream.Addr().String()) }()
	if _, err := guestSide.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := guestSide.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = guestSide.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := io.ReadAll(guestSide)
	if err != nil || string(reply) != "echo: hello" {
		t.Errorf("reply %q, %v; want \"echo: hello\" and the end", reply, err)
	}
	if err := <-done; err != nil {
		t.Errorf("relay: %v", err)
	}
}

// tcpPair returns the two ends of a loopback TCP connection, as qemu hands
// the relay its end of the guest's connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// The guest's network is restricted to the forwards, whose relay is
// vmtest itself; a comma in its path is doubled for qemu's parser.
func TestQemuNetworkIsRestricted(t *testing.T) {
	g := guest{network: true, forwards: []guestForward{
		{guest: netip.MustParseAddrPort("10.0.2.100:6443"), host: "127.0.0.1:34567"},
	}}
	args := qemuArgs(g, "/opt/a,b/vmtest", "vmlinuz", "initrd", guestFiles{status: "status", heartbeat: "heartbeat", qmp: "qmp"})
	i := slices.Index(args, "-nic")
	if i < 0 {
		t.Fatalf("no -nic in %q", args)
	}
	want := "user,model=virtio-net-pci,restrict=on,guestfwd=tcp:10.0.2.100:6443-cmd:'/opt/a,,b/vmtest' -relay 127.0.0.1:34567"
	if args[i+1] != want {
		t.Errorf("-nic %q\nwant %q", args[i+1], want)
	}
	if args := qemuArgs(guest{}, "/vmtest", "vmlinuz", "initrd", guestFiles{status: "status", heartbeat: "heartbeat", qmp: "qmp"}); !slices.Contains(args, "none") {
		t.Errorf("a guest without network got %q", args)
	}
}

// A package asks for kernel parameters in testdata/vmtest-cmdline, and a
// run adds more with VMTEST_CMDLINE; both reach the kernel's command line
// after the harness's own.
func TestKernelCommandLine(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/vmtest-cmdline", []byte("# a kernel without IPv6\nipv6.disable=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VMTEST_CMDLINE", "nokaslr")
	g, err := newGuest("6.1", "pkg.test", nil)
	if err != nil {
		t.Fatal(err)
	}
	args := qemuArgs(g, "/vmtest", "vmlinuz", "initrd", guestFiles{status: "status", heartbeat: "heartbeat", qmp: "qmp"})
	i := slices.Index(args, "-append")
	if i < 0 || !strings.HasPrefix(args[i+1], "console=ttyS2 ") || !strings.HasSuffix(args[i+1], " rdinit=/init ipv6.disable=1 nokaslr") {
		t.Errorf("kernel command line %q", args[i:])
	}
	if !strings.Contains(args[i+1], " softlockup_panic=1 ") {
		t.Errorf("kernel command line %q: a soft lockup does not panic, and the guest hangs instead of being booted again", args[i+1])
	}
	// A hung task's backtrace is printed at KERN_INFO.
	for _, want := range []string{" loglevel=7 ", " sysctl.kernel.hung_task_timeout_secs=60 ", " softlockup_all_cpu_backtrace=1 ", " unknown_nmi_panic "} {
		if !strings.Contains(args[i+1], want) {
			t.Errorf("kernel command line %q lacks %q: a stuck kernel does not say where", args[i+1], want)
		}
	}
	if j := slices.Index(args, "file:/dev/fd/3"); j < 0 || args[j-1] != "-serial" || args[j+1] != "-serial" || args[j+2] != "file:heartbeat" {
		t.Errorf("no third serial port on fd 3 for the kernel's console, then the heartbeat's, in %q", args)
	}
	if j := slices.Index(args, "-qmp"); j < 0 || args[j+1] != "unix:qmp,server=on,wait=off" {
		t.Errorf("no QMP socket to send a silent guest an NMI in %q", args)
	}
}

// A guest that reported its test's status and does not power off is
// stopped after the grace period; one that powers off, before or after
// reporting, is not.
func TestStopAfterStatus(t *testing.T) {
	for _, tt := range []struct {
		name          string
		status, exits bool
		wantKilled    bool
	}{
		{"reported and hangs", true, false, true},
		{"reported and powers off", true, true, false},
		{"stops without reporting", false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "status")
			if tt.status {
				if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			exited := make(chan struct{})
			if tt.exits {
				close(exited)
			}
			killed := false
			got := stopAfterStatus(file, exited, 50*time.Millisecond, func() { killed = true })
			if got != tt.wantKilled || killed != tt.wantKilled {
				t.Errorf("stopAfterStatus = %v (kill called: %v), want %v", got, killed, tt.wantKilled)
			}
		})
	}
}

func TestCPUUse(t *testing.T) {
	if got, want := cpuUse(90*time.Second, time.Minute, 2), "qemu used 1m30s of CPU, 75% of 2 vCPUs"; got != want {
		t.Errorf("cpuUse = %q, want %q", got, want)
	}
	if got, want := cpuUse(0, 0, 2), "qemu used 0s of CPU, 0% of 2 vCPUs"; got != want {
		t.Errorf("cpuUse of nothing = %q, want %q", got, want)
	}
}
