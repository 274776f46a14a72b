package nftrulestest

import (
	"slices"

	"github.com/google/nftables"
)

// ruleset is what the kernel holds, by table. A transaction works on a
// copy, which replaces it when the batch commits.
type ruleset struct {
	tables []*table
	// lastTable is the namespace's table handle generator.
	lastTable uint64
}

type table struct {
	family nftables.TableFamily
	name   string
	handle uint64
	flags  uint32
	chains []*chain
	// lastHandle generates the handles of the table's chains and rules.
	lastHandle uint64
}

type chain struct {
	name   string
	handle uint64
	// base is set for a chain at a hook.
	base  *baseChain
	rules []*rule
}

type baseChain struct {
	typ      nftables.ChainType
	hook     uint32
	priority int32
	policy   uint32
}

type rule struct {
	handle uint64
	// exprs is NFTA_RULE_EXPRESSIONS as written, dumped back as it came.
	exprs    []byte
	userdata []byte
	// targets are the chains the rule jumps or goes to.
	targets []string
	// names are its expressions' names, for Dump.
	names []string
}

func (rs *ruleset) clone() *ruleset {
	c := &ruleset{lastTable: rs.lastTable, tables: make([]*table, len(rs.tables))}
	for i, t := range rs.tables {
		ct := *t
		ct.chains = make([]*chain, len(t.chains))
		for j, ch := range t.chains {
			cc := *ch
			cc.rules = slices.Clone(ch.rules)
			ct.chains[j] = &cc
		}
		c.tables[i] = &ct
	}
	return c
}

func (rs *ruleset) table(family nftables.TableFamily, name string) *table {
	i := slices.IndexFunc(rs.tables, func(t *table) bool { return t.family == family && t.name == name })
	if i < 0 {
		return nil
	}
	return rs.tables[i]
}

func (t *table) chain(name string) *chain {
	i := slices.IndexFunc(t.chains, func(c *chain) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return t.chains[i]
}

// referenced says whether a rule of the table other than in chain c
// jumps or goes to c, which keeps the kernel from deleting it.
func (t *table) referenced(c *chain) bool {
	for _, other := range t.chains {
		if other == c {
			continue
		}
		for _, r := range other.rules {
			if slices.Contains(r.targets, c.name) {
				return true
			}
		}
	}
	return false
}

func (t *table) nextHandle() uint64 {
	t.lastHandle++
	return t.lastHandle
}
