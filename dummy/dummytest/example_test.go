package dummytest_test

import (
	"context"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
)

// A test binds service addresses on the fake kernel, has another program
// delete the device, and sees the device come back empty under the same
// name.
func Example() {
	ctx := context.Background()
	k := dummytest.New(nil)
	c := k.Dial()
	defer c.Close()

	dev, err := c.Ensure(ctx, "kube-ipvs0")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dev.BindAll(ctx, addrs("10.96.0.10", "fd00::10")))
	fmt.Print(k.Dump())

	fmt.Println(k.DeleteLink("kube-ipvs0"))
	_, err = dev.Addresses(ctx)
	fmt.Println(err)
	// Output:
	// <nil>
	// 2: kube-ipvs0 dummy
	//     inet 10.96.0.10/32
	//     inet6 fd00::10/128
	// local 10.96.0.10/32 dev kube-ipvs0 table 255 proto 2 scope 254 src 10.96.0.10
	// <nil>
	// dummy: list kube-ipvs0: link does not exist (no such device)
}
