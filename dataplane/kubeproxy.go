package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"golang.org/x/sys/unix"
)

// findKubeProxyChains lists what kube-proxy left in nftables, in both
// families: the tables of its nftables mode, and the chains of its IPVS
// and iptables modes that plan.IsKubeProxyChain names in the iptables-nft
// tables (docs/kube-proxy-ipvs-semantics.md §3.1).
func findKubeProxyChains(conn *nftables.Conn) ([]planner.KubeProxyChain, error) {
	var found []planner.KubeProxyChain
	for _, f := range inet.Families() {
		family := nftables.TableFamily(f) // inet numbers families as NFPROTO_*
		tables, err := conn.ListTablesOfFamily(family)
		if err != nil {
			return nil, fmt.Errorf("listing the nftables tables: %w", err)
		}
		for _, t := range tables {
			if t.Name == planner.KubeProxyNFTable {
				found = append(found, planner.KubeProxyChain{Family: f, Table: t.Name})
			}
		}
		chains, err := conn.ListChainsOfTableFamily(family)
		if err != nil {
			return nil, fmt.Errorf("listing the nftables chains: %w", err)
		}
		for _, c := range chains {
			if plan.IsKubeProxyChain(c.Table.Name, c.Name) {
				found = append(found, planner.KubeProxyChain{Family: f, Table: c.Table.Name, Chain: c.Name})
			}
		}
	}
	slices.SortFunc(found, planner.KubeProxyChain.Compare)
	return found, nil
}

// removeKubeProxyLeftovers finds and removes what kube-proxy left.
func removeKubeProxyLeftovers(conn *nftables.Conn) error {
	found, err := findKubeProxyChains(conn)
	if err != nil || len(found) == 0 {
		return err
	}
	return removeKubeProxyChains(conn, found)
}

// removeKubeProxyChains deletes what kube-proxy left: each nftables-mode
// table, and each iptables table's chains, in a transaction of its own, as
// kube-proxy's cleanup restores each table on its own, so that another
// program's reference into one table's chains keeps only that table's.
// All are tried; the error joins those that failed.
func removeKubeProxyChains(conn *nftables.Conn, remove []planner.KubeProxyChain) error {
	var errs []error
	byTable := map[planner.KubeProxyChain][]planner.KubeProxyChain{} // key: Chain empty
	for _, c := range remove {
		if c.Chain == "" {
			errs = append(errs, removeKubeProxyTable(conn, c))
			continue
		}
		t := planner.KubeProxyChain{Family: c.Family, Table: c.Table}
		byTable[t] = append(byTable[t], c)
	}
	for _, t := range slices.SortedFunc(maps.Keys(byTable), planner.KubeProxyChain.Compare) {
		errs = append(errs, removeKubeProxyTableChains(conn, t, byTable[t]))
	}
	return errors.Join(errs...)
}

// removeKubeProxyTable deletes a table of kube-proxy's nftables mode, as
// its cleanup does: the whole table, whatever it holds.
func removeKubeProxyTable(conn *nftables.Conn, t planner.KubeProxyChain) error {
	family := nftables.TableFamilyIPv4
	if t.Family == inet.IPv6 {
		family = nftables.TableFamilyIPv6
	}
	conn.DelTable(&nftables.Table{Family: family, Name: t.Table})
	if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing kube-proxy's %s: %w", t, err)
	}
	return nil
}

// removeKubeProxyTableChains deletes kube-proxy's chains of one table in
// one transaction: first the rules of the table's other chains that only
// jump to them (kube-proxy's jumps from PREROUTING, INPUT and the other
// hooks), then the chains' rules, then the chains. A rule of another
// program that refers to one of them is not touched: the kernel then
// refuses the transaction (EBUSY), and the error names the chains.
func removeKubeProxyTableChains(conn *nftables.Conn, table planner.KubeProxyChain, remove []planner.KubeProxyChain) error {
	doomed := make(map[string]bool, len(remove))
	for _, c := range remove {
		doomed[c.Chain] = true
	}
	family := nftables.TableFamilyIPv4
	if table.Family == inet.IPv6 {
		family = nftables.TableFamilyIPv6
	}
	chains, err := conn.ListChainsOfTableFamily(family)
	if err != nil {
		return fmt.Errorf("listing the nftables chains: %w", err)
	}
	var kube []*nftables.Chain
	for _, c := range chains {
		switch {
		case c.Table.Name != table.Table:
		case doomed[c.Name]:
			kube = append(kube, c)
		default:
			if err := delJumpsTo(conn, c, doomed); err != nil {
				return fmt.Errorf("%s %s: %w", table, c.Name, err)
			}
		}
	}
	for _, c := range kube {
		conn.FlushChain(c)
	}
	for _, c := range kube {
		conn.DelChain(c)
	}
	if err := conn.Flush(); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("removing kube-proxy's chains %v: another program's rule refers to one of them: %w", remove, err)
		}
		return fmt.Errorf("removing kube-proxy's chains %v: %w", remove, err)
	}
	return nil
}

// delJumpsTo queues the deletion of the rules of chain c that only jump
// to a doomed chain.
func delJumpsTo(conn *nftables.Conn, c *nftables.Chain, doomed map[string]bool) error {
	rules, err := conn.GetRules(c.Table, c)
	if err != nil {
		return fmt.Errorf("reading the rules: %w", err)
	}
	for _, r := range rules {
		if onlyJumpsTo(r, func(target string) bool { return doomed[target] }) {
			if err := conn.DelRule(r); err != nil {
				return fmt.Errorf("deleting a jump to kube-proxy's chains: %w", err)
			}
		}
	}
	return nil
}

// onlyJumpsTo reports whether a rule does nothing but jump (or go) to a
// chain that doomed names, counting packets on the way, as iptables-nft
// writes kube-proxy's `[-m conntrack --ctstate NEW] -m comment --comment
// ... -j CHAIN`: the comment is user data or a comment match, the state a
// conntrack match or, from newer iptables-nft, a native ct state test.
func onlyJumpsTo(r *nftables.Rule, doomed func(chain string) bool) bool {
	jumps, ctState := false, false
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Counter:
		case *expr.Match:
			if e.Name != "comment" && e.Name != "conntrack" {
				return false
			}
		case *expr.Ct:
			if e.Key != expr.CtKeySTATE {
				return false
			}
			ctState = true
		case *expr.Bitwise, *expr.Cmp:
			// The mask and comparison of the ct state test.
			if !ctState {
				return false
			}
		case *expr.Verdict:
			if (e.Kind != expr.VerdictJump && e.Kind != expr.VerdictGoto) || !doomed(e.Chain) {
				return false
			}
			jumps = true
		default:
			return false
		}
	}
	return jumps
}
