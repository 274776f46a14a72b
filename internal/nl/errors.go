package nl

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"

	"github.com/mdlayher/netlink"
)

// Error is the kernel's refusal of one request: its errno, the text of
// its extended acknowledgement, and what it echoed of the request.
type Error struct {
	Errno syscall.Errno
	// Message is the extended acknowledgement's text (NLMSGERR_ATTR_MSG).
	Message string
	// Echo is what the kernel sent back of the request: its header, and
	// its payload unless the acknowledgement was capped.
	Echo []byte
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Errno.Error()
	}
	return e.Errno.Error() + ": " + e.Message
}

// Unwrap returns the errno, so errors.Is(err, unix.EEXIST) holds.
func (e *Error) Unwrap() error { return e.Errno }

// Netlink message flags and attributes of acknowledgements, from
// include/uapi/linux/netlink.h.
const (
	flagCapped      = 0x100 // NLM_F_CAPPED: the request is echoed as a header only
	flagAckTLVs     = 0x200 // NLM_F_ACK_TLVS: extended-ack attributes follow
	nlmsgerrAttrMsg = 1     // NLMSGERR_ATTR_MSG
)

// ParseError reads the errno and extended-ack text of an NLMSG_ERROR or
// NLMSG_DONE message; it returns nil for success.
func ParseError(m netlink.Message) (*Error, error) {
	if len(m.Data) < 4 {
		return nil, fmt.Errorf("netlink %v message of %d bytes", m.Header.Type, len(m.Data))
	}
	code := int32(binary.NativeEndian.Uint32(m.Data[:4]))
	if code == 0 {
		return nil, nil
	}
	ke := &Error{Errno: syscall.Errno(-code)}
	if code > 0 {
		ke.Errno = syscall.Errno(code)
	}
	off := 4
	if m.Header.Type == netlink.Error && len(m.Data) >= 4+HeaderLen {
		// The request's header, or all of it unless capped, comes first.
		off += HeaderLen
		if m.Header.Flags&flagCapped == 0 {
			off = 4 + int(binary.NativeEndian.Uint32(m.Data[4:8]))
		}
		ke.Echo = m.Data[4:min(off, len(m.Data))]
	}
	if m.Header.Flags&flagAckTLVs == 0 || off > len(m.Data) {
		return ke, nil
	}
	d := NewReader(m.Data[off:], "extended ack")
	for d.Next() {
		if d.Type() == nlmsgerrAttrMsg {
			ke.Message = strings.TrimRight(string(d.Bytes()), "\x00")
		}
	}
	return ke, nil
}
