package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// relayFlag makes vmtest a relay instead of a test runner: qemu starts
// "vmtest -relay HOST:PORT" for each connection the guest opens to a
// guestfwd address, with the connection as its stdin and stdout. A
// guestfwd whose target is a tcp: chardev serves only the first
// connection; a command started per connection serves any number.
const relayFlag = "-relay"

// relay copies between the connection on stdin/stdout and a new TCP
// connection to target, each direction until its sender closes it, and
// passes a close on to the other side. It writes nothing to stderr, which
// qemu also connects to the guest's connection.
func relay(target string) int {
	// No parent-death signal: a relay's parent is what qemu spawns it
	// through, not qemu, and with one the guest's first request to the
	// API server got EOF (TestDaemonFollowsAPIServer). A relay ends with
	// its connection, which qemu's death closes.
	guest, err := net.FileConn(os.Stdin)
	if err != nil {
		return 1
	}
	if err := relayConn(guest, target); err != nil {
		return 1
	}
	return 0
}

// relayConn relays between guest and a new connection to target, and
// closes guest.
func relayConn(guest net.Conn, target string) error {
	defer guest.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := new(net.Dialer).DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer host.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyAndCloseWrite(guest, host)
	}()
	copyAndCloseWrite(host, guest)
	<-done
	return nil
}

// copyAndCloseWrite copies src to dst until src ends, then closes dst for
// writing so that its reader sees the end too. On an error in either it
// closes both, which ends the other direction as well.
func copyAndCloseWrite(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// guestForward is a TCP address in the guest's user network that qemu
// forwards, connection by connection, to an address on the host.
type guestForward struct {
	guest netip.AddrPort
	host  string
}

// option is the forward as one guestfwd option of qemu's -nic user: the
// relay is this very program, so nothing else is built.
func (f guestForward) option(self string) string {
	cmd := fmt.Sprintf("%s %s %s", shellQuote(self), relayFlag, f.host)
	// qemu's option parser reads ",," as a literal comma.
	return fmt.Sprintf("guestfwd=tcp:%s-cmd:%s", f.guest, strings.ReplaceAll(cmd, ",", ",,"))
}

// selfPath is the path of the running vmtest, for qemu to start as a relay.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", errors.New("vmtest: the path of this program, for the guest's forwards: " + err.Error())
	}
	return p, nil
}
