// Command ipset-load is an in-process `ipset restore`: it reads sets in the
// syntax of `ipset save`, loads each one atomically with ipset.Conn.Replace,
// and prints what the kernel then holds, in the same syntax.
//
//	ipset-load [-netns /run/netns/NAME] FILE
//
// FILE "-" reads standard input. It needs CAP_NET_ADMIN.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/ipvsplane/ipvsplane/ipset"
)

func main() {
	netnsPath := flag.String("netns", "", "network namespace file to work in (default: this process's)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: ipset-load [-netns PATH] FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := main1(ctx, *netnsPath, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "ipset-load:", err)
		os.Exit(1)
	}
}

func main1(ctx context.Context, netnsPath, file string) error {
	in := os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	cfg := &ipset.Config{}
	if netnsPath != "" {
		ns, err := os.Open(netnsPath)
		if err != nil {
			return err
		}
		defer ns.Close()
		cfg.NetNS = int(ns.Fd())
	}
	return run(ctx, cfg, in, os.Stdout)
}

// run loads every set read from in and writes them back to out as the
// kernel reports them.
func run(ctx context.Context, cfg *ipset.Config, in io.Reader, out io.Writer) error {
	sets, err := ipset.ParseSave(in)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return errors.New("no sets in the input")
	}
	c, err := ipset.Dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, s := range sets {
		if err := c.Replace(ctx, s.Set, s.Entries); err != nil {
			return err
		}
	}
	for _, s := range sets {
		h, entries, err := c.List(ctx, s.Set.Name)
		if err != nil {
			return err
		}
		if err := ipset.WriteSave(out, h, entries); err != nil {
			return err
		}
	}
	return nil
}
