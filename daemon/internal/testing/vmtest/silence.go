package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"
)

// The guest's init writes a line to its heartbeat port (ttyS3) every
// heartbeatEvery, from a shell at the highest priority (busybox has
// renice, not nice). A guest that writes none for its silence limit
// (VMTEST_SILENCE, default defaultSilence; before the first, bootSilence)
// is stuck in its kernel: under TCG both vCPUs of a guest have locked up
// for good, and with interrupts off neither the soft lockup detector nor
// the test's own timeout can fire, nor can the guest's init answer a
// stop. vmtest then sends the guest an NMI, which no interrupt mask holds
// back; the kernel panics on it (unknownNMIPanics) and prints the
// interrupted CPU's backtrace, and the test runs again in a fresh guest,
// as after any panic.
const (
	heartbeatEvery = 5 * time.Second
	defaultSilence = 3 * time.Minute
)

// heartbeatLimits are how long a guest may stay silent: from qemu's start
// to its first heartbeat (boot), between heartbeats (silence), and after
// the NMI, until it is killed (nmiGrace).
type heartbeatLimits struct{ boot, silence, nmiGrace time.Duration }

// A boot to the init takes 5 to 30 s, a minute on a loaded machine; a
// panic on an NMI, a second.
const (
	bootSilence = 3 * time.Minute
	nmiGrace    = 30 * time.Second
)

// unknownNMIPanics makes the guest kernel panic on an NMI no hardware
// claims, the one vmtest sends a silent guest.
const unknownNMIPanics = "unknown_nmi_panic"

// heartbeatPIDFile is where the guest's init keeps its heartbeat's PID;
// vmtest's own test stops the heartbeat through it.
const heartbeatPIDFile = "/run/vmtest-heartbeat.pid"

// heartbeatLoop writes the heartbeat to tty in the background; the
// shell's $! is its PID.
func heartbeatLoop(tty string) string {
	return fmt.Sprintf("(while :; do echo; sleep %d; done) >%s 2>/dev/null &\n", int(heartbeatEvery.Seconds()), tty)
}

// heartbeatScript starts a test guest's heartbeat on ttyS3. It runs before
// the modules load, so a guest stuck from its first module on is caught
// too. A cluster node's init (node/init-node) starts the same loop on its
// ttyS2.
func heartbeatScript() string {
	return heartbeatLoop("/dev/ttyS3") + fmt.Sprintf("echo $! >%s\nrenice -n -20 -p $! >/dev/null\n", heartbeatPIDFile)
}

// heartbeatLimitsFromEnv are the limits, the silence between heartbeats
// VMTEST_SILENCE or defaultSilence.
func heartbeatLimitsFromEnv() (heartbeatLimits, error) {
	l := heartbeatLimits{boot: bootSilence, silence: defaultSilence, nmiGrace: nmiGrace}
	if v := os.Getenv("VMTEST_SILENCE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*heartbeatEvery {
			return l, fmt.Errorf("VMTEST_SILENCE=%q: not a duration of at least %v", v, 2*heartbeatEvery)
		}
		l.silence = d
	}
	return l, nil
}

// watchHeartbeat waits until exited is closed. If the heartbeat file does
// not grow for its limit, it says so, sends the guest an NMI through
// qemu's QMP socket, and kills the guest if it has not ended within the
// grace. It reports whether the guest went silent.
func watchHeartbeat(file, qmp string, limits heartbeatLimits, exited <-chan struct{}, kill func()) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var size int64
	last, limit, since := time.Now(), limits.boot, "since it started"
	for {
		select {
		case <-exited:
			return false
		case <-tick.C:
		}
		if info, err := os.Stat(file); err == nil && info.Size() != size {
			size, last, limit, since = info.Size(), time.Now(), limits.silence, "since its last"
		}
		if time.Since(last) >= limit {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "vmtest: the guest wrote no heartbeat in the %v %s: it is stuck in its kernel; sending it an NMI, on which it panics with its CPU's backtrace\n", limit, since)
	if err := injectNMI(qmp); err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: sending the NMI: %v\n", err)
	}
	select {
	case <-exited:
	case <-time.After(limits.nmiGrace):
		fmt.Fprintf(os.Stderr, "vmtest: the guest had not ended %v after the NMI; killed\n", limits.nmiGrace)
		kill()
	}
	return true
}

// injectNMI asks qemu, through its QMP socket, to send every vCPU an NMI.
func injectNMI(socket string) error {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	// qemu greets first; each command then gets its return or error,
	// perhaps after events.
	if _, err := r.ReadBytes('\n'); err != nil {
		return fmt.Errorf("reading qemu's greeting: %w", err)
	}
	for _, command := range []string{"qmp_capabilities", "inject-nmi"} {
		if err := qmpExecute(conn, r, command); err != nil {
			return fmt.Errorf("%s: %w", command, err)
		}
	}
	return nil
}

// qmpExecute sends one QMP command and waits for its answer.
func qmpExecute(conn net.Conn, r *bufio.Reader, command string) error {
	if _, err := fmt.Fprintf(conn, "{\"execute\": %q}\n", command); err != nil {
		return err
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		var answer struct {
			Return *json.RawMessage
			Error  *struct{ Desc string }
		}
		if err := json.Unmarshal(line, &answer); err != nil {
			return fmt.Errorf("qemu answered %q: %w", line, err)
		}
		switch {
		case answer.Error != nil:
			return fmt.Errorf("qemu: %s", answer.Error.Desc)
		case answer.Return != nil:
			return nil
		}
	}
}
