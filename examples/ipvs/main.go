// Command ipvs is a tiny layer-4 load balancer: it binds a virtual IP to a
// dummy device, programs an IPVS virtual server for VIP:PORT with the
// given backends (adding, updating and removing real servers so the
// kernel matches the command line, in one batch), and then shows the live
// table with its counters until interrupted. It needs CAP_NET_ADMIN and a
// kernel with IPVS and the dummy driver.
//
//	ipvs 10.96.0.10:80 10.244.0.5:8080 10.244.0.6:8080
//	ipvs -proto udp -sched sh -persist 5m [fd00:96::10]:53 [fd00:244::5]:53
//	ipvs -delete 10.96.0.10:80
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

type options struct {
	proto    string
	sched    string
	persist  time.Duration
	device   string
	interval time.Duration
	rounds   int // 0 shows the table until interrupted
	delete   bool
}

func main() {
	var o options
	flag.StringVar(&o.proto, "proto", "tcp", "protocol: tcp, udp or sctp")
	flag.StringVar(&o.sched, "sched", "rr", "IPVS scheduler: rr, wrr, lc, wlc, sh, mh, sed, nq, ...")
	flag.DurationVar(&o.persist, "persist", 0, "client persistence timeout (0: none)")
	flag.StringVar(&o.device, "device", "ipvs0", "dummy device that holds the VIP")
	flag.DurationVar(&o.interval, "interval", 2*time.Second, "how often to show the table")
	flag.IntVar(&o.rounds, "n", 0, "show the table this many times, then exit (0: until interrupted)")
	flag.BoolVar(&o.delete, "delete", false, "delete the virtual server and unbind the VIP instead")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] VIP:PORT BACKEND:PORT...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, args []string, out io.Writer) error {
	if len(args) < 1 {
		return errors.New("need VIP:PORT and backends")
	}
	svc, backends, err := parse(o, args)
	if err != nil {
		return err
	}
	lb, err := ipvs.Dial(nil)
	if err != nil {
		return err
	}
	defer lb.Close()
	links, err := dummy.Dial(nil)
	if err != nil {
		return err
	}
	defer links.Close()
	dev, err := links.Ensure(ctx, o.device)
	if err != nil {
		return err
	}
	if o.delete {
		if err := lb.DeleteService(ctx, svc); err != nil && !errors.Is(err, ipvs.ErrServiceNotExist) {
			return err
		}
		return dev.Unbind(ctx, svc.Addr)
	}
	if err := dev.Bind(ctx, svc.Addr); err != nil {
		return err
	}
	if err := program(ctx, lb, svc, backends); err != nil {
		return err
	}
	for i := 0; o.rounds == 0 || i < o.rounds; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.interval):
			}
		}
		if err := show(ctx, lb, out); err != nil {
			return err
		}
	}
	return nil
}

func parse(o options, args []string) (ipvs.Service, []ipvs.Destination, error) {
	protos := map[string]inet.Protocol{"tcp": inet.TCP, "udp": inet.UDP, "sctp": inet.SCTP}
	proto, ok := protos[strings.ToLower(o.proto)]
	if !ok {
		return ipvs.Service{}, nil, fmt.Errorf("unknown protocol %q", o.proto)
	}
	vip, err := netip.ParseAddrPort(args[0])
	if err != nil {
		return ipvs.Service{}, nil, fmt.Errorf("VIP %q: %w", args[0], err)
	}
	svc := ipvs.Service{Protocol: proto, Addr: vip.Addr(), Port: vip.Port(), Scheduler: ipvs.Scheduler(o.sched)}
	if o.persist > 0 {
		svc.Flags, svc.Timeout = ipvs.Persistent, o.persist.Truncate(time.Second)
	}
	var backends []ipvs.Destination
	for _, a := range args[1:] {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return ipvs.Service{}, nil, fmt.Errorf("backend %q: %w", a, err)
		}
		backends = append(backends, ipvs.Destination{Addr: ap.Addr(), Port: ap.Port(), Forward: ipvs.Masquerade, Weight: 1})
	}
	return svc, backends, nil
}

// program makes the kernel's virtual server match svc and backends, in one
// batch.
func program(ctx context.Context, lb *ipvs.Conn, svc ipvs.Service, backends []ipvs.Destination) error {
	var b ipvs.Batch
	current, err := lb.Destinations(ctx, svc)
	if err != nil {
		return err
	}
	if _, err := lb.GetService(ctx, svc); errors.Is(err, ipvs.ErrServiceNotExist) {
		b.CreateService(svc)
	} else if err != nil {
		return err
	} else {
		b.UpdateService(svc)
	}
	have := map[netip.AddrPort]bool{}
	for _, d := range current {
		have[netip.AddrPortFrom(d.Addr, d.Port)] = true
	}
	want := map[netip.AddrPort]bool{}
	for _, d := range backends {
		key := netip.AddrPortFrom(d.Addr, d.Port)
		want[key] = true
		if have[key] {
			b.UpdateDestination(svc, d)
		} else {
			b.CreateDestination(svc, d)
		}
	}
	for _, d := range current {
		if !want[netip.AddrPortFrom(d.Addr, d.Port)] {
			b.DeleteDestination(svc, d)
		}
	}
	return lb.Apply(ctx, &b)
}

func show(ctx context.Context, lb *ipvs.Conn, out io.Writer) error {
	table, err := lb.Table(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n", time.Now().Format(time.TimeOnly))
	for _, v := range table {
		s := v.Service
		fmt.Fprintf(out, "%-28v %-4s %s\n", s, s.Scheduler, counters(s.Stats))
		for _, d := range v.Destinations {
			fmt.Fprintf(out, "  -> %-23v %-6v w=%-3d active=%-4d inactive=%-4d %s\n",
				d, d.Forward, d.Weight, d.ActiveConnections, d.InactiveConnections, counters(d.Stats))
		}
	}
	return nil
}

func counters(s ipvs.Stats) string {
	return fmt.Sprintf("conns=%d in=%dp/%dB out=%dp/%dB rate=%dcps", s.Connections, s.PacketsIn, s.BytesIn, s.PacketsOut, s.BytesOut, s.CPS)
}
