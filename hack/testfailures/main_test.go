package main

import (
	"bytes"
	"strings"
	"testing"
)

const verboseRun = `=== RUN   TestGood
--- PASS: TestGood (0.01s)
PASS
ok  	example.com/a	0.1s
=== RUN   TestBad
    bad_test.go:10: first complaint
    bad_test.go:11: second complaint
	with a continuation
=== RUN   TestBad/sub
    bad_test.go:20: the subtest's complaint
--- FAIL: TestBad (0.02s)
    --- FAIL: TestBad/sub (0.01s)
=== RUN   TestFine
--- PASS: TestFine (0.00s)
FAIL
FAIL	example.com/b	0.3s
=== RUN   TestHangs
panic: test timed out after 40m0s
	running tests:
		TestHangs (40m0s)

goroutine 1 [running]:
FAIL	example.com/c	2400.1s
vmtest: e2e.test on 6.1: initramfs 1s, boot 6s, test 1s, exit status 0
vmtest: e2e.test: no result after 45m0s; the guest was stopped (raise VMTEST_TIMEOUT?)
some last words of the guest
FAIL	example.com/d	2700.0s
FAIL
`

// summarize runs the command on in and returns what it printed.
func summarize(t *testing.T, in string, summaryOnly bool) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, "", summaryOnly); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestSummary(t *testing.T) {
	got := summarize(t, verboseRun, false)
	if !strings.HasPrefix(got, verboseRun) {
		t.Errorf("the output is not copied first:\n%s", got)
	}
	summary := got[len(verboseRun):]
	for _, want := range []string{
		"FAIL\texample.com/b",
		"--- FAIL: TestBad (0.02s)",
		"bad_test.go:10: first complaint",
		"bad_test.go:11: second complaint",
		"--- FAIL: TestBad/sub (0.01s)",
		"bad_test.go:20: the subtest's complaint",
		"FAIL\texample.com/c",
		"panic: test timed out after 40m0s",
		"TestHangs (40m0s)",
		"FAIL\texample.com/d",
		"vmtest: e2e.test: no result after 45m0s",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	for _, unwanted := range []string{"example.com/a", "TestGood", "TestFine", "with a continuation", "exit status 0"} {
		if strings.Contains(summary, unwanted) {
			t.Errorf("the summary names %q, which did not fail:\n%s", unwanted, summary)
		}
	}
}

// A guest that vmtest stopped: the summary names the test that was
// running, quotes the guest's last lines and the kernel's report of
// trouble, but not the goroutine dump or the kernel's backtrace.
func TestSummaryOfAStoppedGuest(t *testing.T) {
	in := `=== RUN   TestSpinsForever
    stuck_test.go:20: spinning
guest kernel: [   95.1] INFO: task x.test:93 blocked for more than 61 seconds.
guest kernel: [   95.1]  schedule+0x2f/0x90
vmtest: stopping the guest: its limit of 1m10s passed (VMTEST_TIMEOUT); running TestSpinsForever
vmtest: asking the guest's test for a goroutine dump (SIGQUIT), up to 15s
SIGQUIT: quit
PC=0x52e645 m=0 sigcode=0
goroutine 7 gp=0x21c3be0e9860 m=0 mp=0x6d6e20 [running]:
vmtest: stuck.test: stopped: its limit of 1m10s passed (VMTEST_TIMEOUT)
vmtest: running TestSpinsForever
vmtest: the guest's last lines:
vmtest: | guest kernel: [    4.0] IPVS: [nq] scheduler registered.
vmtest: | === RUN   TestSpinsForever
vmtest: |     stuck_test.go:20: spinning
*** Test killed with quit: ran too long (1m40s).
FAIL	example.com/stuck	100.0s
`
	out := summarize(t, in, true)
	for _, want := range []string{
		"FAIL\texample.com/stuck",
		"vmtest: stuck.test: stopped: its limit of 1m10s passed",
		"vmtest: running TestSpinsForever",
		"vmtest: |     stuck_test.go:20: spinning",
		"guest kernel: [   95.1] INFO: task x.test:93 blocked for more than 61 seconds.",
		"*** Test killed with quit: ran too long (1m40s).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"schedule+0x2f", "goroutine 7"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("the summary quotes %q:\n%s", unwanted, out)
		}
	}
}

func TestSummaryOfAPackageWithoutAFailedTest(t *testing.T) {
	in := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nthe binary's last words\nexit status 3\nFAIL\texample.com/e\t1.0s\n"
	out := summarize(t, in, true)
	for _, want := range []string{"FAIL\texample.com/e", "the binary's last words", "exit status 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "\n=== what failed:") {
		t.Errorf("-summary-only copied the output:\n%s", out)
	}
}

func TestSummaryWithoutVerbose(t *testing.T) {
	in := "--- FAIL: TestQuiet (0.00s)\n    quiet_test.go:5: said after the FAIL line\nFAIL\nFAIL\texample.com/g\t0.1s\nok  \texample.com/h\t0.1s\n    other_test.go:1: not a failure's\n"
	out := summarize(t, in, true)
	if !strings.Contains(out, "quiet_test.go:5: said after the FAIL line") {
		t.Errorf("the summary lacks the message after the FAIL line:\n%s", out)
	}
	if strings.Contains(out, "not a failure's") {
		t.Errorf("the summary quotes a line of a package that passed:\n%s", out)
	}
}

func TestNoSummaryWhenAllPassed(t *testing.T) {
	in := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n"
	out := summarize(t, in, false)
	if out != in {
		t.Errorf("output %q, want the input alone", out)
	}
}

func TestSummaryIsBounded(t *testing.T) {
	var in strings.Builder
	for range 100 {
		in.WriteString("--- FAIL: TestX (0.00s)\n")
	}
	in.WriteString("FAIL\texample.com/f\t1s\n")
	out := summarize(t, in.String(), true)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > maxSummaryLines+3 {
		t.Errorf("%d lines of summary, want at most %d", len(lines), maxSummaryLines+3)
	}
	if !strings.Contains(out, "lines more") {
		t.Errorf("the cut is not said:\n%s", out)
	}
}
