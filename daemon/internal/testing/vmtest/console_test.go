package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The tests named running are those go test -v started or resumed and
// has not paused or ended, subtests and go test -json's framing included.
func TestGuestLogNamesRunningTests(t *testing.T) {
	var log guestLog
	log.start()
	for _, line := range []string{
		"=== RUN   TestDone",
		"--- PASS: TestDone (0.00s)",
		"=== RUN   TestParallel",
		"=== PAUSE TestParallel",
		"=== RUN   TestOuter",
		"=== RUN   TestOuter/first",
		"    --- PASS: TestOuter/first (0.01s)",
		"=== RUN   TestOuter/second",
		"=== CONT  TestParallel",
		"\x16=== RUN   TestFramed",
		"    outer_test.go:12: still going",
	} {
		log.testLine(line)
	}
	res := log.result()
	if want := []string{"TestOuter", "TestOuter/second", "TestParallel", "TestFramed"}; !slices.Equal(res.running, want) {
		t.Errorf("running %q, want %q", res.running, want)
	}
	if got := res.runningTests(); got != "running TestOuter, TestOuter/second, TestParallel, TestFramed" {
		t.Errorf("runningTests() = %q", got)
	}
}

// A stopped run's report is vmtest's lines (hack/testfailures quotes
// them): the running tests and the last lines of both consoles, in order.
func TestReportQuotesLastLines(t *testing.T) {
	var log guestLog
	log.bootLine("Booting from ROM...")
	log.start()
	for i := range tailLines {
		log.testLine("=== RUN   TestStep" + strings.Repeat("x", i))
	}
	log.kernelLine("watchdog: BUG: soft lockup - CPU#0 stuck for 61s!")
	log.testLine("    step_test.go:3: last words")
	report := log.result().report()
	lines := strings.Split(report, "\n")
	if len(lines) != tailLines+2 {
		t.Errorf("%d lines, want %d:\n%s", len(lines), tailLines+2, report)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "vmtest: ") {
			t.Errorf("line %q is not marked as vmtest's", l)
		}
	}
	if !strings.HasSuffix(report, "vmtest: | guest kernel: watchdog: BUG: soft lockup - CPU#0 stuck for 61s!\nvmtest: |     step_test.go:3: last words") {
		t.Errorf("the report does not end with the last lines:\n%s", report)
	}
	if strings.Contains(report, "Booting from ROM") || strings.Contains(report, "TestStep\n") {
		t.Errorf("the report quotes more than the last %d lines:\n%s", tailLines, report)
	}
	if !strings.HasPrefix(report, "vmtest: running TestStep") {
		t.Errorf("the report does not name the running tests first:\n%s", report)
	}
	if got := (consoleResult{}).runningTests(); got != "the guest had not started the test" {
		t.Errorf("before the start: %q", got)
	}
}

// The test's console is streamed line by line after the start marker; the
// firmware's lines before it only when verbose.
func TestTestConsoleStreamsTheTest(t *testing.T) {
	in := "\x1bcSeaBIOS (version 1.16)\r\nBooting from ROM...\r\n" + startMarker + "\r\n=== RUN   TestA\r\n    a_test.go:1: said\r\nno newline at the end"
	for _, verbose := range []bool{false, true} {
		var out bytes.Buffer
		var log guestLog
		readTestConsole(strings.NewReader(in), &out, verbose, &log)
		want := "=== RUN   TestA\n    a_test.go:1: said\nno newline at the end\n"
		if verbose {
			want = "\x1bcSeaBIOS (version 1.16)\nBooting from ROM...\n" + want
		}
		if out.String() != want {
			t.Errorf("verbose %v: printed %q, want %q", verbose, out.String(), want)
		}
		if res := log.result(); res.booted.IsZero() || !slices.Equal(res.running, []string{"TestA"}) || len(res.last) != 5 {
			t.Errorf("verbose %v: recorded %+v", verbose, res)
		}
	}
}

// The kernel's console is streamed, marked, from a report of trouble on
// for incidentLines lines, and all of it when verbose; a panic is noted.
func TestKernelConsoleStreamsTrouble(t *testing.T) {
	var in strings.Builder
	in.WriteString("[    3.9] IPVS: ipvs loaded.\n")
	in.WriteString("[  125.0] INFO: task x.test:93 blocked for more than 61 seconds.\n")
	for range incidentLines + 5 {
		in.WriteString("[  125.1]  schedule+0x2f/0x90\n")
	}
	in.WriteString("[  200.0] Kernel panic - not syncing: softlockup: hung tasks\n")
	var out bytes.Buffer
	var log guestLog
	readKernelConsole(strings.NewReader(in.String()), &out, false, &log)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != incidentLines+1 {
		t.Errorf("printed %d lines, want the incident's %d and the panic", len(lines), incidentLines)
	}
	if lines[0] != kernelPrefix+"[  125.0] INFO: task x.test:93 blocked for more than 61 seconds." || !strings.HasSuffix(lines[len(lines)-1], "Kernel panic - not syncing: softlockup: hung tasks") {
		t.Errorf("printed %q ... %q", lines[0], lines[len(lines)-1])
	}
	if strings.Contains(out.String(), "IPVS") {
		t.Errorf("a message before the trouble was printed")
	}
	if !log.result().panicked {
		t.Errorf("the panic was not noted")
	}
	out.Reset()
	readKernelConsole(strings.NewReader("[    3.9] IPVS: ipvs loaded.\n"), &out, true, &guestLog{})
	if out.String() != kernelPrefix+"[    3.9] IPVS: ipvs loaded.\n" {
		t.Errorf("verbose: printed %q", out.String())
	}
}
