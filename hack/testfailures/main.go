// Command testfailures reads `go test -json` output on standard input,
// writes it out as the text `go test -v` prints (to standard output and to
// -log), and when it ends prints what failed in a few lines: each failed
// package, its failed tests with their first messages, the tests still
// running when it ended (a timeout or go test's kill of a hung binary)
// with their last lines, a test binary's panic, a build's errors,
// vmtest's own lines (its errors and retries; for a guest it stopped, the
// tests that were running and the guest's last lines) and the guest
// kernel's reports of trouble (a soft lockup, a hung task, a panic). CI
// shows only the tail of make test's output, and the failing test of an
// hour of verbose output is otherwise far above it.
//
//	go test -json ./... 2>&1 | go run ./hack/testfailures -brief -log bin/test-unit.log
//	go run ./hack/testfailures -summary-only < saved.json
//
// Lines that are not go test's events (another tool's output in the same
// pipe, such as hack/conformance's) are copied as they are; of them only
// vmtest's lines, a guest kernel's reports and upstream's failed specs go
// into the summary. It
// prints nothing more when nothing failed; the exit status is the
// pipeline's to carry (set -o pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// maxSummaryLines bounds the summary, so that it stays in a tail.
const maxSummaryLines = 60

// maxLineLength bounds each line the summary quotes.
const maxLineLength = 240

// messagesPerTest is how many of a failed test's messages it quotes, and
// how many last lines of a test still running.
const messagesPerTest = 3

// contextLines is how many of a package's last lines stand in for its
// failure when nothing else says what failed (the binary exited).
const contextLines = 6

// panicLines is how many lines after a "panic:" line go with it.
const panicLines = 6

var (
	// vmtest's own lines: its errors, retries and what it saw; the
	// report of a test that passed is left out.
	vmtestLine   = regexp.MustCompile(`^vmtest: `)
	vmtestPassed = regexp.MustCompile(`^vmtest: .*, exit status 0$`)
	// A guest kernel's report of trouble, as vmtest marks it (its
	// backtrace is left out), and go test's kill of a test binary.
	guestTrouble = regexp.MustCompile(`^guest kernel: .*(?:BUG: |WARNING: |Oops|Kernel panic|blocked for more than|soft lockup|rcu: INFO)`)
	testKilled   = regexp.MustCompile(`^\*\*\* Test (?:killed|I/O incomplete)`)
	// hack/conformance's failed and panicked specs, and its end when it
	// failed: upstream's specs run in the same pipe as the cluster tests.
	specFailed = regexp.MustCompile(`^\s*\[(?:FAIL|PANICKED)\] |^conformance: .*, exit status [1-9]`)
	// The lines go test -v frames a test's output with, which are not
	// its messages.
	framing = regexp.MustCompile(`^\s*(?:=== (?:RUN|NAME|CONT|PAUSE)|--- (?:PASS|FAIL|SKIP):)`)
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action      string
	Package     string
	ImportPath  string // a build-output event's package
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// testRun is what one test said.
type testRun struct {
	messages []string // its first messages
	last     []string // its last ones
	said     int      // how many it said
	ended    bool
	failed   bool
	elapsed  float64
}

// packageRun is what one package's tests said, until it ended.
type packageRun struct {
	tests   map[string]*testRun
	order   []string // the tests in the order they started
	notable []string // panics, vmtest's lines, kernel reports, kills
	recent  []string // the package's last lines
	panicTo int      // lines still to take after a panic
	// panicked: the binary panicked (a timeout's included), and what
	// follows is its goroutine dump, not the running tests' last words.
	panicked bool
}

// summary collects the failures of one run.
type summary struct {
	packages map[string]*packageRun
	builds   map[string][]string // each package's build output
	// other holds the notable lines outside go test's events since a
	// package last passed (vmtest's report of a node it booted, before
	// the tests it ran there passed, is no failure).
	other []string
	lines []string // the summary so far
}

func newSummary() *summary {
	return &summary{packages: map[string]*packageRun{}, builds: map[string][]string{}}
}

func (s *summary) pkg(name string) *packageRun {
	p := s.packages[name]
	if p == nil {
		p = &packageRun{tests: map[string]*testRun{}}
		s.packages[name] = p
	}
	return p
}

// text takes a line that is not one of go test's events.
func (s *summary) text(line string) {
	if isNotableText(line) {
		s.other = append(s.other, "  "+line)
	}
}

func isNotable(line string) bool {
	return vmtestLine.MatchString(line) && !vmtestPassed.MatchString(line) ||
		guestTrouble.MatchString(line) || testKilled.MatchString(line)
}

// isNotableText reports whether a line outside go test's events says
// something failed.
func isNotableText(line string) bool { return isNotable(line) || specFailed.MatchString(line) }

// event takes one of go test's events.
func (s *summary) event(e event) {
	switch e.Action {
	case "build-output":
		s.builds[e.ImportPath] = append(s.builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
	case "run":
		s.pkg(e.Package).test(e.Test)
	case "output":
		s.pkg(e.Package).output(e.Test, strings.TrimRight(e.Output, "\n"))
	case "pass", "fail", "skip":
		if e.Test == "" {
			if e.Action == "fail" {
				s.endPackage(e.Package, fmt.Sprintf("FAIL\t%s\t%.1fs", e.Package, e.Elapsed), e.FailedBuild)
			} else {
				s.other = nil
			}
			delete(s.packages, e.Package)
			return
		}
		t := s.pkg(e.Package).test(e.Test)
		t.ended, t.failed, t.elapsed = true, e.Action == "fail", e.Elapsed
	}
}

func (p *packageRun) test(name string) *testRun {
	t := p.tests[name]
	if t == nil {
		t = &testRun{}
		p.tests[name] = t
		p.order = append(p.order, name)
	}
	return t
}

func (p *packageRun) output(test, line string) {
	p.recent = appendBounded(p.recent, line, contextLines)
	switch {
	case p.panicTo > 0:
		p.panicTo--
		p.notable = append(p.notable, "    "+line)
	case strings.HasPrefix(line, "panic: "):
		p.panicTo, p.panicked = panicLines, true
		p.notable = append(p.notable, "  "+line)
	case isNotable(line):
		p.notable = append(p.notable, "  "+line)
	}
	if test == "" || p.panicked || framing.MatchString(line) {
		return
	}
	t := p.test(test)
	if len(t.messages) < messagesPerTest {
		t.messages = append(t.messages, strings.TrimSpace(line))
	}
	t.last = appendBounded(t.last, strings.TrimSpace(line), messagesPerTest)
	t.said++
}

// quoted is what the summary quotes of a test: its first messages and,
// when it said more, its last ones, where a failure is usually told.
func (t *testRun) quoted() []string {
	switch more := t.said - len(t.messages); {
	case more <= 0:
		return t.messages
	case more <= messagesPerTest:
		return append(slices.Clone(t.messages), t.last[len(t.last)-more:]...)
	default:
		return append(append(slices.Clone(t.messages), "..."), t.last...)
	}
}

// endPackage adds a failed package to the summary under the line header:
// its failed tests, the tests it was still running, what it said of note,
// its build's errors (of failedBuild); failing those, its last lines.
func (s *summary) endPackage(name, header, failedBuild string) {
	p := s.pkg(name)
	s.lines = append(s.lines, header)
	before := len(s.lines)
	for _, test := range p.order {
		t := p.tests[test]
		switch {
		case t.failed:
			s.lines = append(s.lines, fmt.Sprintf("  --- FAIL: %s (%.2fs)", test, t.elapsed))
			s.lines = append(s.lines, indent("      ", t.quoted())...)
		case !t.ended:
			s.lines = append(s.lines, "  still running: "+test)
			s.lines = append(s.lines, indent("      ", t.last)...)
		}
	}
	s.lines = append(s.lines, p.notable...)
	if failedBuild != "" {
		s.lines = append(s.lines, indent("  ", s.builds[failedBuild])...)
	}
	if len(s.lines) == before {
		s.lines = append(s.lines, indent("  ", p.recent)...)
	}
}

// report returns the summary's lines, or none when nothing failed. A
// package that never ended (its run was cut short) is reported as failed.
func (s *summary) report() []string {
	for _, name := range slices.Sorted(maps.Keys(s.packages)) {
		s.endPackage(name, "FAIL\t"+name+"\t(no result: the run ended first)", "")
	}
	out := append(append([]string(nil), s.lines...), s.other...)
	if len(out) > maxSummaryLines {
		out = append(out[:maxSummaryLines], fmt.Sprintf("... and %d lines more", len(out)-maxSummaryLines))
	}
	for i, l := range out {
		if len(l) > maxLineLength {
			out[i] = l[:maxLineLength] + " ..."
		}
	}
	return out
}

func appendBounded(lines []string, line string, n int) []string {
	lines = append(lines, line)
	if len(lines) > n {
		lines = slices.Delete(lines, 0, len(lines)-n)
	}
	return lines
}

func indent(prefix string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = prefix + l
	}
	return out
}

// parseEvent returns line as one of go test's events, if it is one.
func parseEvent(line string) (event, bool) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		return event{}, false
	}
	return e, true
}

