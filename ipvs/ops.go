package ipvs

import (
	"context"
	"fmt"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// CreateService creates s with its scheduler, flags and persistence.
func (c *Conn) CreateService(ctx context.Context, s Service) error {
	return c.applyOne(ctx, op{kind: opCreateService, svc: s})
}

// UpdateService sets the scheduler, flags and persistence of the existing
// service s (all of them: fields left zero are set to zero or defaults).
func (c *Conn) UpdateService(ctx context.Context, s Service) error {
	return c.applyOne(ctx, op{kind: opUpdateService, svc: s})
}

// DeleteService deletes s and its destinations. Only the fields that
// identify s are used.
func (c *Conn) DeleteService(ctx context.Context, s Service) error {
	return c.applyOne(ctx, op{kind: opDeleteService, svc: s})
}

// CreateDestination adds d to service s.
func (c *Conn) CreateDestination(ctx context.Context, s Service, d Destination) error {
	return c.applyOne(ctx, op{kind: opCreateDestination, svc: s, dest: d})
}

// UpdateDestination sets the forwarding method, weight, thresholds and
// tunnel settings of d in service s.
func (c *Conn) UpdateDestination(ctx context.Context, s Service, d Destination) error {
	return c.applyOne(ctx, op{kind: opUpdateDestination, svc: s, dest: d})
}

// DeleteDestination removes d from service s. Only d's address and port
// are used.
func (c *Conn) DeleteDestination(ctx context.Context, s Service, d Destination) error {
	return c.applyOne(ctx, op{kind: opDeleteDestination, svc: s, dest: d})
}

// Flush deletes every service in the namespace, including those other
// programs made.
func (c *Conn) Flush(ctx context.Context) error {
	return c.applyOne(ctx, op{kind: opFlush})
}

// Zero resets the counters of every service and destination.
func (c *Conn) Zero(ctx context.Context) error {
	return c.applyOne(ctx, op{kind: opZero})
}

// ZeroService resets the counters of s and its destinations.
func (c *Conn) ZeroService(ctx context.Context, s Service) error {
	return c.applyOne(ctx, op{kind: opZeroService, svc: s})
}

// SetTimeouts sets the connection timeouts; a zero field leaves that
// timeout as it is.
func (c *Conn) SetTimeouts(ctx context.Context, t Timeouts) error {
	return c.applyOne(ctx, op{kind: opSetTimeouts, timeouts: t})
}

// applyOne runs a single operation.
func (c *Conn) applyOne(ctx context.Context, o op) error {
	var b Batch
	b.add(o)
	return c.apply(ctx, &b, false)
}

// query runs one get or dump request and returns its replies' attributes.
func (c *Conn) query(ctx context.Context, kind netlink.HeaderFlags, command uint8, attrs []byte) ([][]byte, error) {
	r := c.genlRequest(kind, command, attrs)
	if err := c.nl.Exchange(ctx, r); err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return genlPayloads(r.Replies)
}

// genlRequest frames a command with its attributes.
func (c *Conn) genlRequest(kind netlink.HeaderFlags, command uint8, attrs []byte) *nl.Request {
	data := make([]byte, 0, nl.GenlHeaderLen+len(attrs))
	data = append(nl.AppendGenlHeader(data, command, genlVersion), attrs...)
	return &nl.Request{Type: c.family, Flags: kind, Data: data}
}

// genlPayloads returns the replies' attributes, after their genlmsghdr.
func genlPayloads(replies []netlink.Message) ([][]byte, error) {
	out := make([][]byte, len(replies))
	for i, m := range replies {
		if len(m.Data) < nl.GenlHeaderLen {
			return nil, fmt.Errorf("generic netlink reply of %d bytes", len(m.Data))
		}
		out[i] = m.Data[nl.GenlHeaderLen:]
	}
	return out, nil
}

// queryError wraps a query's failure, with ErrServiceNotExist for ESRCH
// when the query names a service.
func queryError(what, object string, err error) error {
	oe := &OpError{Op: what, Object: object}
	oe.Message, oe.Err = nl.ErrorDetail(err)
	if oe.Err == unix.ESRCH && object != "" {
		oe.sentinel = ErrServiceNotExist
	}
	return oe
}

// serviceAttrs encodes a request naming service s.
func serviceAttrs(s Service) ([]byte, error) {
	if err := s.validateKey(); err != nil {
		return nil, err
	}
	var w nl.Writer
	n := w.Begin(cmdAttrService | nl.Nested)
	s.encode(&w, false)
	w.End(n)
	return w.B, nil
}

// nested returns the payload of the first-level attribute typ.
func nested(b []byte, typ uint16, what string) ([]byte, error) {
	d := nl.NewReader(b, what+" reply")
	for d.Next() {
		if d.Type() == typ {
			return d.Bytes(), nil
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s reply without attribute %d", what, typ)
}

// GetService returns the service the key fields of s identify, with its
// settings and counters.
func (c *Conn) GetService(ctx context.Context, s Service) (Service, error) {
	attrs, err := serviceAttrs(s)
	if err != nil {
		return Service{}, queryError("get service", s.String(), err)
	}
	replies, err := c.query(ctx, reqGet, cmdGetService, attrs)
	if err != nil {
		return Service{}, queryError("get service", s.String(), err)
	}
	if len(replies) != 1 {
		return Service{}, queryError("get service", s.String(), fmt.Errorf("%d replies", len(replies)))
	}
	got, err := decodeServiceReply(replies[0])
	if err != nil {
		return Service{}, queryError("get service", s.String(), err)
	}
	return got, nil
}

func decodeServiceReply(b []byte) (Service, error) {
	nb, err := nested(b, cmdAttrService, "service")
	if err != nil {
		return Service{}, err
	}
	return decodeService(nb)
}

func decodeDestinationReply(b []byte, svcFamily inet.Family) (Destination, error) {
	nb, err := nested(b, cmdAttrDest, "destination")
	if err != nil {
		return Destination{}, err
	}
	return decodeDestination(nb, svcFamily)
}

// Services lists every service in the namespace.
func (c *Conn) Services(ctx context.Context) ([]Service, error) {
	replies, err := c.query(ctx, reqDump, cmdGetService, nil)
	if err != nil {
		return nil, queryError("list services", "", err)
	}
	svcs := make([]Service, 0, len(replies))
	for _, b := range replies {
		s, err := decodeServiceReply(b)
		if err != nil {
			return nil, queryError("list services", "", err)
		}
		svcs = append(svcs, s)
	}
	return svcs, nil
}

// Destinations lists the destinations of service s. The kernel answers
// with an empty list, not an error, when s does not exist.
func (c *Conn) Destinations(ctx context.Context, s Service) ([]Destination, error) {
	attrs, err := serviceAttrs(s)
	if err != nil {
		return nil, queryError("list destinations", s.String(), err)
	}
	replies, err := c.query(ctx, reqDump, cmdGetDest, attrs)
	if err != nil {
		return nil, queryError("list destinations", s.String(), err)
	}
	return decodeDestinations(s, replies)
}

func decodeDestinations(s Service, replies [][]byte) ([]Destination, error) {
	ds := make([]Destination, 0, len(replies))
	for _, b := range replies {
		d, err := decodeDestinationReply(b, s.family())
		if err != nil {
			return nil, queryError("list destinations", s.String(), err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// GetDestination returns the destination of service s with d's address
// and port, or an error matching ErrDestinationNotExist.
func (c *Conn) GetDestination(ctx context.Context, s Service, d Destination) (Destination, error) {
	ds, err := c.Destinations(ctx, s)
	if err != nil {
		return Destination{}, err
	}
	for _, got := range ds {
		if got.Addr == d.Addr && got.Port == d.Port {
			return got, nil
		}
	}
	return Destination{}, &OpError{
		Op: "get destination", Object: s.String() + " -> " + d.String(),
		Err: unix.ENOENT, sentinel: ErrDestinationNotExist,
	}
}

// Timeouts returns the connection timeouts.
func (c *Conn) Timeouts(ctx context.Context) (Timeouts, error) {
	replies, err := c.query(ctx, reqGet, cmdGetConfig, nil)
	if err == nil && len(replies) != 1 {
		err = fmt.Errorf("%d replies", len(replies))
	}
	if err != nil {
		return Timeouts{}, queryError("get timeouts", "", err)
	}
	t, err := decodeTimeouts(replies[0])
	if err != nil {
		return Timeouts{}, queryError("get timeouts", "", err)
	}
	return t, nil
}

// Info returns the IPVS version and connection table size.
func (c *Conn) Info(ctx context.Context) (Info, error) {
	replies, err := c.query(ctx, reqGet, cmdGetInfo, nil)
	if err == nil && len(replies) != 1 {
		err = fmt.Errorf("%d replies", len(replies))
	}
	if err != nil {
		return Info{}, queryError("get info", "", err)
	}
	i, err := decodeInfo(replies[0])
	if err != nil {
		return Info{}, queryError("get info", "", err)
	}
	return i, nil
}
