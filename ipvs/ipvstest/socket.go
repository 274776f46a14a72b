package ipvstest

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// socket is one Conn's netlink socket on the fake kernel. Like the
// kernel's, it answers each write message by message, queues each
// acknowledgement as a datagram of its own, makes the next part of a dump
// only when the previous one is read, and refuses a dump while another is
// unread with EBUSY.
type socket struct {
	k *Kernel

	mu       sync.Mutex
	deadline time.Time
	queue    [][]netlink.Message
	dump     *dump
}

// dump is a dump in progress: its request and the entries not yet sent.
type dump struct {
	req     netlink.Message
	entries []genlMessage
}

// errNothingToRead is a receive with no reply due: the fake answers every
// write at once, so a real socket would block forever.
var errNothingToRead = errors.New("ipvstest: receive with no reply due would block forever")

func (s *socket) SetDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline = t
	return nil
}

func (s *socket) Close() error { return nil }

// expiredLocked says whether the deadline has passed; s.mu is held.
func (s *socket) expiredLocked() bool {
	return !s.deadline.IsZero() && !time.Now().Before(s.deadline)
}

func (s *socket) Send(b []byte) error {
	msgs, err := nl.ParseMessages(b)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiredLocked() {
		return os.ErrDeadlineExceeded
	}
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	s.k.writes++
	for _, m := range msgs {
		s.handle(m)
	}
	return nil
}

func (s *socket) Receive() ([]netlink.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiredLocked() {
		return nil, os.ErrDeadlineExceeded
	}
	if len(s.queue) == 0 {
		return nil, errNothingToRead
	}
	d := s.queue[0]
	s.queue = s.queue[1:]
	if s.dump != nil {
		s.continueDump()
	}
	return d, nil
}

// handle answers one request; s.mu and the kernel's lock are held.
func (s *socket) handle(m netlink.Message) {
	if m.Header.Type != familyID || len(m.Data) < nl.GenlHeaderLen {
		s.ack(m, unix.EINVAL)
		return
	}
	cmd := m.Data[0] // genlmsghdr's cmd
	r, err := parseRequest(m.Data[nl.GenlHeaderLen:])
	if err != nil {
		s.ack(m, unix.EINVAL)
		return
	}
	if m.Header.Flags&netlink.Dump != 0 {
		s.startDump(m, cmd, r)
		return
	}
	reply, errno := s.k.do(cmd, r)
	if errno != 0 {
		s.ack(m, errno)
		return
	}
	if reply != nil {
		s.queue = append(s.queue, []netlink.Message{answer(m, *reply, 0)})
	}
	if m.Header.Flags&netlink.Acknowledge != 0 {
		s.ack(m, 0)
	}
}

func (s *socket) startDump(m netlink.Message, cmd uint8, r request) {
	if s.dump != nil {
		s.ack(m, unix.EBUSY)
		return
	}
	entries, errno := s.k.dumpEntries(cmd, r)
	if errno != 0 {
		s.ack(m, errno)
		return
	}
	s.dump = &dump{req: m, entries: entries}
	s.continueDump()
}

// continueDump queues the next part of the running dump; the last part
// ends with NLMSG_DONE.
func (s *socket) continueDump() {
	d := s.dump
	n := len(d.entries)
	if part := s.k.opts.DumpPart; part > 0 {
		n = min(n, part)
	}
	var dgram []netlink.Message
	for _, e := range d.entries[:n] {
		dgram = append(dgram, answer(d.req, e, netlink.Multi))
	}
	d.entries = d.entries[n:]
	if len(d.entries) == 0 {
		dgram = append(dgram, netlink.Message{
			Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: d.req.Header.Sequence, PID: d.req.Header.PID},
			Data:   []byte{0, 0, 0, 0},
		})
		s.dump = nil
	}
	s.queue = append(s.queue, dgram)
}

// ack queues an acknowledgement, capped and with extended-ack text, as
// the Conn's socket options ask.
func (s *socket) ack(req netlink.Message, errno unix.Errno) {
	text := ""
	if errno != 0 {
		text = s.k.opts.Message
	}
	s.queue = append(s.queue, []netlink.Message{nl.Ack(req, int(errno), text)})
}

// answer frames a reply to req.
func answer(req netlink.Message, gm genlMessage, flags netlink.HeaderFlags) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: req.Header.Type, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   append(nl.AppendGenlHeader(nil, gm.cmd, genlVersion), gm.data...),
	}
}
