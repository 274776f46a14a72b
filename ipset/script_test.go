package ipset

import (
	"context"
	"errors"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

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
	m, err := message(7, uint8(req.Header.Type&0xff), 0, fn)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Flags = 0
	m.Header.Sequence = req.Header.Sequence
	return []netlink.Message{m}
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
		if got := c.Protocol(); got != int(kernel) {
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

func TestErrorsMatchSentinelsAndErrno(t *testing.T) {
	tests := []struct {
		name     string
		kernel   fakeKernel
		call     func(c *Conn) error
		sentinel error
		errno    unix.Errno
	}{
		{"destroy missing", fakeKernel{cmdDestroy: errno(int(unix.ENOENT))},
			func(c *Conn) error { return c.Destroy(context.Background(), "s") }, ErrSetNotExist, unix.ENOENT},
		{"create existing", fakeKernel{cmdType: typeHandler(1), cmdCreate: errno(int(unix.EEXIST))},
			func(c *Conn) error { return c.Create(context.Background(), Set{Name: "s", Type: HashIP}, Exclusive) }, ErrSetExist, unix.EEXIST},
		{"type missing", fakeKernel{cmdType: errno(errFindType)},
			func(c *Conn) error { return c.Create(context.Background(), Set{Name: "s", Type: HashIP}, Exclusive) }, ErrTypeNotSupported, errFindType},
		{"rename onto existing", fakeKernel{cmdRename: errno(errExistSetName)},
			func(c *Conn) error { return c.Rename(context.Background(), "a", "b") }, ErrSetExist, errExistSetName},
		{"swap mismatched", fakeKernel{cmdSwap: errno(errTypeMismatch)},
			func(c *Conn) error { return c.Swap(context.Background(), "a", "b") }, ErrTypeMismatch, errTypeMismatch},
		{"destroy referenced", fakeKernel{cmdDestroy: errno(errBusy)},
			func(c *Conn) error { return c.Destroy(context.Background(), "a") }, ErrSetInUse, errBusy},
		{"add existing", fakeKernel{cmdAdd: errno(errExist)},
			func(c *Conn) error {
				return c.Add(context.Background(), "s", ipPort("1.1.1.1", TCP, 1), Exclusive)
			}, ErrEntryExist, errExist},
		{"delete missing", fakeKernel{cmdDel: errno(errExist)},
			func(c *Conn) error { return c.Delete(context.Background(), "s", ipPort("1.1.1.1", TCP, 1), Exclusive) }, ErrEntryNotExist, errExist},
		{"add to full hash", fakeKernel{cmdAdd: errno(errHashFull), cmdHeader: headerHandler(HashIPPort)},
			func(c *Conn) error { return c.Add(context.Background(), "s", ipPort("1.1.1.1", TCP, 1), ExistOK) }, ErrSetFull, errHashFull},
		{"add out of bitmap range", fakeKernel{cmdAdd: errno(errBitmapRange), cmdHeader: headerHandler(BitmapPort)},
			func(c *Conn) error { return c.Add(context.Background(), "s", Entry{Port: 9}, ExistOK) }, ErrOutOfRange, errBitmapRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.kernel[cmdProtocol] = protocolHandler(7)
			c := tt.kernel.dial(t)
			err := tt.call(c)
			if !errors.Is(err, tt.sentinel) || !errors.Is(err, tt.errno) {
				t.Errorf("error %v: want %v and errno %d", err, tt.sentinel, int(tt.errno))
			}
			var oerr *OpError
			if !errors.As(err, &oerr) || oerr.Set == "" {
				t.Errorf("error %#v names no set", err)
			}
		})
	}
}

func headerHandler(typ Type) func(*testing.T, netlink.Message) ([]netlink.Message, error) {
	return func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
		return kernelReply(t, req, func(w *nl.Writer) {
			w.String(attrSetName, "s")
			w.String(attrTypeName, string(typ))
			w.Uint8(attrFamily, uint8(FamilyINET))
			w.Uint8(attrRevision, 1)
		}), nil
	}
}

func TestTestMembership(t *testing.T) {
	member := true
	c := fakeKernel{
		cmdProtocol: protocolHandler(7),
		cmdTest: func(t *testing.T, req netlink.Message) ([]netlink.Message, error) {
			if member {
				return ack(req)
			}
			return errReply(req, errExist)
		},
	}.dial(t)
	for _, want := range []bool{true, false} {
		member = want
		got, err := c.Test(context.Background(), "s", ipPort("1.1.1.1", TCP, 1))
		if err != nil || got != want {
			t.Errorf("Test = %v, %v; want %v", got, err, want)
		}
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

func TestCancelledContext(t *testing.T) {
	c := fakeKernel{cmdProtocol: protocolHandler(7)}.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Flush(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with a cancelled context: %v", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	c := fakeKernel{cmdProtocol: protocolHandler(7)}.dial(t)
	ctx := context.Background()
	long := "0123456789012345678901234567890123"
	for name, err := range map[string]error{
		"empty name":   c.Flush(ctx, ""),
		"long name":    c.Destroy(ctx, long),
		"unknown type": c.Create(ctx, Set{Name: "s", Type: "list:set"}, Exclusive),
		"bad family":   c.Create(ctx, Set{Name: "s", Type: HashIP, Family: 7}, Exclusive),
		"bad range":    c.Create(ctx, Set{Name: "s", Type: BitmapPort, PortFrom: 9, PortTo: 1}, Exclusive),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
