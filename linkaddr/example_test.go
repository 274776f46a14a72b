package linkaddr_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ipvsplane/ipvsplane/linkaddr"
)

// Lists the node's own addresses, those on kube-ipvs0 (the service
// addresses) left out.
func Example() {
	conn, err := linkaddr.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	addrs, err := conn.Addresses(context.Background(), "kube-ipvs0")
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range addrs {
		if !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			fmt.Println(a)
		}
	}
}
