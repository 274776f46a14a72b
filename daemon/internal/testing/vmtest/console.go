package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// tailLines is how many of the guest's last lines an error or a stopped
// run quotes.
const tailLines = 25

// incidentLines is how many kernel lines after a report of trouble (a
// lockup, a hung task, an Oops) are printed, to cover its backtraces.
const incidentLines = 200

// kernelPrefix marks the kernel's lines in vmtest's output and in the
// guest's last lines, apart from the test's.
const kernelPrefix = "guest kernel: "

var (
	// kernelIncident is the first line of a kernel's report of trouble.
	kernelIncident = regexp.MustCompile(`BUG: |WARNING: |Oops|Kernel panic|blocked for more than|soft lockup|hard LOCKUP|rcu: INFO|rcu_.* detected stall|NMI backtrace|NMI received for unknown reason|general protection fault|unable to handle`)
	// A test starts, resumes or logs (=== RUN/CONT/NAME) or pauses or
	// ends (=== PAUSE, --- PASS/FAIL/SKIP), as go test -v prints. Under
	// go test -json the lines begin with a ^V.
	testRuns  = regexp.MustCompile(`^\x16?=== (?:RUN|CONT|NAME)\s+(\S+)`)
	testStops = regexp.MustCompile(`^\x16?(?:=== PAUSE\s+|\s*--- (?:PASS|FAIL|SKIP): )(\S+)`)
)

// guestLog is what the guest's two streams, the test's console and the
// kernel's, told so far. It is read while they are still being written:
// a run stopped early reports the tests running and the last lines.
type guestLog struct {
	mu       sync.Mutex
	booted   time.Time // when the test started
	panicked bool
	running  []string // tests started and not ended, in order
	last     []string // the last tailLines lines of both streams
}

func (l *guestLog) add(line string) {
	l.last = append(l.last, line)
	if len(l.last) > tailLines {
		l.last = slices.Delete(l.last, 0, len(l.last)-tailLines)
	}
}

// testLine records a line of the test's output.
func (l *guestLog) testLine(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(line)
	if m := testRuns.FindStringSubmatch(line); m != nil && !slices.Contains(l.running, m[1]) {
		l.running = append(l.running, m[1])
	} else if m := testStops.FindStringSubmatch(line); m != nil {
		l.running = slices.DeleteFunc(l.running, func(name string) bool { return name == m[1] })
	}
}

// bootLine records a line of the test's console before the test started.
func (l *guestLog) bootLine(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(line)
}

// kernelLine records a line of the kernel's console.
func (l *guestLog) kernelLine(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(kernelPrefix + line)
	if strings.Contains(line, "Kernel panic") {
		l.panicked = true
	}
}

func (l *guestLog) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.booted = time.Now()
}

// result is a copy of what the guest told so far.
func (l *guestLog) result() consoleResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return consoleResult{booted: l.booted, panicked: l.panicked, running: slices.Clone(l.running), last: slices.Clone(l.last)}
}

// consoleResult is what the guest's console told.
type consoleResult struct {
	booted   time.Time
	panicked bool
	running  []string // the tests running at the end
	last     []string // the last lines of the test's output and the kernel's
}

// runningTests names the tests that were running, for a run cut short.
func (r consoleResult) runningTests() string {
	switch {
	case r.booted.IsZero():
		return "the guest had not started the test"
	case len(r.running) == 0:
		return "no test was running (go test -v names them)"
	}
	return "running " + strings.Join(r.running, ", ")
}

// report is the lines vmtest prints about a run cut short or failed: the
// running tests and the guest's last lines, each line marked as vmtest's
// (hack/testfailures quotes them).
func (r consoleResult) report() string {
	lines := []string{"vmtest: " + r.runningTests()}
	if len(r.last) > 0 {
		lines = append(lines, "vmtest: the guest's last lines:")
	}
	for _, l := range r.last {
		lines = append(lines, "vmtest: | "+l)
	}
	return strings.Join(lines, "\n")
}

// readTestConsole copies the test's output from its console to out and
// records it in log. Lines before the start marker are the firmware's,
// printed only when verbose.
func readTestConsole(console io.Reader, out io.Writer, verbose bool, log *guestLog) {
	started := false
	readLines(console, "the test's console", func(line string) {
		switch {
		case !started && strings.HasSuffix(line, startMarker):
			started = true
			log.start()
		case !started:
			log.bootLine(line)
			if verbose {
				fmt.Fprintln(out, line)
			}
		default:
			fmt.Fprintln(out, line)
			log.testLine(line)
		}
	})
}

// readKernelConsole records the kernel's console in log and copies to out
// the reports of trouble and the lines after them (incidentLines), or
// every line when verbose.
func readKernelConsole(console io.Reader, out io.Writer, verbose bool, log *guestLog) {
	incident := 0
	readLines(console, "the kernel's console", func(line string) {
		log.kernelLine(line)
		if kernelIncident.MatchString(line) {
			incident = incidentLines
		}
		if verbose || incident > 0 {
			fmt.Fprintln(out, kernelPrefix+line)
		}
		incident = max(incident-1, 0)
	})
}

// readLines calls each with each line of r as it arrives, until r ends.
func readLines(r io.Reader, what string, each func(string)) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if err == nil || line != "" {
			each(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "vmtest: reading %s: %v\n", what, err)
			}
			return
		}
	}
}
