package ipvsplane_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const daemonModule = module + "/daemon"

// The two modules as a released pair: each at the version the file
// VERSION holds, packed from the working tree into a module proxy (the
// tags vX.Y.Z and daemon/vX.Y.Z are made on that tree), used away from
// go.work, where the daemon's go.mod alone says where the library comes
// from. `go install` takes the program at that version (it refuses a
// module whose go.mod has a replace), the clientset's example, which the
// package's doc offers CNI plugins, runs in an importer's module with the
// library at the same version, and the daemon's go.mod is tidy on its own.
func TestDaemonInstallsAtVERSION(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(data))
	files := treeFiles(t, root)
	daemon := rootModule(subtree(files, "daemon/"))
	proxy := t.TempDir()
	publish(t, proxy, module, version, rootModule(files))
	publish(t, proxy, daemonModule, version, daemon)
	// -trimpath keeps the fresh module cache's path out of the build
	// cache's keys: the Kubernetes packages compile once, not every run;
	// with cgo off as well, as hack/build-kube builds, a machine that
	// built the tests' Kubernetes programs has most of them compiled.
	env := append(proxyEnv(t, root, proxy), "GOFLAGS=-mod=mod -trimpath", "CGO_ENABLED=0")

	t.Run("go install", func(t *testing.T) {
		bin := t.TempDir()
		goOutput(t, t.TempDir(), append(env, "GOBIN="+bin), "install", daemonModule+"/cmd/ipvsplane@"+version)
		out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "ipvsplane"), "version").CombinedOutput()
		if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != "ipvsplane "+version {
			t.Errorf("ipvsplane version: %v\n%s\nwant the first line ipvsplane %s", err, out, version)
		}
	})

	t.Run("clientset example", func(t *testing.T) {
		src, want := exampleProgram(t, daemon["watcher/clientset/example_test.go"])
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		goOutput(t, dir, env, "mod", "init", "example.test/cni")
		goOutput(t, dir, env, "get", daemonModule+"@"+version)
		// go build (-mod=mod) adds the Kubernetes modules main.go imports
		// at the versions the daemon requires; go mod tidy would want the
		// source of their tests' dependencies, which this offline proxy
		// does not have.
		goOutput(t, dir, env, "build", "-o", "cni", ".")
		for _, m := range []string{module, daemonModule} {
			if got := strings.TrimSpace(goOutput(t, dir, env, "list", "-m", m)); got != m+" "+version {
				t.Errorf("go list -m %s: %q, want %s %s", m, got, m, version)
			}
		}
		out, err := exec.CommandContext(t.Context(), filepath.Join(dir, "cni")).CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("the clientset example outside the repository: %v, printed\n%s\nwant\n%s", err, out, want)
		}
	})

	t.Run("daemon go.mod tidy", func(t *testing.T) {
		dir := t.TempDir()
		for f, data := range daemon {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		goOutput(t, dir, env, "mod", "tidy")
		tidyMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		tidySum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tidyMod, daemon["go.mod"]) {
			t.Errorf("daemon/go.mod is not tidy outside go.work; go mod tidy makes it\n%s", tidyMod)
		}
		// The library's hashes at VERSION are left to the checksum
		// database: until the tag, the library they would hash changes
		// with every commit.
		if got := withoutModule(tidySum, module); !bytes.Equal(got, daemon["go.sum"]) {
			t.Errorf("daemon/go.sum is not tidy outside go.work; go mod tidy makes it (the library's lines left out)\n%s", got)
		}
	})
}

// subtree returns the files under dir, named from it.
func subtree(files map[string][]byte, dir string) map[string][]byte {
	sub := map[string][]byte{}
	for f, data := range files {
		if name, ok := strings.CutPrefix(f, dir); ok {
			sub[name] = data
		}
	}
	return sub
}

// exampleProgram turns the example file of a package's Example function
// into a program of its own, and returns it with what the example's
// Output comment says it prints.
func exampleProgram(t *testing.T, example []byte) (src []byte, output string) {
	t.Helper()
	body, isPkg := bytes.CutPrefix(example, []byte("package clientset_test\n"))
	head, rest, isFunc := bytes.Cut(body, []byte("\nfunc Example() {\n"))
	_, out, hasOutput := bytes.Cut(rest, []byte("\t// Output:\n"))
	if !isPkg || !isFunc || !hasOutput {
		t.Fatalf("the clientset example is not one package clientset_test file with func Example and its Output:\n%s", example)
	}
	var want strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		line, ok := strings.CutPrefix(l, "\t// ")
		if !ok {
			break
		}
		want.WriteString(line + "\n")
	}
	return slices.Concat([]byte("package main\n"), head, []byte("\nfunc main() {\n"), rest), want.String()
}

// withoutModule returns the go.sum text sum without the lines of module
// path.
func withoutModule(sum []byte, path string) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(sum, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte(path+" ")) {
			out = append(out, l...)
		}
	}
	return out
}
