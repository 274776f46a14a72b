//go:build vmtest

package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The capture and replay sides of BenchmarkFullSyncFloor.

const (
	// tapRecvBuf holds what the sync writes while the reader is behind:
	// each packet charges its skb's whole size, up to a MiB.
	tapRecvBuf = 256 << 20
	// tapMaxSkb is larger than any write a sync makes (a MiB at most,
	// an nftables transaction less); a larger one fails the capture.
	tapMaxSkb = 16 << 20
	// tapPoll is how often the reader looks whether the sync ended.
	tapPoll = 50 * time.Millisecond
	// The replay's socket buffers: the send buffer takes any captured
	// skb, the receive buffer every error the replay could draw.
	replaySendBuf = 8 << 20
	replayRecvBuf = 32 << 20
)

// netlinkTap reads the netlink requests made in one namespace off an
// nlmon link (netlink taps are per namespace) and keeps their writes.
type netlinkTap struct {
	fd     int
	family uint16 // the IPVS generic netlink family
	stopc  chan struct{}
	done   chan tapResult
}

type tapResult struct {
	c   *floorCapture
	err error
}

// openTap creates an nlmon link in ns, sets it up and starts reading it.
func openTap(tb testing.TB, ns *testutil.NetNS, family uint16) (*netlinkTap, error) {
	addNlmon(tb, ns)
	ns.IP(tb, "link", "set", nlmonName, "up")
	fd := -1
	err := ns.Do(func() error {
		var err error
		fd, err = tapSocket()
		return err
	})
	if err != nil {
		return nil, err
	}
	t := &netlinkTap{fd: fd, family: family, stopc: make(chan struct{}), done: make(chan tapResult, 1)}
	go t.read()
	return t, nil
}

// tapSocket opens a packet socket on the nlmon link, in the calling
// thread's namespace.
func tapSocket() (int, error) {
	ifc, err := net.InterfaceByName(nlmonName)
	if err != nil {
		return -1, err
	}
	index := ifc.Index
	// Protocol 0 receives nothing until bound to the link.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	if err := tapOptions(fd, index); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// tapOptions filters, sizes and binds the tap's packet socket.
func tapOptions(fd, index int) error {
	filter := requestsOnly()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return fmt.Errorf("packet socket: SO_ATTACH_FILTER: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, tapRecvBuf); err != nil {
		return fmt.Errorf("packet socket: SO_RCVBUFFORCE: %w", err)
	}
	tv := unix.NsecToTimeval(tapPoll.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("packet socket: SO_RCVTIMEO: %w", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("binding a packet socket to %s: %w", nlmonName, err)
	}
	return nil
}

// requestsOnly is a classic BPF program keeping the packets whose first
// message is a request: NLM_F_REQUEST is bit 0 of nlmsg_flags, at offset
// 6 and little-endian on the amd64 guest. Replies, acknowledgements and
// notifications have it clear.
func requestsOnly() []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 6},
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 0, Jf: 1, K: unix.NLM_F_REQUEST},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
}

// htons converts a 16-bit value to network byte order and back.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// read keeps the tap's packets until stop is called and the queue is
// empty: the kernel delivers to the tap within each sendmsg, so once the
// sync returned, everything it sent is queued.
func (t *netlinkTap) read() {
	c := &floorCapture{}
	buf := make([]byte, tapMaxSkb)
	for {
		// Looked at before the receive, so that an EAGAIN after the
		// sync ended means the queue is empty.
		stopped := t.stopped()
		n, _, flags, from, err := unix.Recvmsg(t.fd, buf, nil, 0)
		switch {
		case err == unix.EAGAIN && stopped:
			t.done <- tapResult{c: c}
			return
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			t.done <- tapResult{err: fmt.Errorf("reading the netlink tap: %w", err)}
			return
		}
		if err := t.keep(c, buf[:n], flags, from); err != nil {
			t.done <- tapResult{err: err}
			return
		}
	}
}

func (t *netlinkTap) stopped() bool {
	select {
	case <-t.stopc:
		return true
	default:
		return false
	}
}

