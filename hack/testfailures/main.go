// Command testfailures reads `go test -v` output on standard input, copies
// it to standard output (and to -log), and when it ends prints what failed
// in a few lines: each failed package, its failed tests with their first
// messages, a test binary's panic (a timeout names the tests it was
// running) or go test's kill of it, vmtest's own lines (its errors and
// retries; for a guest it stopped, the tests that were running and the
// guest's last lines) and the guest kernel's reports of trouble (a soft
// lockup, a hung task, a panic). CI shows only
// the tail of make test's output, and the failing test of an hour of
// verbose output is otherwise far above it.
//
//	go test -v ./... 2>&1 | go run ./hack/testfailures -log bin/test-unit.log
//	go run ./hack/testfailures -summary-only < saved.log
//
// It prints nothing more when nothing failed; the exit status is the
// pipeline's to carry (set -o pipefail).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// maxSummaryLines bounds the summary, so that it stays in a tail.
const maxSummaryLines = 60

// maxLineLength bounds each line the summary quotes.
const maxLineLength = 240

// messagesPerTest is how many of a failed test's messages it quotes.
const messagesPerTest = 3

// contextLines is how many lines before a package's FAIL line stand in for
// its failure when no test failed (the binary exited, vmtest gave up).
const contextLines = 6

// panicLines is how many lines after a "panic:" line go with it.
const panicLines = 6

var (
	testMarker  = regexp.MustCompile(`^=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	testFailed  = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	testMessage = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)
	pkgFailed   = regexp.MustCompile(`^FAIL\s+\S+`)
	pkgEnded    = regexp.MustCompile(`^(?:ok|FAIL|\?)\s+\S+`)
	// vmtest's own lines: its errors, retries and what it saw; the
	// report of a test that passed is left out.
	vmtestLine   = regexp.MustCompile(`^vmtest: `)
	vmtestPassed = regexp.MustCompile(`^vmtest: .*, exit status 0$`)
	// A guest kernel's report of trouble, as vmtest marks it (its
	// backtrace is left out), and go test's kill of a test binary.
	guestTrouble = regexp.MustCompile(`^guest kernel: .*(?:BUG: |WARNING: |Oops|Kernel panic|blocked for more than|soft lockup|rcu: INFO)`)
	testKilled   = regexp.MustCompile(`^\*\*\* Test (?:killed|I/O incomplete)`)
)

// summary collects the failures of one `go test -v` output.
type summary struct {
	current  string              // the test the next messages belong to
	messages map[string][]string // each running test's first messages
	pending  []string            // failure lines of the package not yet ended
	recent   []string            // the package's last lines, for a FAIL without a test
	panicTo  int                 // lines still to take after a panic
	// Without -v, a failed test's messages follow its FAIL line; this
	// is how many more of them to take.
	afterFail int
	lines     []string // the summary so far
}

func newSummary() *summary {
	return &summary{messages: map[string][]string{}}
}

func (s *summary) add(line string) {
	s.recent = append(s.recent, line)
	if len(s.recent) > contextLines {
		s.recent = s.recent[1:]
	}
	switch {
	case s.panicTo > 0:
		s.panicTo--
		s.pending = append(s.pending, "    "+line)
	case strings.HasPrefix(line, "panic: "):
		s.panicTo = panicLines
		s.pending = append(s.pending, "  "+line)
	case vmtestLine.MatchString(line) && !vmtestPassed.MatchString(line),
		guestTrouble.MatchString(line), testKilled.MatchString(line):
		s.pending = append(s.pending, "  "+line)
	}
	if m := testMarker.FindStringSubmatch(line); m != nil {
		s.current = m[1]
		return
	}
	if m := testFailed.FindStringSubmatch(line); m != nil {
		s.pending = append(s.pending, "  "+strings.TrimSpace(line))
		for _, msg := range s.messages[m[1]] {
			s.pending = append(s.pending, "      "+msg)
		}
		s.afterFail = messagesPerTest
		return
	}
	if testMessage.MatchString(line) {
		switch {
		case s.current == "" && s.afterFail > 0:
			s.afterFail--
			s.pending = append(s.pending, "      "+strings.TrimSpace(line))
		case s.current != "" && len(s.messages[s.current]) < messagesPerTest:
			s.messages[s.current] = append(s.messages[s.current], strings.TrimSpace(line))
		}
		return
	}
	if pkgEnded.MatchString(line) {
		s.endPackage(line)
	}
}

// endPackage closes the package whose result line is line.
func (s *summary) endPackage(line string) {
	if pkgFailed.MatchString(line) {
		s.lines = append(s.lines, line)
		if len(s.pending) == 0 {
			for _, l := range s.recent[:len(s.recent)-1] {
				s.lines = append(s.lines, "  "+l)
			}
		}
		s.lines = append(s.lines, s.pending...)
	}
	s.pending, s.recent, s.current, s.panicTo, s.afterFail = nil, nil, "", 0, 0
	clear(s.messages)
}

// report returns the summary's lines, or none when nothing failed. What
// failed after the last package line (a build failure, a run cut short)
// is reported too.
func (s *summary) report() []string {
	out := append([]string(nil), s.lines...)
	out = append(out, s.pending...)
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

func run(in io.Reader, out io.Writer, logPath string, summaryOnly bool) error {
	w := out
	if summaryOnly {
		w = io.Discard
	}
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(w, f)
	}
	s := newSummary()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		s.add(line)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	lines := s.report()
	if len(lines) == 0 {
		return nil
	}
	where := ""
	if logPath != "" {
		where = " (all of it in " + logPath + ")"
	}
	_, err := fmt.Fprintf(out, "\n=== what failed%s:\n%s\n", where, strings.Join(lines, "\n"))
	return err
}

func main() {
	logPath := flag.String("log", "", "also write the output to this file")
	summaryOnly := flag.Bool("summary-only", false, "print only what failed, not the output itself")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *logPath, *summaryOnly); err != nil {
		fmt.Fprintln(os.Stderr, "testfailures:", err)
		os.Exit(1)
	}
}
