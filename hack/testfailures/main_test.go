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
vmtest: e2e.test: no result after 45m0s; the guest was stopped (raise VMTEST_TIMEOUT?)
some last words of the guest
FAIL	example.com/d	2700.0s
FAIL
`

func TestSummary(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader(verboseRun), &out, "", false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
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
	for _, unwanted := range []string{"example.com/a", "TestGood", "TestFine", "with a continuation"} {
		if strings.Contains(summary, unwanted) {
			t.Errorf("the summary names %q, which did not fail:\n%s", unwanted, summary)
		}
	}
}

func TestSummaryOfAPackageWithoutAFailedTest(t *testing.T) {
	in := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nthe binary's last words\nexit status 3\nFAIL\texample.com/e\t1.0s\n"
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, "", true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAIL\texample.com/e", "the binary's last words", "exit status 3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.HasPrefix(out.String(), "\n=== what failed:") {
		t.Errorf("-summary-only copied the output:\n%s", out.String())
	}
}

func TestSummaryWithoutVerbose(t *testing.T) {
	in := "--- FAIL: TestQuiet (0.00s)\n    quiet_test.go:5: said after the FAIL line\nFAIL\nFAIL\texample.com/g\t0.1s\nok  \texample.com/h\t0.1s\n    other_test.go:1: not a failure's\n"
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, "", true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "quiet_test.go:5: said after the FAIL line") {
		t.Errorf("the summary lacks the message after the FAIL line:\n%s", out.String())
	}
	if strings.Contains(out.String(), "not a failure's") {
		t.Errorf("the summary quotes a line of a package that passed:\n%s", out.String())
	}
}

func TestNoSummaryWhenAllPassed(t *testing.T) {
	in := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n"
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, "", false); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("output %q, want the input alone", out.String())
	}
}

func TestSummaryIsBounded(t *testing.T) {
	var in strings.Builder
	for range 100 {
		in.WriteString("--- FAIL: TestX (0.00s)\n")
	}
	in.WriteString("FAIL\texample.com/f\t1s\n")
	var out bytes.Buffer
	if err := run(strings.NewReader(in.String()), &out, "", true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) > maxSummaryLines+3 {
		t.Errorf("%d lines of summary, want at most %d", len(lines), maxSummaryLines+3)
	}
	if !strings.Contains(out.String(), "lines more") {
		t.Errorf("the cut is not said:\n%s", out.String())
	}
}
