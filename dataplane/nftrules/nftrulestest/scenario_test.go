package nftrulestest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"golang.org/x/sys/unix"
)

// listRuleset reads the ruleset back through conn, as any client would,
// and prints it without the handles the kernel picks: one line per table,
// chain and rule, sorted.
func listRuleset(t *testing.T, conn *nftables.Conn) string {
	t.Helper()
	tables, err := conn.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, tb := range tables {
		lines = append(lines, fmt.Sprintf("table %d %s", tb.Family, tb.Name))
	}
	chains, err := conn.ListChains()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chains {
		line := fmt.Sprintf("chain %d %s %s", c.Table.Family, c.Table.Name, c.Name)
		if c.Hooknum != nil {
			line += fmt.Sprintf(" type %s hook %d priority %d policy %d", c.Type, *c.Hooknum, *c.Priority, *c.Policy)
		}
		lines = append(lines, line)
		rules, err := conn.GetRules(c.Table, c)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rules {
			comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			lines = append(lines, fmt.Sprintf("rule %d %s %s %d: %s # %s", c.Table.Family, c.Name, c.Table.Name, i, exprsText(r.Exprs), comment))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func exprsText(exprs []expr.Any) string {
	var parts []string
	for _, e := range exprs {
		if m, ok := e.(*expr.Match); ok {
			if info, ok := m.Info.(*xt.Unknown); ok {
				parts = append(parts, fmt.Sprintf("match %s rev %d info %x", m.Name, m.Rev, []byte(*info)))
				continue
			}
		}
		parts = append(parts, fmt.Sprintf("%T%+v", e, e))
	}
	return strings.Join(parts, " ")
}

// errnoOf names the errno an error carries, or says it carries none.
func errnoOf(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return "error without errno: " + err.Error()
}

// step is the outcome of one step of the scenario and the ruleset it
// left.
type step struct {
	outcome, ruleset string
}

// scenario writes the fixture node's rules twice beside another program's
// table, refuses batches (a replacement that jumps nowhere, a delete of a
// chain in use, a match of a missing set), and deletes
// ipvsplane's tables; it returns each step's outcome and the ruleset
// listed after it.
func scenario(t *testing.T, conn *nftables.Conn, index nftrules.SetIndexer) []step {
	t.Helper()
	var out []step
	add := func(name string, err error) {
		out = append(out, step{name + ": " + errnoOf(err), listRuleset(t, conn)})
	}
	node := fixture.Node()
	add("write", nftrules.Write(conn, &node, index))

	other := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"}
	conn.AddTable(other)
	input := conn.AddChain(&nftables.Chain{Name: "INPUT", Table: other, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	conn.AddChain(&nftables.Chain{Name: "LOG-ME", Table: other})
	conn.AddRule(&nftables.Rule{Table: other, Chain: input, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "LOG-ME"}}})
	add("another program's table", conn.Flush())

	add("write again", nftrules.Write(conn, &node, index))
	current, err := nftrules.Current(conn, &node)
	out = append(out, step{fmt.Sprintf("current: %v %s", current, errnoOf(err)), listRuleset(t, conn)})

	// A replacement whose last rule jumps to a chain that does not exist:
	// the kernel refuses the batch whole, the delete before it included.
	ours := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftrules.TableName}
	conn.DelTable(ours)
	conn.AddTable(ours)
	c := conn.AddChain(&nftables.Chain{Name: "KUBE-SERVICES", Table: ours})
	conn.AddRule(&nftables.Rule{Table: ours, Chain: c, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "NOWHERE"}}})
	add("refused batch", conn.Flush())

	conn.DelChain(&nftables.Chain{Name: "LOG-ME", Table: other})
	add("delete a chain jumped to", conn.Flush())

	missingSet := xt.Unknown(append([]byte{0xff, 0x0f, 1, 0}, make([]byte, 44)...))
	conn.AddRule(&nftables.Rule{Table: other, Chain: input, Exprs: []expr.Any{
		&expr.Match{Name: "set", Rev: 4, Info: &missingSet}, &expr.Verdict{Kind: expr.VerdictAccept}}})
	add("match a set that does not exist", conn.Flush())

	add("delete", nftrules.Delete(conn))
	conn.DelTable(ours)
	add("delete a missing table", conn.Flush())
	return out
}

// anyIndex resolves every set to index 0: the fake does not look sets up.
func anyIndex(string) (uint16, error) { return 0, nil }

func TestScenario(t *testing.T) {
	k := nftrulestest.New(&nftrulestest.Options{SetExists: func(i uint16) bool { return i == 0 }})
	conn := k.Dial()
	steps := scenario(t, conn, anyIndex)
	var outcomes []string
	for _, s := range steps {
		outcomes = append(outcomes, s.outcome)
	}
	want := []string{
		"write: ok", "another program's table: ok", "write again: ok", "current: true ok",
		"refused batch: ENOENT", "delete a chain jumped to: EBUSY", "match a set that does not exist: ENOENT", "delete: ok", "delete a missing table: ENOENT",
	}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes %q, want %q", outcomes, want)
	}
	// Writing twice leaves one table per family; the refused batches left
	// the ruleset as it was; Delete removed only ipvsplane's tables.
	written := steps[2].ruleset
	for _, fam := range []string{"table 2 ipvsplane\n", "table 10 ipvsplane\n", "table 2 filter\n"} {
		if n := strings.Count(written, fam); n != 1 {
			t.Errorf("after writing twice, %d of %q:\n%s", n, fam, written)
		}
	}
	if steps[4].ruleset != written || steps[5].ruleset != written || steps[6].ruleset != written {
		t.Errorf("a refused batch changed the ruleset:\n%s\nthen\n%s", written, steps[4].ruleset)
	}
	if got, want := k.Tables(), []string{"ip filter"}; !slices.Equal(got, want) {
		t.Errorf("tables left %q, want %q", got, want)
	}
}
