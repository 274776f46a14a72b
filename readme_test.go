package ipvsplane_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The README opens with a Go program on the library. It is built here as a
// package of this module, so that a change to the API or to the README that
// breaks it fails the unit tests. The program's file is given to the go
// command through an overlay: nothing is written into the checkout.
func TestREADMEExampleBuilds(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, line := goBlock(t, readme)

	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory that does not exist in the module, under internal/ so no
	// importer could ever see it.
	pkg := filepath.Join(root, "internal", "readmeexample")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "main.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}

	// go test puts its own toolchain first on the PATH of the tests it runs.
	cmd := exec.CommandContext(t.Context(), "go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./internal/readmeexample")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md's Go example (from line %d; main.go:N is README line %d+N) does not build: %v\n%s", line, line, err, out)
	}
}

// goBlock returns the text of the README's one ```go block and the line of
// its opening fence.
func goBlock(t *testing.T, readme []byte) (src []byte, fence int) {
	t.Helper()
	var blocks [][]byte
	in := false
	for i, l := range bytes.SplitAfter(readme, []byte("\n")) {
		trimmed := bytes.TrimSpace(l)
		switch {
		case !in && bytes.Equal(trimmed, []byte("```go")):
			in, fence = true, i+1
			blocks = append(blocks, nil)
		case in && bytes.Equal(trimmed, []byte("```")):
			in = false
		case in:
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l...)
		}
	}
	if len(blocks) != 1 || in {
		t.Fatalf("README.md has %d ```go blocks (unclosed: %v); the test builds exactly one", len(blocks), in)
	}
	return blocks[0], fence
}
