package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// readToolList returns the names in a package's testdata/vmtest-tools (one
// per line, # comments) followed by those in $VMTEST_TOOLS.
func readToolList(file, env string) ([]string, error) {
	var tools []string
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			tools = append(tools, line)
		}
	}
	return append(tools, strings.Fields(env)...), nil
}

// addTool puts a tool into the archive with the shared libraries ldd names
// for it. A tool is one of:
//   - an absolute path of a host file or directory, copied to the same path;
//   - a relative path (from the package's directory) of a program, such as
//     a freshly built ../../bin/ipvsplane, copied to /usr/local/bin;
//   - a program name on PATH, the userspace readers tests compare against
//     (ipvsadm, ipset, nft, ...), copied to the same path;
//   - NAME=PROGRAM: a program on PATH copied beside itself under another
//     name, such as iptables=iptables-nft, so the guest has the nf_tables
//     flavour whatever the host's alternatives say;
//   - a program hack/build-kube builds (kube-proxy), copied to /usr/local/bin.
func (a *archive) addTool(tool string) error {
	files := map[string]string{} // guest path -> host path
	switch {
	case strings.HasPrefix(tool, "/"):
		err := filepath.WalkDir(tool, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files[p] = p
			}
			return err
		})
		if err != nil {
			return err
		}
	case strings.Contains(tool, "="):
		name, prog, _ := strings.Cut(tool, "=")
		p, err := exec.LookPath(prog)
		if err != nil {
			return fmt.Errorf("tool %s: %w (is its Debian package installed?)", tool, err)
		}
		files[filepath.Join(filepath.Dir(p), name)] = p
	case strings.Contains(tool, "/"):
		if _, err := os.Stat(tool); err != nil {
			return fmt.Errorf("tool %s: %w (is it built?)", tool, err)
		}
		files["/usr/local/bin/"+filepath.Base(tool)] = tool
	default:
		p, err := exec.LookPath(tool)
		if err == nil {
			files[p] = p
			break
		}
		kp, kerr := controlplane.KubeProgram(tool)
		if kerr != nil {
			return fmt.Errorf("tool %s: %w (is its Debian package installed?)", tool, err)
		}
		files["/usr/local/bin/"+tool] = kp
	}
	for dst, src := range files {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return err
		}
		if err := a.copyWithLibraries(dst, real); err != nil {
			return fmt.Errorf("tool %s: %w", tool, err)
		}
	}
	return nil
}

// sharedLibraries lists the absolute library paths ldd prints for an ELF
// file; a static program or a data file has none.
func sharedLibraries(file string) ([]string, error) {
	out, err := exec.Command("ldd", file).CombinedOutput()
	if err != nil {
		// ldd fails on static programs and on files that are not ELF.
		return nil, nil
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", file, line)
		}
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}
