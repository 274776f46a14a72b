package ipvs

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/ipvsplane/ipvsplane/ipvs"
)

var errNilConfig = errors.New("nil config")

// bareErrno returns a failure carrying an errno (the kernel's refusal, a
// failed system call) as that syscall.Errno alone, as moby/ipvs returned
// it: its callers compare err == syscall.EEXIST. Other failures, and nil,
// are returned as they are.
func bareErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// convertError is the failure of op on values that did not convert: the
// errno the kernel would have refused them with, when there is one, else
// an *ipvs.OpError naming the object by its raw fields and saying why.
func convertError(op string, s *Service, d *Destination, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	obj := describeService(s)
	if d != nil {
		obj += " -> " + hostPort(d.Address, d.Port)
	}
	return &ipvs.OpError{Op: op, Object: obj, Err: err}
}

func describeService(s *Service) string {
	switch {
	case s == nil:
		return "nil service"
	case s.FWMark != 0:
		return fmt.Sprintf("FWM %d family %d", s.FWMark, s.AddressFamily)
	}
	return fmt.Sprintf("protocol %d %s", s.Protocol, hostPort(s.Address, s.Port))
}

func hostPort(ip net.IP, port uint16) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}
