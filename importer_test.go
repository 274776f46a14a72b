package ipvsplane_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const module = "github.com/ipvsplane/ipvsplane"

// untagged is the version the working tree is served as when no release
// tag is reachable from it (a clone made without tags).
const untagged = "v0.0.0-untagged"

// The library as an importer meets it: fetched with `go get` at its
// newest release tag from a module proxy, outside this repository's
// workspace, and building the README's example as the tag has it.
func TestGoGetAtReleaseBuildsREADMEExample(t *testing.T) {
	root := repoRoot(t)
	version, files := release(t, root)
	t.Logf("serving %s at %s", module, version)
	example, _ := goBlock(t, files["README.md"])
	proxy := t.TempDir()
	publish(t, proxy, module, version, files)

	// The importer's own module, away from go.work, with a module cache of
	// its own so the version is fetched rather than found; the other
	// modules come from this machine's cache, used as a second proxy.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	env := proxyEnv(t, root, proxy)
	goOutput(t, dir, env, "mod", "init", "example.test/importer")
	goOutput(t, dir, env, "get", module+"@"+version)
	goOutput(t, dir, env, "mod", "tidy")
	goOutput(t, dir, env, "build", "-o", filepath.Join(dir, "example"), ".")
	if got := goOutput(t, dir, env, "list", "-m", module); strings.TrimSpace(got) != module+" "+version {
		t.Errorf("go list -m %s: %q, want %s", module, got, version)
	}
}

// release returns the newest library release tag reachable from HEAD
// (vX.Y.Z; the daemon's are daemon/vX.Y.Z) and the root module's files
// at it, those of the modules nested in it left out; without such a tag,
// untagged and the files git tracks in the working tree.
func release(t *testing.T, root string) (string, map[string][]byte) {
	t.Helper()
	cmd := exec.Command("git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return untagged, rootModule(treeFiles(t, root))
	}
	tag := strings.TrimSpace(string(out))
	files := map[string][]byte{}
	tr := tar.NewReader(strings.NewReader(gitOutput(t, root, "archive", "--format=tar", tag)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	}
	return tag, rootModule(files)
}

// rootModule leaves out of files those of the modules nested in the
// root one.
func rootModule(files map[string][]byte) map[string][]byte {
	nested := map[string]bool{}
	for f := range files {
		if filepath.Base(f) == "go.mod" && f != "go.mod" {
			nested[filepath.Dir(f)+"/"] = true
		}
	}
	for f := range files {
		if inNested(f, nested) {
			delete(files, f)
		}
	}
	return files
}

// treeFiles returns the files git tracks, as the working tree has them.
func treeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, f := range strings.Fields(gitOutput(t, root, "ls-files")) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
	}
	return files
}

// proxyEnv is the go command's environment for an importer's module away
// from go.work, served by the module proxy in the directory proxy: a
// module cache of its own, so that what proxy serves is fetched rather
// than found, and this machine's module cache as a second proxy for the
// other modules.
func proxyEnv(t *testing.T, root, proxy string) []string {
	t.Helper()
	cache := strings.TrimSpace(goOutput(t, root, nil, "env", "GOMODCACHE"))
	return []string{
		"GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "mod"),
		"GOPROXY=file://" + proxy + ",file://" + filepath.Join(cache, "cache", "download"),
	}
}

// publish writes files as the module path at version in the proxy's
// layout (cmd/go's GOPROXY protocol: list, .info, .mod, .zip).
func publish(t *testing.T, proxy, path, version string, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join(proxy, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range slices.Sorted(maps.Keys(files)) {
		w, err := zw.Create(path + "@" + version + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(files[f]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": info, version + ".mod": files["go.mod"], version + ".zip": buf.Bytes(),
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

// What importing the kernel packages costs an importer: a module of its
// own that imports each of them (and compat/moby/ipvs), built against
// this tree away from go.work, lists at most maxImporterModules modules
// (itself included) and none of the daemon's: Kubernetes, Prometheus,
// zap, cobra. The library's go.mod alone decides this; a requirement
// added for the dataplane or a test must not reach them.
func TestKernelPackagesImporterModules(t *testing.T) {
	const maxImporterModules = 12
	root := repoRoot(t)
	dir := t.TempDir()
	var imports strings.Builder
	for _, pkg := range []string{"compat/moby/ipvs", "conntrack", "dummy", "ipset", "ipvs", "linkaddr"} {
		fmt.Fprintf(&imports, "\t_ %q\n", module+"/"+pkg)
	}
	files := map[string]string{
		"main.go": "package main\n\nimport (\n" + imports.String() + ")\n\nfunc main() {}\n",
		"go.mod": fmt.Sprintf("module example.test/importer\n\ngo %s\n\nrequire %s v0.0.0\n\nreplace %s => %s\n",
			strings.TrimSpace(goOutput(t, root, []string{"GOWORK=off"}, "list", "-m", "-f", "{{.GoVersion}}")), module, module, root),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// This machine's module cache is the proxy. A build fetches only the
	// modules it compiles, and listing the importer's modules needs the
	// version information of every module in its graph, a part of the
	// library's: the library's modules, downloaded and listed first, are
	// what a fresh machine's cache may lack (golang.org/x/crypto's
	// information, say, which nothing here compiles).
	goOutput(t, root, []string{"GOWORK=off"}, "mod", "download")
	goOutput(t, root, []string{"GOWORK=off"}, "list", "-m", "all")
	cache := strings.TrimSpace(goOutput(t, root, nil, "env", "GOMODCACHE"))
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOPROXY=file://" + filepath.Join(cache, "cache", "download")}
	goOutput(t, dir, env, "mod", "tidy")
	goOutput(t, dir, env, "build", "./...")
	mods := strings.Fields(goOutput(t, dir, env, "list", "-m", "-f", "{{.Path}}", "all"))
	for _, m := range mods {
		for _, daemonOnly := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/prometheus/", "go.uber.org/zap", "github.com/spf13/cobra"} {
			if strings.HasPrefix(m, daemonOnly) {
				t.Errorf("importing the kernel packages pulls in %s", m)
			}
		}
	}
	if len(mods) > maxImporterModules {
		t.Errorf("an importer of the kernel packages gets %d modules, more than %d:\n%s", len(mods), maxImporterModules, strings.Join(mods, "\n"))
	}
	t.Logf("an importer of the kernel packages gets %d modules (at most %d): %s", len(mods), maxImporterModules, strings.Join(mods, " "))
}
