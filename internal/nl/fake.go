package nl

import (
	"encoding/binary"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
)

// Serve returns a Transport on which handle plays the kernel for unit
// tests: it is called once per write with the write's messages, and each
// message it returns is queued as a datagram of its own, as the kernel
// sends acknowledgements. A reply with sequence number 0 gets the first
// request's. Receive with nothing queued blocks until the deadline, as a
// socket does.
func Serve(handle func(reqs []netlink.Message) []netlink.Message) Transport {
	return &fake{handle: handle}
}

type fake struct {
	handle func(reqs []netlink.Message) []netlink.Message

	mu       sync.Mutex
	deadline time.Time
	queue    []netlink.Message
}

func (f *fake) expired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.deadline.IsZero() && !time.Now().Before(f.deadline)
}

func (f *fake) SetDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	return nil
}

func (f *fake) Close() error { return nil }

func (f *fake) Send(b []byte) error {
	if f.expired() {
		return os.ErrDeadlineExceeded
	}
	reqs, err := ParseMessages(b)
	if err != nil {
		return err
	}
	replies := f.handle(reqs)
	for i := range replies {
		if replies[i].Header.Sequence == 0 && len(reqs) > 0 {
			replies[i].Header.Sequence = reqs[0].Header.Sequence
		}
	}
	f.mu.Lock()
	f.queue = append(f.queue, replies...)
	f.mu.Unlock()
	return nil
}

// fakeBlockLimit turns a receive that would block forever into a panic.
const fakeBlockLimit = 10 * time.Second

func (f *fake) Receive() ([]netlink.Message, error) {
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		if len(f.queue) > 0 {
			m := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			// Framed and parsed again, as a socket would deliver it.
			return ParseMessages(AppendMessage(nil, uint16(m.Header.Type), m.Header.Flags, m.Header.Sequence, m.Header.PID, m.Data))
		}
		f.mu.Unlock()
		if f.expired() {
			return nil, os.ErrDeadlineExceeded
		}
		if time.Since(start) > fakeBlockLimit {
			panic("nl: fake kernel: receive with nothing to read blocks forever")
		}
	}
}

// Ack returns the kernel's acknowledgement of req: errno 0 for success,
// or a positive errno, with the request's header echoed as a capped
// acknowledgement does, and text, if any, as its extended-ack message.
func Ack(req netlink.Message, errno int, text string) netlink.Message {
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	data = binary.NativeEndian.AppendUint32(data, uint32(HeaderLen+len(req.Data)))
	data = binary.NativeEndian.AppendUint16(data, uint16(req.Header.Type))
	data = binary.NativeEndian.AppendUint16(data, uint16(req.Header.Flags))
	data = binary.NativeEndian.AppendUint32(data, req.Header.Sequence)
	data = binary.NativeEndian.AppendUint32(data, req.Header.PID)
	flags := netlink.HeaderFlags(flagCapped)
	if text != "" {
		flags |= flagAckTLVs
		w := Writer{B: data}
		w.String(nlmsgerrAttrMsg, text)
		data = w.B
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.Error, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   data,
	}
}
