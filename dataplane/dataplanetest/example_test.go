package dataplanetest_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// A program's whole sync runs on a Node: here one Service, after which the
// Node shows what the kernel would hold.
func Example() {
	dir, err := os.MkdirTemp("", "dataplanetest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	n, err := dataplanetest.New(dir, nil)
	if err != nil {
		panic(err)
	}
	d, err := n.Open(nil)
	if err != nil {
		panic(err)
	}
	defer d.Close()

	web := model.ServicePort{
		Name:       model.ServicePortName{Namespace: "default", Name: "web"},
		Protocol:   inet.TCP,
		Port:       80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Endpoints:  []model.Endpoint{{Addr: netip.MustParseAddr("10.244.1.2"), Port: 8080, Ready: true, Serving: true}},
	}
	state := &model.State{
		Node:     model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.1")}},
		Services: []model.ServicePort{web},
	}
	res, err := d.Sync(context.Background(), state)
	if err != nil || len(res.Errors) > 0 {
		panic(fmt.Sprint(err, res.Errors))
	}
	fmt.Print(n.IPVS.Dump())
	forward, _ := os.ReadFile(filepath.Join(n.ProcSys, "net/ipv4/ip_forward"))
	fmt.Println("ip_forward", strings.TrimSpace(string(forward)))
	// Output:
	// TCP 10.96.0.10:80 rr
	//   -> 10.244.1.2:8080 masq 1
	// ip_forward 1
}
