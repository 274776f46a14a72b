package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// summarize runs the command on in and returns what it printed.
func summarize(t *testing.T, in string, summaryOnly bool) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(strings.NewReader(in), &out, options{summaryOnly: summaryOnly}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// goJSON runs go with args (a go test -json) and returns what it printed,
// which is expected to be a failure.
func goJSON(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("go %s: %v, want a failure\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// test2json turns `go test -v` text of the package pkg into events, as go
// test -json does with what a test binary (or vmtest, its -exec) prints.
func test2json(t *testing.T, pkg, verbose string) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "test2json", "-p", pkg)
	cmd.Stdin = strings.NewReader(verbose)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool test2json: %v", err)
	}
	return string(out)
}

func contains(t *testing.T, summary string, wanted, unwanted []string) {
	t.Helper()
	for _, want := range wanted {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	for _, not := range unwanted {
		if strings.Contains(summary, not) {
			t.Errorf("the summary has %q:\n%s", not, summary)
		}
	}
}

// A real go test -json run: failed tests with their first and last
// messages, the test running at the timeout with its last line, and the
// timeout's panic; the output copied as the text go test -v prints.
func TestSummaryOfGoTestJSON(t *testing.T) {
	in := goJSON(t, "test", "-json", "-count=1", "-timeout=3s", "./testdata/failing")
	got := summarize(t, in, false)
	text, summary, ok := strings.Cut(got, "\n=== what failed:\n")
	if !ok {
		t.Fatalf("no summary:\n%s", got)
	}
	contains(t, text, []string{"=== RUN   TestGood", "a line of a test that passed", "--- FAIL: TestBad"}, []string{`"Action"`})
	contains(t, summary, []string{
		"testfailures/testdata/failing\t",
		"--- FAIL: TestBad (",
		"first complaint",
		"--- FAIL: TestBad/sub (",
		"the subtest's complaint",
		"--- FAIL: TestChatty (",
		"progress 0",
		"what went wrong, after the progress",
		"still running: TestHangs",
		"about to wait for ever",
		"panic: test timed out after 3s",
	}, []string{"TestGood", "progress 5"})
}

// A package that does not build: its compiler errors.
func TestSummaryOfABuildFailure(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"go.mod":        "module example.test/broken\n\ngo 1.24\n",
		"broken.go":     "package broken\n\nfunc F() int { return \"not an int\" }\n",
		"other_test.go": "package broken\n",
	} {
		if err := writeFile(dir, name, data); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", ".")
	cmd.Dir = dir
	out, _ := cmd.Output()
	contains(t, summarize(t, string(out), true), []string{"FAIL\texample.test/broken", "cannot use \"not an int\""}, nil)
}

// A guest that vmtest stopped: the summary names the test that was
// running, quotes the guest's last lines and the kernel's report of
// trouble, but not the goroutine dump or the kernel's backtrace.
func TestSummaryOfAStoppedGuest(t *testing.T) {
	in := test2json(t, "example.com/stuck", `=== RUN   TestSpinsForever
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
`)
	contains(t, summarize(t, in, true), []string{
		"FAIL\texample.com/stuck",
		"still running: TestSpinsForever",
		"vmtest: stuck.test: stopped: its limit of 1m10s passed",
		"vmtest: running TestSpinsForever",
		"vmtest: |     stuck_test.go:20: spinning",
		"guest kernel: [   95.1] INFO: task x.test:93 blocked for more than 61 seconds.",
		"*** Test killed with quit: ran too long (1m40s).",
	}, []string{"schedule+0x2f", "goroutine 7"})
}

// A binary that exits without a failed test: its last lines.
func TestSummaryOfAPackageWithoutAFailedTest(t *testing.T) {
	in := test2json(t, "example.com/e", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nthe binary's last words\nexit status 3\nFAIL\texample.com/e\t1.0s\n")
	out := summarize(t, in, true)
	contains(t, out, []string{"FAIL\texample.com/e", "the binary's last words", "exit status 3"}, nil)
	if !strings.HasPrefix(out, "\n=== what failed:") {
		t.Errorf("-summary-only copied the output:\n%s", out)
	}
}

// A run cut short (go test itself killed): the package that had no
// result, and the test it was running.
func TestSummaryOfARunCutShort(t *testing.T) {
	in := test2json(t, "example.com/cut", "=== RUN   TestLong\n    long_test.go:3: started\n")
	contains(t, summarize(t, in, true), []string{"example.com/cut\t(no result", "still running: TestLong", "long_test.go:3: started"}, nil)
}

// Another tool's text in the same pipe (hack/conformance after go test):
// copied, and only vmtest's and the guest kernel's lines kept of it.
func TestTextBesideEvents(t *testing.T) {
	in := test2json(t, "example.com/a", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n") +
		"ginkgo: a spec's line\nvmtest: node kubenode: kubelet not Ready after 10m0s\n"
	got := summarize(t, in, false)
	contains(t, got, []string{"ginkgo: a spec's line\n", "=== what failed:\n  vmtest: node kubenode: kubelet not Ready"}, nil)
}

// vmtest's report of the nodes it booted for a cluster test that then
// passed is no failure.
func TestNoSummaryOfANodeReportBeforeAPass(t *testing.T) {
	in := "vmtest: node kubenode on 6.1: disk 21.7s, node Ready 5m49s after boot\n" +
		test2json(t, "example.com/a", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n")
	if out := summarize(t, in, true); out != "" {
		t.Errorf("a summary of a run that passed:\n%s", out)
	}
}

func TestNoSummaryWhenAllPassed(t *testing.T) {
	text := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n"
	if out := summarize(t, test2json(t, "example.com/a", text), false); out != text {
		t.Errorf("output %q, want the text alone", out)
	}
}

func TestSummaryIsBounded(t *testing.T) {
	var in strings.Builder
	for i := range 100 {
		in.WriteString("=== RUN   TestX" + strings.Repeat("x", i) + "\n--- FAIL: TestX" + strings.Repeat("x", i) + " (0.00s)\n")
	}
	in.WriteString("FAIL\texample.com/f\t1s\n")
	out := summarize(t, test2json(t, "example.com/f", in.String()), true)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > maxSummaryLines+3 {
		t.Errorf("%d lines of summary, want at most %d", len(lines), maxSummaryLines+3)
	}
	if !strings.Contains(out, "lines more") {
		t.Errorf("the cut is not said:\n%s", out)
	}
}

func writeFile(dir, name, data string) error {
	return os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
}

// -brief prints what go test without -v prints, and the whole text to
// the log.
func TestBrief(t *testing.T) {
	text := "=== RUN   TestA\n    a_test.go:1: said\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.1s\n"
	log := filepath.Join(t.TempDir(), "log")
	var out bytes.Buffer
	if err := run(strings.NewReader(test2json(t, "example.com/a", text)), &out, options{brief: true, logPath: log}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "ok  \texample.com/a\t0.1s\n" {
		t.Errorf("-brief printed %q", got)
	}
	if got, err := os.ReadFile(log); err != nil || string(got) != text {
		t.Errorf("the log holds %q, %v; want %q", got, err, text)
	}
}

// -name ends the output with how long the run took.
func TestNameSaysHowLong(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader("ok  \texample.com/a\t0.1s\n"), &out, options{name: "test-unit"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasSuffix(got, "test-unit: 0 s\n") {
		t.Errorf("output %q, want it to end with how long test-unit took", got)
	}
}

// hack/conformance's failed specs, after the cluster tests passed in the
// same pipe.
func TestSummaryOfFailedSpecs(t *testing.T) {
	in := test2json(t, "example.com/cluster", "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/cluster\t0.1s\n") +
		"• [12.3 seconds] [sig-network] DNS should provide DNS for services\n" +
		"[FAIL] [sig-network] Services should serve a basic endpoint from pods [Conformance]\n" +
		"conformance: 187 s with ipvsplane, exit status 1\n"
	contains(t, summarize(t, in, true), []string{
		"[FAIL] [sig-network] Services should serve a basic endpoint from pods",
		"conformance: 187 s with ipvsplane, exit status 1",
	}, []string{"DNS should provide DNS"})
	passed := "conformance: 187 s with ipvsplane, exit status 0\n"
	if out := summarize(t, passed, true); out != "" {
		t.Errorf("a summary of specs that passed:\n%s", out)
	}
}
