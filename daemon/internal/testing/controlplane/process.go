package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// process is a child program whose output goes to a log file, so that a
// failure can show its last lines.
type process struct {
	*testutil.Proc
	name string
	log  string
}

// startProcess starts path with args, logging to dir/name.log (appended to,
// so a restarted program keeps its earlier output).
func startProcess(dir, name, path string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the test binary dies without cleaning up, the kernel kills the
	// child rather than leaving a server running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	proc, err := testutil.StartProc(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &process{Proc: proc, name: name, log: logPath}, nil
}

// stop ends the process: SIGTERM, then SIGKILL if it has not exited within
// grace; with no grace, SIGKILL at once. It is a no-op for a process that
// already exited.
func (p *process) stop(grace time.Duration) {
	if grace <= 0 {
		p.Kill()
		return
	}
	_ = p.Stop(grace)
}

// exitError describes a process that exited when it should be serving,
// with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.name, p.Err(), p.log, p.tail(30))
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
