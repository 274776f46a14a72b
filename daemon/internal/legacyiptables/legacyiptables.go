// Package legacyiptables removes kube-proxy's chains from the
// iptables-legacy tables, which the dataplane's nftables cleanup cannot
// see, by running the iptables-legacy programs as kube-proxy's cleanup
// does.
package legacyiptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
)

// kube-proxy's chains in the iptables-legacy tables. The dataplane removes
// kube-proxy's leftovers over nftables, which sees iptables-nft's tables
// only; a node whose kube-proxy ran with iptables-legacy keeps its chains
// in the kernel's x_tables, reached only through the iptables-legacy
// programs (kube-proxy runs the same programs: its image's iptables picks
// legacy or nft as the node does). So they are run when the node has them
// and its legacy tables are in use.

// legacyFamily names, for one family, the kernel's list of legacy tables
// in use and the programs that read and write them.
type legacyFamily struct {
	names, save, restore string
}

func legacyFamilies() []legacyFamily {
	return []legacyFamily{
		{"ip_tables_names", "iptables-legacy-save", "iptables-legacy-restore"},
		{"ip6_tables_names", "ip6tables-legacy-save", "ip6tables-legacy-restore"},
	}
}

// Report says what RemoveKubeProxy did.
type Report struct {
	// Removed names the chains removed, as "iptables-legacy nat KUBE-SERVICES".
	Removed []string
	// Unreadable names the programs missing for legacy tables in use, which
	// were not looked at.
	Unreadable []string
}

// RemoveKubeProxy removes the chains plan.IsKubeProxyChain names,
// and the rules that only jump to them, from the iptables-legacy tables in
// use in the network namespace whose /proc/.../net procNet is, each table
// in one iptables-legacy-restore, as kube-proxy's cleanup does. A family
// whose legacy tables are not in use is not touched (reading them would
// load them); one whose programs are missing is reported.
func RemoveKubeProxy(ctx context.Context, procNet string) (Report, error) {
	var report Report
	var errs []error
	for _, f := range legacyFamilies() {
		data, err := os.ReadFile(filepath.Join(procNet, f.names))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tables := strings.Fields(string(data))
		if len(tables) == 0 {
			continue
		}
		if missing := missingPrograms(f.save, f.restore); len(missing) > 0 {
			report.Unreadable = append(report.Unreadable, missing...)
			continue
		}
		for _, table := range tables {
			removed, err := removeLegacyTable(ctx, f, table)
			report.Removed = append(report.Removed, removed...)
			errs = append(errs, err)
		}
	}
	return report, errors.Join(errs...)
}

// missingPrograms returns those of the programs not found in $PATH.
func missingPrograms(programs ...string) []string {
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// removeLegacyTable removes kube-proxy's chains from one legacy table.
func removeLegacyTable(ctx context.Context, f legacyFamily, table string) ([]string, error) {
	out, err := exec.CommandContext(ctx, f.save, "-t", table).Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w%s", f.save, table, err, stderrOf(err))
	}
	script, removed := legacyRestoreScript(table, string(out))
	if len(removed) == 0 {
		return nil, nil
	}
	cmd := exec.CommandContext(ctx, f.restore, "--noflush", "--wait=5")
	cmd.Stdin = strings.NewReader(script)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: removing kube-proxy's chains %v of table %s: %w: %s", f.restore, removed, table, err, bytes.TrimSpace(msg))
	}
	family := strings.TrimSuffix(f.save, "-save")
	for i, c := range removed {
		removed[i] = family + " " + table + " " + c
	}
	return removed, nil
}

// stderrOf returns what a failed program wrote on its standard error.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return ": " + string(bytes.TrimSpace(exit.Stderr))
	}
	return ""
}

// legacyRestoreScript returns the iptables-restore --noflush input that
// removes kube-proxy's chains from a table iptables-save printed: the
// chains are declared (which flushes them), the rules of other chains that
// only jump to them deleted, and the chains deleted; and the chains'
// names, sorted. A table without kube-proxy's chains gives none.
func legacyRestoreScript(table, saved string) (string, []string) {
	var doomed []string
	var rules []string
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			if name, _, _ := strings.Cut(line[1:], " "); plan.IsKubeProxyChain(table, name) {
				doomed = append(doomed, name)
			}
		case strings.HasPrefix(line, "-A "):
			rules = append(rules, line)
		}
	}
	if len(doomed) == 0 {
		return "", nil
	}
	slices.Sort(doomed)
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, c := range doomed {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, r := range rules {
		args := splitRule(r)
		if len(args) < 2 || slices.Contains(doomed, args[1]) {
			continue
		}
		if onlyJumpsToChain(args[2:], func(c string) bool { return slices.Contains(doomed, c) }) {
			fmt.Fprintf(&b, "-D%s\n", strings.TrimPrefix(r, "-A"))
		}
	}
	for _, c := range doomed {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String(), doomed
}

// onlyJumpsToChain reports whether a rule's arguments (after -A CHAIN) do
// nothing but jump or go to a doomed chain, behind kube-proxy's comment
// and conntrack state matches.
func onlyJumpsToChain(args []string, doomed func(string) bool) bool {
	jumps := false
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return false
		}
		switch opt, val := args[i], args[i+1]; {
		case opt == "-m" && (val == "comment" || val == "conntrack"):
		case opt == "--comment" || opt == "--ctstate":
		case (opt == "-j" || opt == "-g") && doomed(val):
			jumps = true
		default:
			return false
		}
	}
	return jumps
}

// splitRule splits a line of iptables-save into its words, a quoted word
// (a comment) being one, without its quotes.
func splitRule(line string) []string {
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && quoted && i+1 < len(line):
			i++
			w.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
