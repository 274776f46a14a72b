package testutil

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// ServeTCP listens on addr inside the namespace and answers every
// connection with name and the client address it sees ("backend-a
// 10.0.0.2:41234"), then closes it. It stops when the test ends.
func (n *NetNS) ServeTCP(t testing.TB, addr, name string) {
	t.Helper()
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, name+" "+c.RemoteAddr().String())
			c.Close()
		}
	}()
}

// ServeUDP listens on addr inside the namespace and answers every
// datagram with name and the sender's address it sees, as ServeTCP does
// for connections. It stops when the test ends.
func (n *NetNS) ServeUDP(t testing.TB, addr, name string) {
	t.Helper()
	var pc net.PacketConn
	if err := n.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatalf("listening on udp %s: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(name+" "+from.String()), from)
		}
	}()
}

// DialTCP connects from inside the namespace to addr, from the local
// address from if it is not empty, and returns what the server sent,
// within timeout.
func (n *NetNS) DialTCP(from, addr string, timeout time.Duration) (string, error) {
	var reply []byte
	err := n.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d := &net.Dialer{}
		if from != "" {
			local, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(from, "0"))
			if err != nil {
				return err
			}
			d.LocalAddr = local
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		reply, err = io.ReadAll(c)
		return err
	})
	return string(reply), err
}

// IsTimeout reports whether a dial failed by timing out (a dropped packet)
// rather than being refused (a reset or an ICMP error).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// ServeEcho listens on addr inside the namespace and sends back whatever
// each connection sends, until the client closes it or the test ends:
// long-lived connections that tests can watch survive a change.
func (n *NetNS) ServeEcho(t testing.TB, addr string) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
}

// ServeEchoUDP listens on addr inside the namespace and sends every
// datagram back to its sender, until the test ends.
func (n *NetNS) ServeEchoUDP(t testing.TB, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := n.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatalf("listening on udp %s: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64*1024)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}
