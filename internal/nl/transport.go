package nl

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
)

// Transport moves netlink messages between a Conn and the kernel. The
// socket Dial opens is the real one; unit tests put a fake kernel here.
type Transport interface {
	// Send writes netlink messages, framed by the caller, in one sendmsg.
	Send(b []byte) error
	// Receive reads one datagram and returns its messages as they are,
	// errors and multi-part ends included.
	Receive() ([]netlink.Message, error)
	// SetDeadline bounds Send and Receive; a time in the past wakes a
	// blocked call at once.
	SetDeadline(t time.Time) error
	Close() error
}

// ParseMessages splits a datagram into messages. Their payloads share one
// copy of the datagram.
func ParseMessages(b []byte) ([]netlink.Message, error) {
	b = append([]byte(nil), b...)
	var msgs []netlink.Message
	for len(b) >= HeaderLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < HeaderLen || l > len(b) {
			return msgs, fmt.Errorf("netlink message of length %d in %d bytes", l, len(b))
		}
		m := netlink.Message{
			Header: netlink.Header{
				Length:   uint32(l),
				Type:     netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6])),
				Flags:    netlink.HeaderFlags(binary.NativeEndian.Uint16(b[6:8])),
				Sequence: binary.NativeEndian.Uint32(b[8:12]),
				PID:      binary.NativeEndian.Uint32(b[12:16]),
			},
			Data: b[HeaderLen:l:l],
		}
		msgs = append(msgs, m)
		l = Align(l)
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return msgs, nil
}

// AppendMessage frames one message: struct nlmsghdr with its exact length,
// then the payload, padded to 4 bytes as the kernel pads.
func AppendMessage(b []byte, typ uint16, flags netlink.HeaderFlags, seq, pid uint32, data []byte) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(HeaderLen+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, uint16(flags))
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, pid)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// HeaderLen is the size of struct nlmsghdr.
const HeaderLen = 16

// Align rounds a length up to netlink's 4-byte alignment.
func Align(n int) int { return (n + 3) &^ 3 }
