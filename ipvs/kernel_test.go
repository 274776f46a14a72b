package ipvs

import (
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// fakeKernel is a transport that plays IPVS's side of the conversation
// the way Linux does: each write is processed message by message, each
// acknowledgement is a datagram of its own, a dump's reply comes in parts
// of perDatagram entries of which the next is made only when the previous
// one is read, and a dump request arriving while another dump is unread
// fails with EBUSY.
type fakeKernel struct {
	family      uint16
	perDatagram int
	// message, when set, is the extended-ack text of every error.
	message string
	// recvErr, when set, is returned by the next receive.
	recvErr error
	// stall makes receive block as if the kernel never answered, until
	// the deadline passes.
	stall bool
	// deadline is set concurrently, as a socket's is on cancellation.
	mu       sync.Mutex
	deadline time.Time

	services []*fakeService
	timeouts Timeouts
	queue    [][]netlink.Message
	dump     *fakeDump
	writes   int
	closed   bool
}

type fakeService struct {
	svc   Service
	dests []Destination
}

type fakeDump struct {
	req     netlink.Message
	entries []genetlink.Message
}

var knownSchedulers = []Scheduler{RoundRobin, WeightedRoundRobin, LeastConnection, WeightedLeastConnection, LocalityBasedLeastConnection, LocalityBasedLeastConnectionReplication, DestinationHashing, SourceHashing, ShortestExpectedDelay, NeverQueue, WeightedFailover, WeightedOverflow, MaglevHashing, TwoRandomChoices}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{family: 0x20, perDatagram: 1 << 20,
		timeouts: Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}}
}

// conn returns a Conn on the fake, with buffers as a privileged Dial gets.
func (k *fakeKernel) conn() *Conn { return newConnWith(k, k.family, 16<<20, 8<<20) }

// newConnWith makes a Conn over a transport, with the given buffer sizes.
func newConnWith(t nl.Transport, family uint16, readBuf, writeBuf int) *Conn {
	return newConn(nl.NewConn(t, readBuf, writeBuf), family)
}

func (k *fakeKernel) SetDeadline(t time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.deadline = t
	return nil
}

func (k *fakeKernel) expired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.deadline.IsZero() && !time.Now().Before(k.deadline)
}
func (k *fakeKernel) Close() error { k.closed = true; return nil }

func (k *fakeKernel) Send(b []byte) error {
	if k.expired() {
		return os.ErrDeadlineExceeded
	}
	k.writes++
	msgs, err := nl.ParseMessages(b)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		k.handle(m)
	}
	return nil
}

func (k *fakeKernel) Receive() ([]netlink.Message, error) {
	if err := k.recvErr; err != nil {
		k.recvErr = nil
		return nil, err
	}
	if k.stall || len(k.queue) == 0 {
		for start := time.Now(); !k.expired(); time.Sleep(time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				panic("fake kernel: receive with nothing to read blocks forever")
			}
		}
		return nil, os.ErrDeadlineExceeded
	}
	d := k.queue[0]
	k.queue = k.queue[1:]
	if k.dump != nil {
		k.continueDump()
	}
	return d, nil
}

func (k *fakeKernel) handle(m netlink.Message) {
	var gm genetlink.Message
	if err := gm.UnmarshalBinary(m.Data); err != nil || m.Header.Type != netlink.HeaderType(k.family) {
		k.ack(m, unix.EINVAL)
		return
	}
	if m.Header.Flags&netlink.Dump != 0 {
		if k.dump != nil {
			k.ack(m, unix.EBUSY)
			return
		}
		k.dump = &fakeDump{req: m, entries: k.dumpEntries(gm)}
		k.continueDump()
		return
	}
	reply, errno := k.do(gm)
	if errno != 0 {
		k.ack(m, errno)
		return
	}
	if reply != nil {
		k.queue = append(k.queue, []netlink.Message{k.answer(m, *reply, 0)})
	}
	if m.Header.Flags&netlink.Acknowledge != 0 {
		k.ack(m, 0)
	}
}

func (k *fakeKernel) answer(req netlink.Message, gm genetlink.Message, flags netlink.HeaderFlags) netlink.Message {
	gm.Header.Version = genlVersion
	b, err := gm.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: req.Header.Type, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   b,
	}
}

// continueDump queues the next part of the running dump; the last part
// ends with NLMSG_DONE.
func (k *fakeKernel) continueDump() {
	d := k.dump
	n := min(k.perDatagram, len(d.entries))
	var dgram []netlink.Message
	for _, e := range d.entries[:n] {
		dgram = append(dgram, k.answer(d.req, e, netlink.Multi))
	}
	d.entries = d.entries[n:]
	if len(d.entries) == 0 {
		dgram = append(dgram, netlink.Message{
			Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: d.req.Header.Sequence},
			Data:   []byte{0, 0, 0, 0},
		})
		k.dump = nil
	}
	k.queue = append(k.queue, dgram)
}

// ack queues an acknowledgement, capped and with extended-ack text as
// the Conn's socket options ask.
func (k *fakeKernel) ack(req netlink.Message, errno unix.Errno) {
	msg := ""
	if errno != 0 {
		msg = k.message
	}
	k.queue = append(k.queue, []netlink.Message{ackMessage(req, -int32(errno), msg)})
}

func ackMessage(req netlink.Message, code int32, text string) netlink.Message {
	return nl.Ack(req, int(-code), text)
}

