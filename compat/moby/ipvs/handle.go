package ipvs

import (
	"context"
	"os"
	"time"

	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// Handle programs IPVS in one network namespace through package ipvs's
// Conn. Its methods are safe for concurrent use. They take no context, as
// moby/ipvs's did not: each waits as long as the kernel takes. Calls that
// need a deadline, and batches, go through Conn.
type Handle struct {
	conn *ipvs.Conn
}

// New opens a handle on IPVS in the network namespace at path (such as
// /var/run/netns/NAME or /proc/PID/ns/net), or in the caller's when path
// is empty. It fails with an error matching ipvs.ErrNotSupported
// when the kernel has no IPVS; it never loads the module.
func New(path string) (*Handle, error) {
	if path == "" {
		return dial(nil)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &ipvs.OpError{Op: "open network namespace", Object: path, Err: err}
	}
	// The socket stays in the namespace once made; the file is not needed.
	defer f.Close()
	return dial(&ipvs.Config{NetNS: int(f.Fd())})
}

func dial(cfg *ipvs.Config) (*Handle, error) {
	c, err := ipvs.Dial(cfg)
	if err != nil {
		return nil, err
	}
	return &Handle{conn: c}, nil
}

// FromConn returns a handle that sends through c, such as one
// ipvstest.Kernel.Dial made: code written against moby/ipvs's API is then
// unit-tested without a kernel. Closing the handle closes c.
func FromConn(c *ipvs.Conn) *Handle {
	return &Handle{conn: c}
}

// Conn returns the connection the handle sends through, for what
// moby/ipvs's API cannot say: batches of changes (ipvs.Batch and
// Conn.Apply), deadlines, 64-bit counters (Conn.Services, Conn.Table),
// tunnel settings. ToService and ToDestination convert the values.
func (h *Handle) Conn() *ipvs.Conn {
	return h.conn
}

// Close closes the handle's connection. The handle is unusable afterwards.
func (h *Handle) Close() {
	_ = h.conn.Close()
}

// NewService creates the service s.
func (h *Handle) NewService(s *Service) error {
	return serviceOp("create service", s, h.conn.CreateService)
}

// IsServicePresent reports whether the service s identifies exists. Any
// failure to find out reads as false.
func (h *Handle) IsServicePresent(s *Service) bool {
	_, err := h.GetService(s)
	return err == nil
}

// UpdateService sets the scheduler, flags and persistence of the existing
// service s.
func (h *Handle) UpdateService(s *Service) error {
	return serviceOp("update service", s, h.conn.UpdateService)
}

// DelService deletes the service s identifies, with its destinations.
func (h *Handle) DelService(s *Service) error {
	return serviceOp("delete service", s, h.conn.DeleteService)
}

// Flush deletes every service in the namespace.
func (h *Handle) Flush() error {
	return bareErrno(h.conn.Flush(context.Background()))
}

// NewDestination adds d to the existing service s.
func (h *Handle) NewDestination(s *Service, d *Destination) error {
	return destinationOp("create destination", s, d, h.conn.CreateDestination)
}

// UpdateDestination sets the weight, forwarding method and thresholds of
// d in service s.
func (h *Handle) UpdateDestination(s *Service, d *Destination) error {
	return destinationOp("update destination", s, d, h.conn.UpdateDestination)
}

// DelDestination removes d from service s.
func (h *Handle) DelDestination(s *Service, d *Destination) error {
	return destinationOp("delete destination", s, d, h.conn.DeleteDestination)
}

// GetServices lists the services of the namespace, nil when there are
// none.
func (h *Handle) GetServices() ([]*Service, error) {
	svcs, err := h.conn.Services(context.Background())
	if err != nil {
		return nil, bareErrno(err)
	}
	return convertAll(svcs, FromService), nil
}

// GetDestinations lists the destinations of service s, nil when there
// are none or s does not exist.
func (h *Handle) GetDestinations(s *Service) ([]*Destination, error) {
	svc, err := ToService(s)
	if err != nil {
		return nil, convertError("list destinations", s, nil, err)
	}
	ds, err := h.conn.Destinations(context.Background(), svc)
	if err != nil {
		return nil, bareErrno(err)
	}
	return convertAll(ds, FromDestination), nil
}

// GetService returns the service s identifies, with its settings and
// counters.
func (h *Handle) GetService(s *Service) (*Service, error) {
	svc, err := ToService(s)
	if err != nil {
		return nil, convertError("get service", s, nil, err)
	}
	got, err := h.conn.GetService(context.Background(), svc)
	if err != nil {
		return nil, bareErrno(err)
	}
	return FromService(got), nil
}

// GetConfig returns the namespace's connection timeouts.
func (h *Handle) GetConfig() (*Config, error) {
	t, err := h.conn.Timeouts(context.Background())
	if err != nil {
		return nil, bareErrno(err)
	}
	return &Config{TimeoutTCP: t.TCP, TimeoutTCPFin: t.TCPFin, TimeoutUDP: t.UDP}, nil
}

// SetConfig sets the namespace's connection timeouts; a zero one is left
// as it is.
func (h *Handle) SetConfig(c *Config) error {
	if c == nil {
		return &ipvs.OpError{Op: "set timeouts", Err: errNilConfig}
	}
	return bareErrno(h.conn.SetTimeouts(context.Background(), ipvs.Timeouts{
		TCP:    c.TimeoutTCP.Truncate(time.Second),
		TCPFin: c.TimeoutTCPFin.Truncate(time.Second),
		UDP:    c.TimeoutUDP.Truncate(time.Second),
	}))
}

// serviceOp converts s and calls do with it.
func serviceOp(op string, s *Service, do func(context.Context, ipvs.Service) error) error {
	svc, err := ToService(s)
	if err != nil {
		return convertError(op, s, nil, err)
	}
	return bareErrno(do(context.Background(), svc))
}

// destinationOp converts s and d and calls do with them.
func destinationOp(op string, s *Service, d *Destination, do func(context.Context, ipvs.Service, ipvs.Destination) error) error {
	svc, err := ToService(s)
	if err != nil {
		return convertError(op, s, d, err)
	}
	dst, err := ToDestination(d)
	if err != nil {
		return convertError(op, s, d, err)
	}
	return bareErrno(do(context.Background(), svc, dst))
}

// convertAll converts a list read back; an empty one is nil, as
// moby/ipvs returned it.
func convertAll[T, S any](in []S, convert func(S) *T) []*T {
	var out []*T
	for _, v := range in {
		out = append(out, convert(v))
	}
	return out
}
