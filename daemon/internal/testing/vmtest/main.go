// Command vmtest runs a Go test binary inside a virtual machine with a real
// Linux kernel that has IPVS, the dummy driver and the rest of what
// ipvsplane programs, none of which the host kernel offers. It is meant for
// go test's -exec flag:
//
//	CGO_ENABLED=0 go test -tags vmtest -exec bin/vmtest ./ipvs/...
//
// go test builds the package's test binary and calls vmtest with its path
// and arguments, in the package's directory. vmtest packs the binary, the
// package's testdata/, busybox and the kernel modules into an initramfs,
// boots Debian's cloud kernel under qemu (software emulation: a stock
// kernel hangs under KVM on these machines), streams the test's output
// line by line and exits with its status.
//
// The kernel's console is apart from the test's, so that its messages
// never break into the test's lines; vmtest prints, marked "guest kernel:",
// its reports of trouble (soft lockups and hung tasks with their
// backtraces, Oopses, panics) as they come. A run that does not end in
// time is stopped: when its limit passes, or vmtest gets SIGQUIT (go
// test's, after its timeout), SIGTERM or SIGINT, vmtest says which tests
// were running (go test -v's === RUN lines tell), asks the guest's test for
// a goroutine dump (not on SIGTERM or SIGINT), kills qemu, prints the
// guest's last lines and exits non-zero. qemu dies with vmtest, so that it
// never holds go test's output open. A guest that stops writing its
// heartbeat, its vCPUs locked up with interrupts off, gets an NMI, on
// which its kernel panics with a backtrace, and the test runs again in a
// fresh guest (silence.go).
//
// Environment:
//
//	IPVSPLANE_CACHE  where hack/fetch-vm-kernel put the kernel (default ~/.cache/ipvsplane)
//	VMTEST_KERNEL    which of its kernels to boot: 5.10, 6.1 (default) or 6.12
//	VMTEST_MEM       guest memory in MiB (default 1024)
//	VMTEST_CPUS      guest CPUs (default 2)
//	VMTEST_NET=1     give the guest eth0 on qemu's user network (10.0.2.15/24),
//	                 restricted: nothing the guest sends leaves qemu except
//	                 to the control plane's forwards (see below)
//	VMTEST_TOOLS     more host programs to copy in, besides testdata/vmtest-tools
//	VMTEST_CMDLINE   more kernel parameters, besides testdata/vmtest-cmdline
//	                 (one or more a line, # comments), such as ipv6.disable=1
//	VMTEST_TIMEOUT   a limit for the whole run (default: 30 s before go test
//	                 kills vmtest for the test's -test.timeout, which is that
//	                 timeout plus a minute or a tenth of it, whichever is longer)
//	VMTEST_VERBOSE=1 print the firmware's and all the kernel's messages too
//	VMTEST_SILENCE   how long a guest may write no heartbeat before it gets
//	                 an NMI (default 3m)
//
// A package whose testdata/ holds vmtest-controlplane gets a Kubernetes
// control plane (etcd and kube-apiserver, see internal/controlplane) on the
// host's loopback and the guest network to reach it: qemu forwards
// connections to controlplane.GuestForwardAddr (the API server and the
// harness's request server) to the host's loopback, one vmtest -relay
// process per connection. Its tests find it with controlplane.FromVM.
//
// A guest with a network also gets controlplane.HostTargetsEnv: addresses
// on the host (its loopback as 10.0.2.2 and its own addresses) where vmtest
// listens for TCP and echoes UDP, for tests showing the guest cannot reach
// them.
//
// Variables named CI, GODEBUG, GOTRACEBACK, GOGC, GOMEMLIMIT and IPVSPLANE_* reach
// the test (and the programs it starts: the garbage collector's settings
// are for comparing those of a daemon under test).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// defaultKernel is the kernel series a run boots unless VMTEST_KERNEL names
// another: Debian 12's.
const defaultKernel = "6.1"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 2 && args[0] == relayFlag {
		return relay(args[1])
	}
	if len(args) > 0 && args[0] == nodeFlag {
		return runNode(args[1:])
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: vmtest TEST-BINARY [ARGS...]  (normally: go test -exec vmtest)")
		return 2
	}
	status, err := runInVM(args[0], args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: %v\n", err)
		return 1
	}
	return status
}

// newGuest is the guest for a test binary and its arguments, run in its
// package's directory: its testdata/, the tools it lists, the variables
// that reach it.
func newGuest(release, binary string, args []string) (guest, error) {
	tools, err := readToolList("testdata/vmtest-tools", os.Getenv("VMTEST_TOOLS"))
	if err != nil {
		return guest{}, err
	}
	// The same format: words, one or more a line, with # comments.
	cmdline, err := readToolList("testdata/vmtest-cmdline", os.Getenv("VMTEST_CMDLINE"))
	if err != nil {
		return guest{}, err
	}
	g := guest{
		release: release,
		binary:  binary,
		args:    guestArgs(args),
		env:     guestEnv(os.Environ()),
		tools:   tools,
		cmdline: cmdline,
		network: os.Getenv("VMTEST_NET") == "1",
	}
	if info, err := os.Stat("testdata"); err == nil && info.IsDir() {
		g.testdata, _ = filepath.Abs("testdata")
	}
	return g, nil
}