// options are the command's flags.
type options struct {
	logPath string // where the whole text goes too
	// brief leaves the tests' own lines out of the output (not of the
	// log), as go test without -v does; the summary quotes the failed ones.
	brief       bool
	summaryOnly bool // print the summary alone
	// name, if set, ends the output with a line saying how long the run
	// named so took, so that a log of make test says what each part took.
	name string
}

func run(in io.Reader, out io.Writer, opts options) error {
	console, log := out, io.Discard
	if opts.summaryOnly {
		console = io.Discard
	}
	if opts.logPath != "" {
		f, err := os.Create(opts.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		log = f
	}
	start := time.Now()
	s := newSummary()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		text, inTest := line+"\n", false
		if e, ok := parseEvent(line); ok {
			text, inTest = "", e.Test != ""
			if e.Action == "output" || e.Action == "build-output" {
				text = e.Output
			}
			s.event(e)
		} else {
			s.text(line)
		}
		if _, err := io.WriteString(log, text); err != nil {
			return err
		}
		if opts.brief && (inTest || text == "PASS\n") {
			continue
		}
		if _, err := io.WriteString(console, text); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if opts.name != "" {
		defer func() { fmt.Fprintf(out, "%s: %d s\n", opts.name, int(time.Since(start).Seconds())) }()
	}
	lines := s.report()
	if len(lines) == 0 {
		return nil
	}
	where := ""
	if opts.logPath != "" {
		where = " (all of it in " + opts.logPath + ")"
	}
	_, err := fmt.Fprintf(out, "\n=== what failed%s:\n%s\n", where, strings.Join(lines, "\n"))
	return err
}

func main() {
	var opts options
	flag.StringVar(&opts.logPath, "log", "", "also write the output to this file")
	flag.BoolVar(&opts.brief, "brief", false, "leave the tests' own lines out of the output (not of -log's file), as go test without -v")
	flag.BoolVar(&opts.summaryOnly, "summary-only", false, "print only what failed, not the output itself")
	flag.StringVar(&opts.name, "name", "", "end with a line saying how long the run so named took")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "testfailures:", err)
		os.Exit(1)
	}
}