// parse reads a request's service and destination nests.
func (k *fakeKernel) parse(gm genetlink.Message) (svc *Service, dest *Destination, t *Timeouts, errno unix.Errno) {
	ad, err := netlink.NewAttributeDecoder(gm.Data)
	if err != nil {
		return nil, nil, nil, unix.EINVAL
	}
	var tm Timeouts
	for ad.Next() {
		switch ad.Type() {
		case cmdAttrService:
			s, err := decodeService(ad.Bytes())
			if err != nil {
				return nil, nil, nil, unix.EINVAL
			}
			svc = &s
		case cmdAttrDest:
			d, err := decodeDestination(ad.Bytes(), 0)
			if err != nil {
				return nil, nil, nil, unix.EINVAL
			}
			dest = &d
		case cmdAttrTimeoutTCP:
			tm.TCP = time.Duration(ad.Uint32()) * time.Second
			t = &tm
		case cmdAttrTimeoutTCPFin:
			tm.TCPFin = time.Duration(ad.Uint32()) * time.Second
		case cmdAttrTimeoutUDP:
			tm.UDP = time.Duration(ad.Uint32()) * time.Second
		}
	}
	return svc, dest, t, 0
}

func (k *fakeKernel) find(s Service) (int, *fakeService) {
	for i, fs := range k.services {
		if fs.svc.key() == s.key() {
			return i, fs
		}
	}
	return -1, nil
}

func findDest(fs *fakeService, d Destination) int {
	return slices.IndexFunc(fs.dests, func(x Destination) bool { return x.Addr == d.Addr && x.Port == d.Port })
}

// do applies a non-dump command, as ip_vs_genl_set_cmd and
// ip_vs_genl_get_cmd do, returning a reply for gets.
func (k *fakeKernel) do(gm genetlink.Message) (*genetlink.Message, unix.Errno) {
	svc, dest, tm, errno := k.parse(gm)
	if errno != 0 {
		return nil, errno
	}
	switch gm.Header.Command {
	case cmdFlush:
		k.services = nil
		return nil, 0
	case cmdGetInfo:
		return &genetlink.Message{Header: genetlink.Header{Command: 14}, Data: encodeInfoReply(Info{Version: Version{1, 2, 1}, ConnTableSize: 4096})}, 0
	case cmdGetConfig:
		return &genetlink.Message{Header: genetlink.Header{Command: cmdSetConfig}, Data: encodeTimeoutsReply(k.timeouts)}, 0
	case cmdSetConfig:
		if tm != nil {
			if tm.TCP != 0 {
				k.timeouts.TCP = tm.TCP
			}
			if tm.TCPFin != 0 {
				k.timeouts.TCPFin = tm.TCPFin
			}
			if tm.UDP != 0 {
				k.timeouts.UDP = tm.UDP
			}
		}
		return nil, 0
	case cmdZero:
		if svc == nil {
			return nil, 0
		}
	}
	if svc == nil {
		return nil, unix.EINVAL
	}
	i, fs := k.find(*svc)
	if gm.Header.Command == cmdNewService {
		if fs != nil {
			return nil, unix.EEXIST
		}
		if !slices.Contains(knownSchedulers, svc.Scheduler) {
			return nil, unix.ENOENT
		}
		s := *svc
		s.Flags |= Hashed
		k.services = append(k.services, &fakeService{svc: s})
		return nil, 0
	}
	if fs == nil {
		return nil, unix.ESRCH
	}
	switch gm.Header.Command {
	case cmdSetService:
		if !slices.Contains(knownSchedulers, svc.Scheduler) {
			return nil, unix.ENOENT
		}
		fs.svc.Scheduler, fs.svc.Flags = svc.Scheduler, svc.Flags|Hashed
		fs.svc.Timeout, fs.svc.Netmask = svc.Timeout, svc.Netmask
		return nil, 0
	case cmdDelService:
		k.services = slices.Delete(k.services, i, i+1)
		return nil, 0
	case cmdGetService:
		return &genetlink.Message{Header: genetlink.Header{Command: cmdNewService}, Data: wrap(cmdAttrService, encodeServiceReply(fs.svc))}, 0
	case cmdZero:
		return nil, 0
	}
	if dest == nil {
		return nil, unix.EINVAL
	}
	j := findDest(fs, *dest)
	switch gm.Header.Command {
	case cmdNewDest:
		if j >= 0 {
			return nil, unix.EEXIST
		}
		fs.dests = append(fs.dests, *dest)
	case cmdSetDest:
		if j < 0 {
			return nil, unix.ENOENT
		}
		fs.dests[j] = *dest
	case cmdDelDest:
		if j < 0 {
			return nil, unix.ENOENT
		}
		fs.dests = slices.Delete(fs.dests, j, j+1)
	default:
		return nil, unix.EOPNOTSUPP
	}
	return nil, 0
}

func (k *fakeKernel) dumpEntries(gm genetlink.Message) []genetlink.Message {
	var out []genetlink.Message
	switch gm.Header.Command {
	case cmdGetService:
		for _, fs := range k.services {
			out = append(out, genetlink.Message{Header: genetlink.Header{Command: cmdNewService}, Data: wrap(cmdAttrService, encodeServiceReply(fs.svc))})
		}
	case cmdGetDest:
		svc, _, _, _ := k.parse(gm)
		if svc == nil {
			return nil
		}
		if _, fs := k.find(*svc); fs != nil {
			for _, d := range fs.dests {
				out = append(out, genetlink.Message{Header: genetlink.Header{Command: cmdNewDest}, Data: wrap(cmdAttrDest, encodeDestinationReply(d))})
			}
		}
	}
	return out
}

// key returns a comparable identity of the service, as the kernel
// looks services up.
func (s Service) key() serviceKey {
	k := serviceKey{family: s.family(), fwmark: s.FirewallMark}
	if k.fwmark == 0 {
		k.protocol, k.addr, k.port = s.Protocol, s.Addr, s.Port
	}
	return k
}

type serviceKey struct {
	family   Family
	fwmark   uint32
	protocol Protocol
	addr     netip.Addr
	port     uint16
}