// guestAttempts is how many times a test whose guest kernel panicked is
// run, each time in a fresh guest (and control plane).
const guestAttempts = 3

// errGuestPanicked marks a run whose guest kernel panicked, errGuestSilent
// one whose guest stopped writing its heartbeat and did not panic on the
// NMI vmtest sent it (watchHeartbeat).
var (
	errGuestPanicked = errors.New("the guest kernel panicked")
	errGuestSilent   = errors.New("the guest went silent and did not panic on an NMI")
)

// lockupPanics makes a guest kernel whose CPUs stay stuck in the kernel
// for a minute (twice watchdog_thresh) panic, so that runInVM boots it
// again, instead of leaving the test hung until its timeout. Under TCG
// both vCPUs of a 6.1 guest once locked up, one in ksoftirqd and one in
// ipvsplane's first system calls of a 10,000-service sync, for good
// (517 s when it was stopped), in a soak that had passed the same way
// many times.
//
// With softlockup_all_cpu_backtrace, every CPU's backtrace comes before
// the panic, so that a test that hangs in the kernel shows where.
const lockupPanics = "softlockup_panic=1 " + lockupReports

// lockupReports makes a guest kernel whose CPUs stay stuck in the kernel
// for a minute print every CPU's backtrace, and go on.
const lockupReports = "watchdog_thresh=30 softlockup_all_cpu_backtrace=1"

// hungTaskReports makes the guest kernel report a task blocked in the
// kernel (state D) for a minute, with its backtrace, on its console: a test
// stuck in a system call names where. Such a task may yet go on, so the
// kernel does not panic.
const hungTaskReports = "sysctl.kernel.hung_task_timeout_secs=60 hung_task_panic=0"

// runInVM runs the test binary in a guest. A guest kernel that panics is
// booted again with the test: under qemu's TCG the 6.12 kernel now and
// then faults with an int3 Oops where it patches its own text (static
// keys enabled at boot or when a module is first used), and a guest's
// CPUs may lock up for good (lockupPanics), which is the emulator's
// doing, not the test's. A panic the test itself causes comes back every
// time, and still fails. The attempts share the run's limit, and a signal
// ends them all.
func runInVM(binary string, args []string) (int, error) {
	limit, err := runLimit(args)
	if err != nil {
		return 0, err
	}
	ctx, stop := stopContext(limit)
	defer stop()
	for attempt := 1; ; attempt++ {
		status, err := runOnce(ctx, binary, args)
		if !errors.Is(err, errGuestPanicked) && !errors.Is(err, errGuestSilent) || attempt == guestAttempts || ctx.Err() != nil {
			return status, err
		}
		fmt.Fprintf(os.Stderr, "vmtest: %v\nvmtest: running %s again in a fresh guest (attempt %d of %d)\n", err, filepath.Base(binary), attempt+1, guestAttempts)
	}
}

