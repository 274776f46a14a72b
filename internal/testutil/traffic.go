package testutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	ln := n.listen(t, addr)
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
	pc := n.listenUDP(t, addr)
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
	c, err := n.dial(from, addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	reply, err := io.ReadAll(c)
	return string(reply), err
}

// Connect opens a TCP connection from inside the namespace to addr within
// timeout. A socket stays in the namespace it was made in, so the
// connection may be used from any goroutine.
func (n *NetNS) Connect(addr string, timeout time.Duration) (net.Conn, error) {
	return n.dial("", addr, timeout)
}

// dial is Connect from the local address from if it is not empty.
func (n *NetNS) dial(from, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
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
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// DialUDP opens a UDP socket inside the namespace connected to addr,
// bound to the local address and port from if it is not empty
// ("10.0.0.2:20000"): the same from again is the same flow.
func (n *NetNS) DialUDP(from, addr string) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := n.Do(func() error {
		var local *net.UDPAddr
		if from != "" {
			var err error
			if local, err = net.ResolveUDPAddr("udp", from); err != nil {
				return err
			}
		}
		remote, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c, err = net.DialUDP("udp", local, remote)
		return err
	})
	return c, err
}

// EchoConn is a TCP connection to an echo server (ServeEcho) whose every
// line must come back as it was sent.
type EchoConn struct {
	net.Conn
	r *bufio.Reader
}

// DialEcho connects from inside the namespace to the echo server at addr
// (through whatever service leads to it) within timeout.
func (n *NetNS) DialEcho(addr string, timeout time.Duration) (*EchoConn, error) {
	c, err := n.Connect(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &EchoConn{Conn: c, r: bufio.NewReader(c)}, nil
}

// Echo sends line (without its newline) and checks that the same line
// comes back within timeout.
func (e *EchoConn) Echo(line string, timeout time.Duration) error {
	e.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(e, line+"\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got, err := e.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if got != line+"\n" {
		return fmt.Errorf("echoed %q, want %q", got, line+"\n")
	}
	return nil
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
	acceptEach(n.listen(t, addr), func(c net.Conn) { io.Copy(c, c) })
}

// ServeLine listens on addr inside the namespace and answers every
// connection with line, then closes it once the client has closed its
// side: the client closes first and keeps the TIME_WAIT state, as a load
// generator's connections do. It stops when the test ends.
func (n *NetNS) ServeLine(t testing.TB, addr, line string) {
	t.Helper()
	acceptEach(n.listen(t, addr), func(c net.Conn) {
		if _, err := io.WriteString(c, line); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, c)
		}
	})
}

// acceptEach handles each connection ln accepts in a goroutine of its
// own, and closes it after, until ln is closed.
func acceptEach(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// ServeEchoUDP listens on addr inside the namespace and sends every
// datagram back to its sender, until the test ends.
func (n *NetNS) ServeEchoUDP(t testing.TB, addr string) {
	t.Helper()
	pc := n.listenUDP(t, addr)
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

// listen listens on TCP addr inside the namespace until the test ends.
func (n *NetNS) listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// listenUDP listens on UDP addr inside the namespace until the test ends.
func (n *NetNS) listenUDP(t testing.TB, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := n.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatalf("listening on udp %s: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}
