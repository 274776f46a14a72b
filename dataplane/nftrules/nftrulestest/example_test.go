package nftrulestest_test

import (
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
)

// A test writes a node's rules on the fake kernel, checks them, and sees
// which transactions the writer sent.
func Example() {
	k := nftrulestest.New(nil)
	conn := k.Dial()
	node := model.Node{MasqueradeMark: 1 << 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	setIndex := func(name string) (uint16, error) { return 0, nil }
	if err := nftrules.Write(conn, &node, setIndex); err != nil {
		fmt.Println(err)
		return
	}
	current, err := nftrules.Current(conn, &node)
	fmt.Println(current, err)
	fmt.Println(k.Tables())
	for _, tx := range k.Transactions() {
		fmt.Println(tx.Ops[:3], len(tx.Ops), tx.Err)
	}
	// Output:
	// true <nil>
	// [ip ipvsplane ip6 ipvsplane]
	// [add table ip ipvsplane delete table ip ipvsplane add table ip ipvsplane] 62 <nil>
	// [add table ip6 ipvsplane delete table ip6 ipvsplane add table ip6 ipvsplane] 62 <nil>
}