// runOnce runs the test binary in one guest, until it ends or ctx does.
func runOnce(ctx context.Context, binary string, args []string) (int, error) {
	kernelDir, release, err := findKernel()
	if err != nil {
		return 0, err
	}
	g, err := newGuest(release, binary, args)
	if err != nil {
		return 0, err
	}
	cp, err := startControlPlane(ctx)
	if err != nil {
		return 0, err
	}
	if cp != nil {
		defer cp.close()
		g.network = true
		g.env = append(g.env, cp.guestEnv())
		g.forwards = cp.forwards()
	}
	if g.network {
		targets, err := startHostTargets()
		if err != nil {
			return 0, err
		}
		defer targets.close()
		g.env = append(g.env, targets.guestEnv())
	}
	self, err := selfPath()
	if err != nil {
		return 0, err
	}

	work, err := os.MkdirTemp("", "vmtest-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	initrd := filepath.Join(work, "initrd.gz")
	packStart := time.Now()
	if err := buildInitramfs(g, kernelDir, filepath.Join(work, "stage"), initrd); err != nil {
		return 0, fmt.Errorf("building the initramfs: %w", err)
	}
	packTime := time.Since(packStart)

	name := filepath.Base(binary)
	if ctx.Err() != nil {
		return 0, fmt.Errorf("%s: %v before the guest booted", name, context.Cause(ctx))
	}
	files := guestFiles{status: filepath.Join(work, "status"), heartbeat: filepath.Join(work, "heartbeat"), qmp: filepath.Join(work, "qmp")}
	start := time.Now()
	res, waitErr, err := boot(ctx, qemuArgs(g, self, filepath.Join(kernelDir, "vmlinuz"), initrd, files), files)
	if err != nil {
		return 0, err
	}
	total := time.Since(start)
	status, haveStatus := readStatus(files.status)

	switch {
	case res.stopped != nil:
		return 0, fmt.Errorf("%s: stopped: %v\n%s", name, context.Cause(ctx), res.stopped.report())
	case res.panicked:
		return 0, fmt.Errorf("%s: %w\n%s", name, errGuestPanicked, res.report())
	case res.silent:
		return 0, fmt.Errorf("%s: %w\n%s", name, errGuestSilent, res.report())
	case !haveStatus:
		return 0, fmt.Errorf("%s: the guest stopped without reporting the test's exit status (qemu: %v)\n%s", name, waitErr, res.report())
	}
	fmt.Fprintf(os.Stderr, "vmtest: %s on %s: initramfs %v, boot %v, test %v, exit status %d; %s\n",
		name, release, packTime.Round(10*time.Millisecond), res.booted.Sub(start).Round(10*time.Millisecond),
		(total - res.booted.Sub(start)).Round(10*time.Millisecond), status, cpuUse(res.cpu, total, envInt("VMTEST_CPUS", 2)))
	return status, nil
}

// bootResult is how a guest ended: what its consoles told, and when it
// was stopped before it ended, what they had told by then.
type bootResult struct {
	consoleResult
	stopped *consoleResult
	// cpu is the CPU time qemu used, its vCPUs' and its own.
	cpu time.Duration
	// silent is true when the guest stopped writing its heartbeat.
	silent bool
}

// guestFiles are the host's ends of a guest's channels: the file its
// test's exit status is written to, its heartbeat's, and qemu's QMP
// socket.
type guestFiles struct{ status, heartbeat, qmp string }

// cpuUse says how busy a guest's vCPUs were over its run: a guest that
// sits idle leaves the machine's cores to another one, so a slow test
// that keeps its guest idle can share the machine.
func cpuUse(cpu, wall time.Duration, vcpus int) string {
	busy := 0.0
	if wall > 0 && vcpus > 0 {
		busy = 100 * cpu.Seconds() / wall.Seconds() / float64(vcpus)
	}
	return fmt.Sprintf("qemu used %v of CPU, %.0f%% of %d vCPUs", cpu.Round(time.Second), busy, vcpus)
}

// boot runs qemu with args, streams the test's console and the kernel's
// until qemu ends, and stops the guest when ctx ends first (stopGuest);
// qemuExit is how qemu ended, err that it could not start. A guest that
// wrote the test's status to files.status and has not powered off within
// poweroffGrace is stopped, and one that stops writing its heartbeat gets
// an NMI (watchHeartbeat).
func boot(ctx context.Context, args []string, files guestFiles) (res bootResult, qemuExit error, err error) {
	limits, err := heartbeatLimitsFromEnv()
	if err != nil {
		return bootResult{}, nil, err
	}
	kernelOut, kernelIn, err := os.Pipe()
	if err != nil {
		return bootResult{}, nil, err
	}
	defer kernelOut.Close()
	cmd := exec.Command("qemu-system-x86_64", args...)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{kernelIn} // fd 3, the kernel's console (qemuArgs)
	// qemu ends with vmtest, even one killed before it could stop the
	// guest: a qemu left behind keeps go test's output pipe open, and go
	// test waits for it. Its own process group takes no signal meant for
	// vmtest's (a terminal's ^C), and kill ends all of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	console, err := cmd.StdoutPipe()
	if err != nil {
		return bootResult{}, nil, err
	}
	input, err := cmd.StdinPipe()
	if err != nil {
		return bootResult{}, nil, err
	}
	err = cmd.Start()
	kernelIn.Close()
	if err != nil {
		return bootResult{}, nil, fmt.Errorf("starting qemu (apt-get install qemu-system-x86): %w", err)
	}
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	log, verbose := &guestLog{}, os.Getenv("VMTEST_VERBOSE") == "1"
	kernelDone := make(chan struct{})
	go func() {
		defer close(kernelDone)
		readKernelConsole(kernelOut, os.Stderr, verbose, log)
	}()
	exited, poweroffStopped, stopped := make(chan struct{}), make(chan bool, 1), make(chan *consoleResult, 1)
	silent := make(chan bool, 1)
	go func() { silent <- watchHeartbeat(files.heartbeat, files.qmp, limits, exited, kill) }()
	go func() { poweroffStopped <- stopAfterStatus(files.status, exited, poweroffGrace, kill) }()
	go func() { stopped <- stopGuest(ctx, exited, input, log, kill) }()
	readTestConsole(console, os.Stdout, verbose, log)
	qemuExit = cmd.Wait()
	close(exited)
	<-kernelDone
	if <-poweroffStopped {
		fmt.Fprintf(os.Stderr, "vmtest: the guest had not powered off %v after the test ended; stopped\n", poweroffGrace)
	}
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return bootResult{consoleResult: log.result(), stopped: <-stopped, cpu: cpu, silent: <-silent}, qemuExit, nil
}

// poweroffGrace is how long a guest has to power off once its test has
// ended. Powering off takes a second; a 12 GiB guest once spun at full
// CPU for 9 minutes after its benchmark had reported.
const poweroffGrace = time.Minute

// stopAfterStatus waits until statusFile holds a status, then for up to
// grace until exited is closed, and calls kill if it is not; it reports
// whether it did. It returns at once when exited is closed first.
func stopAfterStatus(statusFile string, exited <-chan struct{}, grace time.Duration, kill func()) bool {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return false
		case <-tick.C:
		}
		if _, ok := readStatus(statusFile); ok {
			break
		}
	}
	select {
	case <-exited:
		return false
	case <-time.After(grace):
		kill()
		return true
	}
}

