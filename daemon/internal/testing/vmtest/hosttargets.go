package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// slirpHost is the host's loopback as a guest on qemu's user network would
// reach it without restrict=on.
const slirpHost = "10.0.2.2"

// hostTargets are listeners on the host that a networked guest must not
// reach: on the host's loopback (which an unrestricted guest reaches as
// slirpHost) and on each of the host's own addresses, one port each for
// TCP, accepted and answered, and UDP, echoed. They are ours, so a test in
// the guest may try them; vmtest reports on stderr any it reaches.
type hostTargets struct {
	tcp   []net.Listener
	udp   []net.PacketConn
	guest []string // as the guest would name them, host:port
}

func startHostTargets() (_ *hostTargets, err error) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	own, err := ownAddrs()
	if err != nil {
		return nil, err
	}
	addrs = append(addrs, own...)
	h := &hostTargets{}
	defer func() {
		if err != nil {
			h.close()
		}
	}()
	for _, a := range addrs {
		port, err := h.listen(a)
		if err != nil {
			return nil, fmt.Errorf("host target on %s: %w", a, err)
		}
		name := a.String()
		if a.IsLoopback() {
			name = slirpHost
		}
		h.guest = append(h.guest, net.JoinHostPort(name, strconv.Itoa(port)))
	}
	return h, nil
}

// listen opens a TCP and a UDP port of the same number on a.
func (h *hostTargets) listen(a netip.Addr) (int, error) {
	var lastErr error
	for range 10 {
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			l.Close()
			lastErr = err // the UDP port is taken; try another
			continue
		}
		h.tcp, h.udp = append(h.tcp, l), append(h.udp, pc)
		go answerTCP(l)
		go echoUDP(pc)
		return port, nil
	}
	return 0, lastErr
}

func answerTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "vmtest: host target %s: TCP connection from %s\n", l.Addr(), c.RemoteAddr())
		_, _ = c.Write([]byte("host target reached\n"))
		c.Close()
	}
}

func echoUDP(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "vmtest: host target %s: UDP datagram from %s\n", pc.LocalAddr(), from)
		_, _ = pc.WriteTo(buf[:n], from)
	}
}

// ownAddrs returns the host's addresses other than loopback and
// link-local ones.
func ownAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, errors.New("vmtest: the host's addresses: " + err.Error())
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil {
			continue
		}
		a := p.Addr().Unmap()
		if a.IsLoopback() || a.IsLinkLocalUnicast() || !a.IsGlobalUnicast() {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// guestEnv is the variable that names the targets to the guest's tests.
func (h *hostTargets) guestEnv() string {
	return controlplane.HostTargetsEnv + "=" + strings.Join(h.guest, ",")
}

func (h *hostTargets) close() {
	for _, l := range h.tcp {
		l.Close()
	}
	for _, pc := range h.udp {
		pc.Close()
	}
}
