// Package conntracksettings applies kube-proxy's conntrack settings at
// start (the table's size, its timeouts), as kube-proxy's
// pkg/proxy/conntrack does, and reports the table's use against its limit
// as metrics.
package conntracksettings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// conntrackMaxLimit caps maxPerCore times the CPUs as kube-proxy caps it,
// so that a many-core node does not spend its memory on the table.
const conntrackMaxLimit = 1 << 20

// Paths are where the conntrack settings live: /proc/sys, and the
// nf_conntrack module's parameters for the hash table's size.
type Paths struct {
	ProcSys, ModuleParams string
}

// HostPaths are the paths of the running kernel.
func HostPaths() Paths {
	return Paths{ProcSys: "/proc/sys", ModuleParams: "/sys/module/nf_conntrack/parameters"}
}

// ErrReadOnly is matched by the error of a conntrack setting this network
// namespace may not change: nf_conntrack_max and the hash size belong to
// the whole host, and read only in other namespaces.
var ErrReadOnly = errors.New("read-only here")

// Apply writes kube-proxy's conntrack settings as kube-proxy does
// at start: nf_conntrack_max raised (never lowered) to maxPerCore per CPU,
// at least min (the product capped at 2^20), and the hash table grown to a quarter of it
// (both only when maxPerCore is above 0); each timeout, when above 0; be
// liberal, when true. It returns the settings it changed. The table's size
// belongs to the host: where this network namespace may not change it,
// that is returned as skipped (ErrReadOnly) and the rest is still set.
func Apply(c *kubeproxy.KubeProxyConntrackConfiguration, cpus int, p Paths) (changed []string, skipped, err error) {
	changed, err = raiseConntrackMax(conntrackMax(c, cpus), p)
	if errors.Is(err, ErrReadOnly) {
		skipped, err = err, nil
	}
	if err != nil {
		return changed, nil, err
	}
	var set []model.Sysctl
	seconds := func(name string, d time.Duration) {
		if d > 0 {
			set = append(set, model.Sysctl{Name: "net/netfilter/" + name, Value: int(d / time.Second)})
		}
	}
	if c.TCPEstablishedTimeout != nil {
		seconds("nf_conntrack_tcp_timeout_established", c.TCPEstablishedTimeout.Duration)
	}
	if c.TCPCloseWaitTimeout != nil {
		seconds("nf_conntrack_tcp_timeout_close_wait", c.TCPCloseWaitTimeout.Duration)
	}
	if c.TCPBeLiberal {
		set = append(set, model.Sysctl{Name: "net/netfilter/nf_conntrack_tcp_be_liberal", Value: 1})
	}
	seconds("nf_conntrack_udp_timeout", c.UDPTimeout.Duration)
	seconds("nf_conntrack_udp_timeout_stream", c.UDPStreamTimeout.Duration)
	more, err := dataplane.WriteSysctls(p.ProcSys, set)
	return append(changed, more...), skipped, err
}

// raiseConntrackMax raises nf_conntrack_max to want, and the hash table
// to a quarter of it; want 0 leaves both.
func raiseConntrackMax(want int, p Paths) ([]string, error) {
	if want <= 0 {
		return nil, nil
	}
	var changed []string
	cur, err := readInt(filepath.Join(p.ProcSys, "net/netfilter/nf_conntrack_max"))
	if err != nil || cur < want {
		if err := writeSetting(p.ProcSys, "net/netfilter/nf_conntrack_max", want); err != nil {
			return nil, err
		}
		changed = append(changed, "net/netfilter/nf_conntrack_max")
	}
	hash, err := readInt(filepath.Join(p.ModuleParams, "hashsize"))
	if err != nil {
		return changed, fmt.Errorf("conntrack hash size: %w", err)
	}
	if hash < want/4 {
		if err := writeSetting(p.ModuleParams, "hashsize", want/4); err != nil {
			return changed, err
		}
		changed = append(changed, "nf_conntrack hashsize")
	}
	return changed, nil
}

// conntrackMax is the nf_conntrack_max kube-proxy asks for; 0 leaves it.
func conntrackMax(c *kubeproxy.KubeProxyConntrackConfiguration, cpus int) int {
	if c.MaxPerCore == nil || *c.MaxPerCore <= 0 {
		return 0
	}
	floor := 0
	if c.Min != nil {
		floor = int(*c.Min)
	}
	scaled := int(*c.MaxPerCore) * cpus
	// Only the product is capped: a min above the cap is kept, but a
	// product above it wins over min and is capped.
	if scaled > conntrackMaxLimit {
		return conntrackMaxLimit
	}
	return max(scaled, floor)
}

// readInt reads a file holding one integer.
func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// writeSetting writes one value below root; a setting this namespace may
// not change gives an error matching ErrReadOnly.
func writeSetting(root, name string, v int) error {
	err := os.WriteFile(filepath.Join(root, name), []byte(strconv.Itoa(v)), 0o644)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%s = %d: %w (%w)", name, v, ErrReadOnly, err)
	}
	if err != nil {
		return fmt.Errorf("%s = %d: %w", name, v, err)
	}
	return nil
}

// OnlineCPUs counts the host's online CPUs, as kube-proxy sizes the
// host-wide conntrack table: not the CPUs this process may use, which a
// static CPU policy limits.
func OnlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, err := countCPUList(strings.TrimSpace(string(b)))
	if err != nil || n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// countCPUList counts the CPUs of a list such as "0-3,6,8-9".
func countCPUList(list string) (int, error) {
	n := 0
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q", list)
			}
		}
		n += b - a + 1
	}
	return n, nil
}
