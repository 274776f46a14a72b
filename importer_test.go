package ipvsplane_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const module = "github.com/ipvsplane/ipvsplane"

// version is the release the proxy serves the working tree as: what a
// tag of this commit would publish.
const version = "v0.1.0"

// The library as an importer meets it: fetched with `go get` at a release
// version from a module proxy, outside this repository's workspace, and
// building the README's example.
func TestGoGetAtReleaseBuildsREADMEExample(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, _ := goBlock(t, readme)
	proxy := t.TempDir()
	publish(t, root, proxy)

	// The importer's own module, away from go.work, with a module cache of
	// its own so the version is fetched rather than found; the other
	// modules come from this machine's cache, used as a second proxy.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := strings.TrimSpace(goOutput(t, root, nil, "env", "GOMODCACHE"))
	env := []string{
		"GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "mod"),
		"GOPROXY=file://" + proxy + ",file://" + filepath.Join(cache, "cache", "download"),
	}
	goOutput(t, dir, env, "mod", "init", "example.test/importer")
	goOutput(t, dir, env, "get", module+"@"+version)
	goOutput(t, dir, env, "mod", "tidy")
	goOutput(t, dir, env, "build", "-o", filepath.Join(dir, "example"), ".")
	if got := goOutput(t, dir, env, "list", "-m", module); strings.TrimSpace(got) != module+" "+version {
		t.Errorf("go list -m %s: %q, want %s", module, got, version)
	}
}

// publish writes the files git tracks in the root module (not those of
// the modules nested in it) as version in the proxy's layout
// (cmd/go's GOPROXY protocol: list, .info, .mod, .zip).
func publish(t *testing.T, root, proxy string) {
	t.Helper()
	dir := filepath.Join(proxy, module, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(gitOutput(t, root, "ls-files"))
	nested := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "go.mod" && f != "go.mod" {
			nested[filepath.Dir(f)+"/"] = true
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		if inNested(f, nested) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(module + "@" + version + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod, version + ".zip": buf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func inNested(file string, nested map[string]bool) bool {
	for dir := range nested {
		if strings.HasPrefix(file, dir) {
			return true
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(gitOutput(t, ".", "rev-parse", "--show-toplevel"))
}

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func goOutput(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
