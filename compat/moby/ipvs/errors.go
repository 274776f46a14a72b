package ipvs

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/ipvsplane/ipvsplane/ipvs"
)

var errNilConfig = errors.New("nil config")

// convertError is the failure of op on values that did not convert: an
// *ipvs.OpError, as every failure of a Handle is, naming the object by its
// raw fields.
func convertError(op string, s *Service, d *Destination, err error) error {
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
