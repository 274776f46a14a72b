package ipsettest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
)

// allow is the importer's code under test: it keeps a set of the client
// addresses allowed to reach a port.
func allow(ctx context.Context, c *ipset.Conn, clients ...string) error {
	s := ipset.Set{Name: "allowed", Type: ipset.HashIP, Comment: true}
	if err := c.Create(ctx, s, ipset.ExistOK); err != nil {
		return err
	}
	entries := make([]ipset.Entry, len(clients))
	for i, a := range clients {
		entries[i] = ipset.Entry{Addr: netip.MustParseAddr(a), Comment: "client"}
	}
	return c.AddEntries(ctx, s.Name, entries, ipset.Exclusive)
}

// A test of allow runs it on a fake kernel and checks the sets the kernel
// ends up with; an address allowed twice fails as on a host.
func Example() {
	ctx := context.Background()
	k := ipsettest.New(nil)
	c := k.Dial()
	defer c.Close()

	fmt.Println(allow(ctx, c, "10.0.0.1", "10.0.0.2"))
	fmt.Print(k.Dump())

	err := allow(ctx, c, "10.0.0.3", "10.0.0.1")
	fmt.Println(errors.Is(err, ipset.ErrEntryExist))
	_, entries, _ := k.Set("allowed")
	fmt.Println(len(entries))
	// Output:
	// <nil>
	// create allowed hash:ip family inet hashsize 1024 maxelem 65536 comment
	// add allowed 10.0.0.1 comment "client"
	// add allowed 10.0.0.2 comment "client"
	// true
	// 3
}
