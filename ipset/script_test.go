package ipset

import (
	"context"
	"errors"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// These tests script the kernel's side of a conversation to check what a
// Conn sends and how it reads rare answers; what the kernel does with sets
// is tested on ipsettest's fake, in conn_test.go.

// fakeKernel answers ipset requests by command; a missing command answers
// EOPNOTSUPP.
type fakeKernel map[uint8]func(t *testing.T, req netlink.Message) ([]netlink.Message, error)

func (k fakeKernel) dial(t *testing.T) *Conn {
	t.Helper()
	fake := nl.Serve(func(reqs []netlink.Message) []netlink.Message {
		var out []netlink.Message
		for _, req := range reqs {
			out = append(out, k.answer(t, req)...)
		}
		return out
	})
	c, err := newConn(nl.NewConn(fake, 1<<20, 1<<20))
	if err != nil {
		t.Fatalf("newConn: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answer plays the kernel for one request: the handler's replies, then an
// acknowledgement when the request asks for one and the handler sent no
// error.
func (k fakeKernel) answer(t *testing.T, req netlink.Message) []netlink.Message {
	cmd := uint8(req.Header.Type & 0xff)
	if uint16(req.Header.Type)>>8 != nfnlSubsysIPSet {
		t.Errorf("request to subsystem %d", uint16(req.Header.Type)>>8)
	}
	h, ok := k[cmd]
	if !ok {
		return []netlink.Message{nl.Ack(req, int(unix.EOPNOTSUPP), "")}
	}
	msgs, err := h(t, req)
	if err != nil {
		t.Error(err)
	}
	for _, m := range msgs {
		if m.Header.Type == netlink.Error || m.Header.Type == netlink.Done {
			return msgs
		}
	}
	if req.Header.Flags&netlink.Acknowledge != 0 {
		msgs = append(msgs, nl.Ack(req, 0, ""))
	}
	return msgs
}

// errReply is the kernel's refusal of req with errno n.
func errReply(req netlink.Message, n int) ([]netlink.Message, error) {
	return []netlink.Message{nl.Ack(req, n, "")}, nil
}

// kernelReply builds a kernel message for req's command with attributes.
func kernelReply(t *testing.T, req netlink.Message, fn func(w *nl.Writer)) []netlink.Message {
	t.Helper()
	r := request(7, uint8(req.Header.Type&0xff), 0, fn)
	return []netlink.Message{{
		Header: netlink.Header{Type: netlink.HeaderType(r.Type), Sequence: req.Header.Sequence},
		Data:   r.Data,
	}}
}

func ack(req netlink.Message) ([]netlink.Message, error) {
	return errReply(req, 0)
}

func errno(n int) func(*testing.T, netlink.Message) ([]netlink.Message, error) {
	return func(_ *testing.T, req netlink.Message) ([]netlink.Message, error) {
		return errReply(req, n)
	}
}

// reqAttrs decodes a request's top-level attributes by type.
func reqAttrs(t *testing.T, req netlink.Message) map[uint16][]byte {
	t.Helper()
	ad, err := newDecoder(req)
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[uint16][]byte{}
	for ad.Next() {
		attrs[ad.Type()] = ad.Bytes()
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return attrs
}

func protocolHandler(kernel uint8) func(*testing.T, netlink.Message) ([]netlink.Message, error) {
	return func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
		if asked := reqAttrs(t, req)[attrProtocol][0]; asked > kernel {
			return errReply(req, errProtocol)
		}
		return kernelReply(t, req, func(w *nl.Writer) {
			w.Uint8(attrProtocol, kernel)
			w.Uint8(attrProtocolMin, protocolMin)
		}), nil
	}
}

func typeHandler(rev uint8) func(*testing.T, netlink.Message) ([]netlink.Message, error) {
	return func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
		return kernelReply(t, req, func(w *nl.Writer) {
			w.Uint8(attrRevision, rev)
			w.Uint8(attrRevisionMin, 0)
		}), nil
	}
}

func TestNegotiateProtocol(t *testing.T) {
	for _, kernel := range []uint8{7, 6} {
		c := fakeKernel{cmdProtocol: protocolHandler(kernel)}.dial(t)
		if got := c.ProtocolVersion(); got != int(kernel) {
			t.Errorf("kernel at %d: Protocol() = %d", kernel, got)
		}
	}
}

func TestCreateUsesNewestRevision(t *testing.T) {
	var created []uint8
	types := 0
	c := fakeKernel{
		cmdProtocol: protocolHandler(7),
		cmdType: func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
			types++
			return typeHandler(5)(t, req)
		},
		cmdCreate: func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
			created = append(created, reqAttrs(t, req)[attrRevision][0])
			return ack(req)
		},
	}.dial(t)
	ctx := context.Background()
	for range 2 {
		if err := c.Create(ctx, Set{Name: "s", Type: HashIPPort}, Exclusive); err != nil {
			t.Fatal(err)
		}
	}
	if len(created) != 2 || created[0] != 5 || created[1] != 5 {
		t.Errorf("created at revisions %v, want [5 5]", created)
	}
	if types != 1 {
		t.Errorf("asked the kernel for the type %d times, want once", types)
	}
}

func TestIndex(t *testing.T) {
	c := fakeKernel{
		cmdProtocol: protocolHandler(7),
		cmdGetByName: func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
			if name := string(reqAttrs(t, req)[attrSetName]); name != "KUBE-CLUSTER-IP\x00" {
				t.Errorf("asked for %q", name)
			}
			return kernelReply(t, req, func(w *nl.Writer) {
				w.Uint8(attrFamily, 0)
				w.BE16(attrIndex|be, 3)
			}), nil
		},
	}.dial(t)
	idx, err := c.Index(context.Background(), "KUBE-CLUSTER-IP")
	if err != nil || idx != 3 {
		t.Errorf("Index = %d, %v; want 3", idx, err)
	}
}

// A kernel without the set type refuses it with IPSET_ERR_FIND_TYPE; the
// fake has every type the package encodes, so this one is scripted.
func TestTypeNotSupported(t *testing.T) {
	c := fakeKernel{cmdProtocol: protocolHandler(7), cmdType: errno(errFindType)}.dial(t)
	err := c.Create(context.Background(), Set{Name: "s", Type: HashIP}, Exclusive)
	if !errors.Is(err, ErrTypeNotSupported) || !errors.Is(err, unix.Errno(errFindType)) {
		t.Errorf("Create: %v, want ErrTypeNotSupported and errno %d", err, errFindType)
	}
}