// keep adds the writes of one captured skb to c.
func (t *netlinkTap) keep(c *floorCapture, skb []byte, flags int, from unix.Sockaddr) error {
	if flags&unix.MSG_TRUNC != 0 {
		return fmt.Errorf("the netlink tap: an skb over %d bytes", len(skb))
	}
	ll, ok := from.(*unix.SockaddrLinklayer)
	if !ok {
		return fmt.Errorf("the netlink tap: a packet from %T", from)
	}
	// The link-layer protocol is the netlink protocol's number.
	proto := int(htons(ll.Protocol))
	c.captured++
	kept, err := keptWrites(proto, t.family, skb)
	if err != nil {
		return fmt.Errorf("the netlink tap, protocol %d: %w", proto, err)
	}
	if len(kept) > 0 {
		c.writes = append(c.writes, floorWrite{proto: proto, b: kept})
	}
	return nil
}

// stop ends the capture and returns it; a packet the tap dropped fails it.
func (t *netlinkTap) stop() (*floorCapture, error) {
	close(t.stopc)
	r := <-t.done
	stats, err := unix.GetsockoptTpacketStats(t.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	unix.Close(t.fd)
	switch {
	case r.err != nil:
		return nil, r.err
	case err != nil:
		return nil, fmt.Errorf("the netlink tap: PACKET_STATISTICS: %w", err)
	case stats.Drops > 0:
		return nil, fmt.Errorf("the netlink tap dropped %d of %d packets", stats.Drops, stats.Packets)
	}
	return r.c, nil
}

// close ends the capture, discarding it.
func (t *netlinkTap) close() {
	_, _ = t.stop()
}

// replaySockets are the replay's netlink sockets, by protocol.
type replaySockets map[int]int

// openReplaySockets opens a socket of each protocol the replay writes in
// ns, with buffers large enough that no write or error reply is refused.
func openReplaySockets(ns *testutil.NetNS) (replaySockets, error) {
	s := replaySockets{}
	err := ns.Do(func() error {
		for _, proto := range []int{unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER, unix.NETLINK_GENERIC} {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
			if err != nil {
				return fmt.Errorf("netlink socket of protocol %d: %w", proto, err)
			}
			s[proto] = fd
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, replaySendBuf); err != nil {
				return fmt.Errorf("netlink socket of protocol %d: SO_SNDBUFFORCE: %w", proto, err)
			}
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, replayRecvBuf); err != nil {
				return fmt.Errorf("netlink socket of protocol %d: SO_RCVBUFFORCE: %w", proto, err)
			}
		}
		return nil
	})
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// write sends the writes in order, each in one sendmsg that returns once
// the kernel handled it.
func (s replaySockets) write(ws []floorWrite) error {
	for i, w := range ws {
		for {
			_, err := unix.Write(s[w.proto], w.b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return fmt.Errorf("write %d of %d (netlink protocol %d, %d bytes): %w", i+1, len(ws), w.proto, len(w.b), err)
			}
			break
		}
	}
	return nil
}

// drain reads what the kernel answered without blocking: only errors,
// since the replay asks for no acknowledgement.
func (s replaySockets) drain() error {
	buf := make([]byte, 1<<20)
	for proto, fd := range s {
		for {
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
			if err == unix.EAGAIN {
				break
			}
			if err != nil {
				// ENOBUFS: errors were lost.
				return fmt.Errorf("reading netlink protocol %d's replies: %w", proto, err)
			}
			if err := firstError(buf[:n]); err != nil {
				return fmt.Errorf("netlink protocol %d: %w", proto, err)
			}
		}
	}
	return nil
}

// firstError returns the first refusal in a datagram of replies.
func firstError(b []byte) error {
	msgs, err := nl.ParseMessages(b)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type != netlink.Error {
			continue
		}
		ke, err := nl.ParseError(m)
		if err != nil {
			return err
		}
		if ke == nil {
			continue
		}
		typ := uint16(0)
		if len(ke.Echo) >= nl.HeaderLen {
			typ = binary.NativeEndian.Uint16(ke.Echo[4:6])
		}
		return fmt.Errorf("the kernel refused a request of type %#x: %w", typ, ke)
	}
	return nil
}

func (s replaySockets) close() {
	for _, fd := range s {
		unix.Close(fd)
	}
}
