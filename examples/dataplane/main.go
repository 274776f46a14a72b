// Command dataplane programs a node from a JSON description of its
// services and endpoints, the way ipvsplane's daemon does from the cluster:
// IPVS virtual and real servers, the KUBE-* ipsets, the kube-ipvs0 device
// and the nftables rules. With -dry-run it prints the plan against the
// kernel as it is and changes nothing; -cleanup removes what it made.
//
//	dataplane -dry-run services.json
//	dataplane services.json
//	dataplane -cleanup
//
// It needs CAP_NET_ADMIN and a kernel with IPVS. testdata/services.json is
// an example description.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// description is the file format: a node and its service ports.
type description struct {
	Node struct {
		Name         string         `json:"name"`
		Addresses    []netip.Addr   `json:"addresses"`
		ClusterCIDRs []netip.Prefix `json:"clusterCIDRs"`
		Scheduler    string         `json:"scheduler"`
		StrictARP    bool           `json:"strictARP"`
	} `json:"node"`
	Services []struct {
		Namespace       string         `json:"namespace"`
		Name            string         `json:"name"`
		PortName        string         `json:"portName"`
		Protocol        string         `json:"protocol"`
		Port            uint16         `json:"port"`
		ClusterIPs      []netip.Addr   `json:"clusterIPs"`
		NodePort        uint16         `json:"nodePort"`
		ExternalIPs     []netip.Addr   `json:"externalIPs"`
		LoadBalancerIPs []netip.Addr   `json:"loadBalancerIPs"`
		SourceRanges    []netip.Prefix `json:"loadBalancerSourceRanges"`
		AffinitySeconds int            `json:"sessionAffinitySeconds"`
		ExternalLocal   bool           `json:"externalTrafficPolicyLocal"`
		Endpoints       []struct {
			Addr        netip.Addr `json:"addr"`
			Port        uint16     `json:"port"`
			Node        string     `json:"node"`
			Terminating bool       `json:"terminating"`
		} `json:"endpoints"`
	} `json:"services"`
}

func main() {
	dryRun := flag.Bool("dry-run", false, "print the plan against the kernel and change nothing")
	cleanup := flag.Bool("cleanup", false, "remove everything ipvsplane made, and nothing else")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-dry-run] FILE.json | -cleanup\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*dryRun, *cleanup, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dryRun, cleanup bool, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d, err := dataplane.New(nil)
	if err != nil {
		return err
	}
	defer d.Close()
	if cleanup {
		return d.Cleanup(ctx)
	}
	if len(args) != 1 {
		return fmt.Errorf("want one description file, got %d arguments", len(args))
	}
	state, err := load(args[0])
	if err != nil {
		return err
	}
	if dryRun {
		plan, problems, err := d.DryRun(ctx, state)
		if err != nil {
			return err
		}
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "left out:", p)
		}
		fmt.Print(plan)
		return nil
	}
	res, err := d.Sync(ctx, state)
	if err != nil {
		return err
	}
	for _, e := range res.Errors {
		fmt.Fprintln(os.Stderr, "error:", e)
	}
	fmt.Printf("%d operations applied, %d errors\n", res.Plan.Len(), len(res.Errors))
	return nil
}

func load(path string) (*model.State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var desc description
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&desc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	state := &model.State{Node: model.Node{
		Name:         desc.Node.Name,
		Addresses:    desc.Node.Addresses,
		ClusterCIDRs: desc.Node.ClusterCIDRs,
		Scheduler:    desc.Node.Scheduler,
		StrictARP:    desc.Node.StrictARP,
	}}
	for i, s := range desc.Services {
		proto, ok := map[string]inet.Protocol{"": inet.TCP, "TCP": inet.TCP, "UDP": inet.UDP, "SCTP": inet.SCTP}[strings.ToUpper(s.Protocol)]
		if !ok {
			return nil, fmt.Errorf("%s: services[%d].protocol: unknown protocol %q", path, i, s.Protocol)
		}
		sp := model.ServicePort{
			Name:                     model.ServicePortName{Namespace: s.Namespace, Name: s.Name, Port: s.PortName},
			Protocol:                 proto,
			Port:                     s.Port,
			ClusterIPs:               s.ClusterIPs,
			NodePort:                 s.NodePort,
			ExternalIPs:              s.ExternalIPs,
			LoadBalancerIPs:          s.LoadBalancerIPs,
			LoadBalancerSourceRanges: s.SourceRanges,
			SessionAffinity:          time.Duration(s.AffinitySeconds) * time.Second,
		}
		if s.ExternalLocal {
			sp.ExternalPolicy = model.PolicyLocal
		}
		for _, e := range s.Endpoints {
			sp.Endpoints = append(sp.Endpoints, model.Endpoint{
				Addr: e.Addr, Port: e.Port, NodeName: e.Node,
				Ready: !e.Terminating, Serving: true, Terminating: e.Terminating,
			})
		}
		state.Services = append(state.Services, sp)
	}
	return state, nil
}
