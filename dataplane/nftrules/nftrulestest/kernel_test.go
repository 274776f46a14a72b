package nftrulestest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"golang.org/x/sys/unix"
)

// A kernel without ip6 NAT refuses the ip6 table's transaction whole: the
// ip table is replaced, the ip6 one stays as the previous write left it,
// and the refusal carries the errno.
func TestFailingWriteIsAtomic(t *testing.T) {
	k := nftrulestest.New(nil)
	conn := k.Dial()
	node := fixture.Node()
	if err := nftrules.Write(conn, &node, anyIndex); err != nil {
		t.Fatal(err)
	}
	before := k.Dump()

	k.UnregisterChainType(nftables.TableFamilyIPv6, nftables.ChainTypeNAT)
	node.MasqueradeAll = !node.MasqueradeAll
	err := nftrules.Write(conn, &node, anyIndex)
	if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("Write without ip6 nat = %v, want ENOENT", err)
	}
	after := k.Dump()
	ip6 := func(dump string) string {
		table := dump[strings.Index(dump, "table ip6 "):]
		if end := strings.Index(table[1:], "\ntable "); end >= 0 {
			table = table[:end+2]
		}
		return table
	}
	if ip6(after) != ip6(before) {
		t.Errorf("the refused ip6 transaction changed the ip6 table:\n%s\nthen\n%s", ip6(before), ip6(after))
	}
	if after == before {
		t.Error("the ip table was not replaced")
	}
	txs := k.Transactions()
	last := txs[len(txs)-1]
	if !errors.Is(last.Err, unix.ENOENT) || !slices.Contains(last.Ops, "add chain ip6 ipvsplane nat-prerouting") {
		t.Errorf("last transaction %+v, want the ip6 table's, refused with ENOENT", last)
	}
	// The replaced ip table is a new one, listed after the ip6 table.
	if got := k.Tables(); !slices.Equal(got, []string{"ip6 ipvsplane", "ip ipvsplane"}) {
		t.Errorf("tables %q", got)
	}
}

// A transaction is recorded in nft's words, each message as it came.
func TestTransactionsRecordTheBatch(t *testing.T) {
	k := nftrulestest.New(nil)
	conn := k.Dial()
	tb := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "t"})
	c := conn.AddChain(&nftables.Chain{Name: "c", Table: tb})
	conn.FlushChain(c)
	conn.DelChain(c)
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{"add table inet t", "add chain inet t c", "flush chain inet t c", "delete chain inet t c"}
	txs := k.Transactions()
	if len(txs) != 1 || !slices.Equal(txs[0].Ops, want) || txs[0].Err != nil {
		t.Errorf("transactions %+v, want one of %q", txs, want)
	}
	if got := k.Dump(); got != "table inet t\n" {
		t.Errorf("Dump = %q", got)
	}
}

// Checks the kernel makes on chains: a nat chain may not hook forward, a
// chain type must exist, an existing chain with NLM_F_EXCL is EEXIST.
func TestChainChecks(t *testing.T) {
	k := nftrulestest.New(nil)
	conn := k.Dial()
	tb := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t"})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		chain nftables.Chain
		want  unix.Errno
	}{
		{nftables.Chain{Name: "f", Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityNATDest}, unix.EOPNOTSUPP},
		{nftables.Chain{Name: "x", Type: "nosuch", Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter}, unix.ENOENT},
	} {
		tc.chain.Table = tb
		conn.AddChain(&tc.chain)
		if err := conn.Flush(); !errors.Is(err, tc.want) {
			t.Errorf("chain %s: %v, want %v", tc.chain.Name, err, tc.want)
		}
	}
	conn.AddTable(&nftables.Table{Family: 99, Name: "odd"})
	if err := conn.Flush(); !errors.Is(err, unix.EAFNOSUPPORT) {
		t.Errorf("table of family 99: %v, want EAFNOSUPPORT", err)
	}
}
