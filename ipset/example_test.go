package ipset_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// Load a set atomically, look up its kernel index for an nftables rule, and
// then keep it current by changing only what changed.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ipset.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	set := ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort, Family: inet.IPv4}
	entries := []ipset.Entry{
		{Addr: netip.MustParseAddr("10.96.0.1"), Protocol: inet.TCP, Port: 443},
		{Addr: netip.MustParseAddr("10.96.0.10"), Protocol: inet.UDP, Port: 53},
	}
	if err := c.Replace(ctx, set, entries); err != nil {
		log.Fatal(err)
	}
	index, err := c.Index(ctx, set.Name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("set index for the xt set match:", index)

	entries = append(entries, ipset.Entry{Addr: netip.MustParseAddr("10.96.0.20"), Protocol: inet.TCP, Port: 80})
	plan, err := c.Sync(ctx, set.Name, entries)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("added %d, deleted %d\n", len(plan.Add), len(plan.Delete))

	h, members, err := c.List(ctx, set.Name)
	if err != nil {
		log.Fatal(err)
	}
	if err := ipset.WriteSave(os.Stdout, h, members); err != nil {
		log.Fatal(err)
	}
}

// Bulk errors name each refused entry; the others are added.
func ExampleConn_AddEntries() {
	ctx := context.Background()
	c, err := ipset.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	entries := []ipset.Entry{
		{Addr: netip.MustParseAddr("10.0.0.1"), Protocol: inet.TCP, Port: 80},
		{Addr: netip.MustParseAddr("10.0.0.2"), Protocol: inet.TCP, Port: 80},
	}
	err = c.AddEntries(ctx, "KUBE-LOOP-BACK", entries, ipset.Exclusive)
	var batch *ipset.BatchError
	switch {
	case errors.As(err, &batch):
		for _, e := range batch.Failed {
			fmt.Printf("entry %d (%s): %v\n", e.Index, entries[e.Index], e.Err)
		}
	case errors.Is(err, ipset.ErrSetNotExist):
		fmt.Println("create the set first")
	case err != nil:
		log.Fatal(err)
	}
}

func ExampleParseEntry() {
	e, err := ipset.ParseEntry(ipset.HashIPPortNet, "1.2.3.4,tcp:443,10.0.0.0/8")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Addr, e.Protocol, e.Port, e.Net2)
	fmt.Println(e)
	// Output:
	// 1.2.3.4 tcp 443 10.0.0.0/8
	// 1.2.3.4,tcp:443,10.0.0.0/8
}