// findKernel returns the directory hack/fetch-vm-kernel unpacked the
// kernel series $VMTEST_KERNEL (default 6.1) into, and the release in it.
func findKernel() (dir, release string, err error) {
	cache, err := controlplane.CacheBase()
	if err != nil {
		return "", "", err
	}
	series := os.Getenv("VMTEST_KERNEL")
	if series == "" {
		series = defaultKernel
	}
	current, err := os.ReadFile(filepath.Join(cache, "kernel", "current-"+series))
	if err != nil {
		return "", "", fmt.Errorf("no VM kernel %s in %s (run make vm-kernel KERNEL=%s): %w", series, cache, series, err)
	}
	release = strings.TrimSpace(string(current))
	return filepath.Join(cache, "kernel", release), release, nil
}

// guestArgs drops the arguments that name host paths the guest lacks, which
// go test adds for its result cache.
func guestArgs(args []string) []string {
	var out []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-test.testlogfile="),
			strings.HasPrefix(a, "-test.outputdir="),
			strings.HasPrefix(a, "-test.gocoverdir="):
			continue
		}
		out = append(out, a)
	}
	return out
}

func guestEnv(environ []string) []string {
	env := []string{"HOME=/root", "TMPDIR=/tmp", "IPVSPLANE_VM=1"}
	for _, kv := range environ {
		key, _, _ := strings.Cut(kv, "=")
		switch {
		case key == "CI", key == "GODEBUG", key == "GOTRACEBACK", key == "GOGC", key == "GOMEMLIMIT":
		case strings.HasPrefix(key, "IPVSPLANE_") && key != "IPVSPLANE_CACHE" && key != "IPVSPLANE_VM":
		default:
			continue
		}
		env = append(env, kv)
	}
	return env
}

// readStatus reads the exit status the guest wrote to its second serial port.
func readStatus(file string) (int, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return n, err == nil
}

// qemuArgs returns qemu's command line; self is this program, which qemu
// starts as the relay of each forwarded connection.
func qemuArgs(g guest, self, kernel, initrd string, files guestFiles) []string {
	mem, cpus := envInt("VMTEST_MEM", 1024), envInt("VMTEST_CPUS", 2)
	nic := "none"
	if g.network {
		// restrict=on: slirp drops every packet from the guest except
		// those to the forwards, so test traffic never leaves the
		// machine, whatever the guest routes out of eth0.
		opts := []string{"user", "model=virtio-net-pci", "restrict=on"}
		for _, f := range g.forwards {
			opts = append(opts, f.option(self))
		}
		nic = strings.Join(opts, ",")
	}
	return []string{
		"-accel", "tcg", "-cpu", "max",
		"-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem),
		"-nographic", "-no-reboot",
		// ttyS0 is the test's console, its input how vmtest asks for
		// a goroutine dump (stopGuest); ttyS1 takes the exit status,
		// ttyS2 the kernel's console on the pipe boot passes as fd 3,
		// ttyS3 the heartbeat (watchHeartbeat), which sends an NMI
		// through the QMP socket.
		"-serial", "mon:stdio", "-serial", "file:" + files.status, "-serial", "file:/dev/fd/3",
		"-serial", "file:" + files.heartbeat, "-qmp", "unix:" + files.qmp + ",server=on,wait=off",
		"-nic", nic,
		"-kernel", kernel, "-initrd", initrd,
		"-append", strings.Join(append([]string{"console=ttyS2 loglevel=7 panic=-1 " + lockupPanics + " " + unknownNMIPanics + " " + hungTaskReports + " rdinit=/init"}, g.cmdline...), " "),
	}
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}
