package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/kernelrelease"
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
	v, err := kernelrelease.Parse(release)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if !v.Before(4, 1) && v.Before(5, 9) {
		return []model.Sysctl{{Name: "net/ipv4/vs/conn_reuse_mode", Value: 0}}, nil
	}
	return nil, nil
}

// InitNode writes the node's sysctls and IPVS timeouts, as the first sync does
// and as kube-proxy's --init-only does before it exits.
func (d *Dataplane) InitNode(ctx context.Context, node *model.Node) error {
	return errors.Join(d.settings.write(ctx, d.k, node)...)
}
