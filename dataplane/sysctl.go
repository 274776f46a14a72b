package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// WriteSysctls writes each setting below root (normally /proc/sys) whose
// value differs, and returns the names it changed. It must run in the
// network namespace the settings are for.
func WriteSysctls(root string, settings []model.Sysctl) ([]string, error) {
	var changed []string
	for _, s := range settings {
		path := filepath.Join(root, s.Name)
		cur, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return changed, &checkError{op: "write sysctl", object: s.Name, sentinel: ErrSysctlNotExist, cause: err}
		}
		if err != nil {
			return changed, &checkError{op: "write sysctl", object: s.Name, cause: err}
		}
		want := strconv.Itoa(s.Value)
		if string(bytes.TrimSpace(cur)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			return changed, &checkError{op: "write sysctl", object: s.Name + " = " + want, cause: err}
		}
		changed = append(changed, s.Name)
	}
	return changed, nil
}

// kernelSysctls returns the settings kube-proxy's IPVS mode makes that
// depend on the kernel's release (uname -r, such as "4.18.0-553.el8"):
// conn_reuse_mode 0 from 4.1 up to before 5.9, where its default of 1
// stalls new connections that reuse the port of an old one for a second
// (kubernetes issue 81775); nothing on 5.9 and later, which fixed that
// (kubernetes issue 93297), nor before 4.1, which lacks the setting.
func kernelSysctls(release string) ([]model.Sysctl, error) {
	major, minor, err := kernelVersion(release)
	if err != nil {
		return nil, err
	}
	v := major*1000 + minor
	if v >= 4001 && v < 5009 {
		return []model.Sysctl{{Name: "net/ipv4/vs/conn_reuse_mode", Value: 0}}, nil
	}
	return nil, nil
}

// kernelVersion parses a kernel release's major and minor numbers.
func kernelVersion(release string) (major, minor int, err error) {
	fields := strings.SplitN(release, ".", 3)
	if len(fields) >= 2 {
		// The minor number may run into the rest: "18-553.el8".
		digits := strings.IndexFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' })
		if digits < 0 {
			digits = len(fields[1])
		}
		major, err = strconv.Atoi(fields[0])
		if err == nil {
			minor, err = strconv.Atoi(fields[1][:digits])
		}
		if err == nil {
			return major, minor, nil
		}
	}
	return 0, 0, fmt.Errorf("dataplane: kernel release %q: want it to start with MAJOR.MINOR", release)
}

// InitNode writes the node's sysctls and IPVS timeouts, as the first sync does
// and as kube-proxy's --init-only does before it exits.
func (d *Dataplane) InitNode(ctx context.Context, node *model.Node) error {
	return errors.Join(d.applyNodeSettings(ctx, node)...)
}
