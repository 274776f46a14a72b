package main

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// startMarker is the console line that separates boot messages from the
// test's output. The exit status goes to the second serial port, so it never
// mixes with what the test prints.
const startMarker = "vmtest-start"

// guest is what one run puts in the VM.
type guest struct {
	release  string   // kernel release, for /lib/modules
	binary   string   // the test binary on the host
	args     []string // its arguments
	env      []string // KEY=value pairs for the test
	testdata string   // the package's testdata directory, if any
	tools    []string // host programs or paths to copy in
	network  bool     // bring up eth0 on qemu's user network
	forwards []guestForward
	// cmdline are more kernel parameters, such as ipv6.disable=1.
	cmdline []string
}

// buildInitramfs writes the gzip-compressed initramfs for g to dst, using
// stage as scratch space.
func buildInitramfs(g guest, kernelDir, stage, dst string) error {
	a := newArchive()
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/sbin", "/usr/sbin", "/usr/bin", "/etc"} {
		a.dir(d)
	}
	if err := a.copy("/bin/busybox", "/bin/busybox"); err != nil {
		return fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	// The kernel autoloads modules through /sbin/modprobe.
	a.symlink("/sbin/modprobe", "/bin/busybox")
	for _, f := range []string{"/etc/protocols", "/etc/services", "/etc/nsswitch.conf"} {
		if _, err := os.Stat(f); err == nil {
			if err := a.copy(f, f); err != nil {
				return err
			}
		}
	}
	a.file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.file("/etc/group", 0o644, []byte("root:x:0:\n"))

	if err := stageModules(kernelDir, g.release, stage, moduleDirs); err != nil {
		return fmt.Errorf("kernel modules: %w", err)
	}
	if err := a.addTree(filepath.Join(stage, "lib/modules"), "/lib/modules"); err != nil {
		return err
	}
	for _, tool := range g.tools {
		if err := a.addTool(tool); err != nil {
			return err
		}
	}
	testBin := "/test/" + filepath.Base(g.binary)
	if err := a.copy(testBin, g.binary); err != nil {
		return err
	}
	if g.testdata != "" {
		if err := a.addTree(g.testdata, "/test/testdata"); err != nil {
			return err
		}
	}
	a.file("/init", 0o755, []byte(initScript(g, testBin)))

	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if err := a.write(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// initScript is the guest's /init: mount the pseudo file systems, load the
// modules, bring up lo (IPVS rejects real servers without a local routing
// table), run the test on its console and report its status.
func initScript(g guest, testBin string) string {
	var b strings.Builder
	b.WriteString(`#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /run/netns
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
`)
	b.WriteString(heartbeatScript())
	fmt.Fprintf(&b, "modprobe -a %s || echo 'vmtest: loading modules failed' >&2\n", strings.Join(bootModules, " "))
	// Without numdummies=0 the driver makes a stray dummy0.
	b.WriteString("modprobe dummy numdummies=0 || echo 'vmtest: loading dummy failed' >&2\n")
	b.WriteString("ip link set lo up\n")
	if g.network {
		// The default route stays: what the guest routes out of eth0
		// reaches qemu, which drops it (restrict=on) unless it is for a
		// forward.
		b.WriteString(`modprobe -a virtio_pci virtio_net
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
`)
	}
	for _, kv := range g.env {
		fmt.Fprintf(&b, "export %s\n", shellQuote(kv))
	}
	b.WriteString("cd /test\n")
	// Up to here the output went to the kernel's console (ttyS2); the
	// test's is ttyS0. A line quitRequest on it (without echo it stays
	// off the output) lists the guest's busiest processes and has the
	// kernel print every CPU's backtrace (sysrq l, on the kernel's
	// console), so that a guest whose time goes to a process other than
	// the test, a daemon it started say, or into the kernel says where;
	// then it sends the test SIGQUIT, for its goroutine dump.
	fmt.Fprintf(&b, `exec </dev/ttyS0 >/dev/ttyS0 2>&1
stty -echo
busiest() {
	echo "vmtest: the guest's busiest processes at the stop (CPU time, state, pid, name):"
	cat /proc/[0-9]*/stat 2>/dev/null | awk '%s' | sort -rn -k2 | head -%d
}
(while read -r line; do [ "$line" = %s ] && { busiest; echo l >/proc/sysrq-trigger; kill -QUIT "$(cat %s)"; }; done) </dev/ttyS0 &
echo %s
`, busiestAwk, busiestShown, quitRequest, testPIDFile, startMarker)
	// The test runs in the foreground, where SIGINT and SIGQUIT are not
	// ignored as they are for a background job, with its PID written
	// for the loop above.
	fmt.Fprintf(&b, `sh -c 'echo $$ >%s && exec "$@"' vmtest %s`, testPIDFile, shellQuote(testBin))
	for _, arg := range g.args {
		b.WriteString(" " + shellQuote(arg))
	}
	b.WriteString("\necho $? > /dev/ttyS1\nsync\npoweroff -f\n")
	return b.String()
}

// busiestAwk prints a process's CPU time (user and system, in seconds of
// the kernel's 100 ticks), state, PID and name from its /proc/PID/stat
// line. The name, in parentheses, may hold spaces: the fields are counted
// from the state after it.
const busiestAwk = `{ o = index($0, "("); if (!match($0, /\) [A-Za-z] /)) next; ` +
	`split(substr($0, RSTART + 2), f, " "); ` +
	`printf "vmtest:   %8.2f s  %s  %6d  %s\n", (f[12] + f[13]) / 100, f[1], $1, substr($0, o + 1, RSTART - o - 1) }`

// busiestShown is how many of the busiest processes the stop lists.
const busiestShown = 8

// testPIDFile is where the guest's init keeps the test's PID.
const testPIDFile = "/run/vmtest-test.pid"

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
