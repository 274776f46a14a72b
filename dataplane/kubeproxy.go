package dataplane

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"golang.org/x/sys/unix"
)

// nftFamilies are the nftables families of kube-proxy's iptables-nft
// tables.
var nftFamilies = []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6}

// kubeProxyChains names, per table, the chains kube-proxy's IPVS mode makes
// (docs/kube-proxy-ipvs-semantics.md §3.1). ipvsplane removes exactly
// these, and the rules that do nothing but jump to them; chains of the same
// tables that other programs made (kubelet's KUBE-FIREWALL, a CNI's, the
// node's own) are left alone.
var kubeProxyChains = map[string][]string{
	"nat":    {"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ"},
	"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"},
}

// findKubeProxyChains lists the chains of kubeProxyChains present in the
// iptables-nft tables of both families.
func findKubeProxyChains(conn *nftables.Conn) ([]plan.KubeProxyChain, error) {
	var found []plan.KubeProxyChain
	for _, family := range nftFamilies {
		ipv6 := family == nftables.TableFamilyIPv6
		chains, err := conn.ListChainsOfTableFamily(family)
		if err != nil {
			return nil, fmt.Errorf("listing the nftables chains: %w", err)
		}
		for _, c := range chains {
			if slices.Contains(kubeProxyChains[c.Table.Name], c.Name) {
				found = append(found, plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name, Chain: c.Name})
			}
		}
	}
	slices.SortFunc(found, plan.KubeProxyChain.Compare)
	return found, nil
}

// removeKubeProxyChains deletes kube-proxy's chains in one transaction:
// first the rules of other chains in their tables that only jump to them
// (kube-proxy's jumps from PREROUTING, INPUT and the other hooks), then
// the chains' rules, then the chains. A rule of another program that
// refers to one of them is not touched: the kernel then refuses to delete
// that chain (EBUSY), and the error names it.
func removeKubeProxyChains(conn *nftables.Conn, remove []plan.KubeProxyChain) error {
	doomed := make(map[plan.KubeProxyChain]bool, len(remove))
	tables := map[plan.KubeProxyChain]bool{} // the tables they are in, Chain empty
	for _, c := range remove {
		doomed[c] = true
		tables[plan.KubeProxyChain{IPv6: c.IPv6, Table: c.Table}] = true
	}
	var kube []*nftables.Chain
	for _, family := range nftFamilies {
		ipv6 := family == nftables.TableFamilyIPv6
		chains, err := conn.ListChainsOfTableFamily(family)
		if err != nil {
			return fmt.Errorf("listing the nftables chains: %w", err)
		}
		for _, c := range chains {
			if !tables[plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name}] {
				continue
			}
			if doomed[plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name, Chain: c.Name}] {
				kube = append(kube, c)
				continue
			}
			rules, err := conn.GetRules(c.Table, c)
			if err != nil {
				return fmt.Errorf("reading the rules of %s: %w", plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name, Chain: c.Name}, err)
			}
			for _, r := range rules {
				if onlyJumpsTo(r, func(target string) bool {
					return doomed[plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name, Chain: target}]
				}) {
					if err := conn.DelRule(r); err != nil {
						return fmt.Errorf("deleting a jump to kube-proxy's chains from %s: %w", plan.KubeProxyChain{IPv6: ipv6, Table: c.Table.Name, Chain: c.Name}, err)
					}
				}
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

// onlyJumpsTo reports whether a rule does nothing but jump (or go) to a
// chain that doomed names, counting packets on the way, as iptables-nft writes
// `-m comment --comment ... -j CHAIN` (the comment is user data).
func onlyJumpsTo(r *nftables.Rule, doomed func(chain string) bool) bool {
	jumps := false
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Counter:
		case *expr.Match:
			if e.Name != "comment" {
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
