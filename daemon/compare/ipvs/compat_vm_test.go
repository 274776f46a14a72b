//go:build vmtest

package ipvs_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compat "github.com/ipvsplane/ipvsplane/compat/moby/ipvs"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
	mobyipvs "github.com/moby/ipvs"
)

// compat/moby/ipvs is a drop-in for moby/ipvs: one scenario of calls
// (services of each protocol, family, kind of scheduler and flag, firewall
// marks, destinations of each forwarding method, updates, values read back
// and written again, deletions, failures, timeouts, Flush) run through
// moby/ipvs in one fresh namespace and through compat in another leaves the
// same kernel state after each phase, as ipvsadm and package ipvs read it,
// gets the same errnos, and reads back the same values.
func TestCompatSameKernelState(t *testing.T) {
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ipvsadm")
	run := func(open func(path string) (handle, error)) []string {
		ns := testutil.NewNetNS(t)
		h, err := open(fmt.Sprintf("/proc/self/fd/%d", ns.FD()))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		r := &recorder{t: t, ns: ns, conn: testutil.Open(t, func() (*ipvs.Conn, error) { return ipvs.Dial(&ipvs.Config{NetNS: ns.FD()}) })}
		scenario(r, h)
		return r.log
	}
	moby := run(func(path string) (handle, error) { return mobyipvs.New(path) })
	ours := run(func(path string) (handle, error) {
		h, err := compat.New(path)
		return compatHandle{h}, err
	})
	if diff := cmp.Diff(strings.Join(moby, "\n"), strings.Join(ours, "\n")); diff != "" {
		t.Fatalf("moby/ipvs (-) and compat (+) differ:\n%s", diff)
	}
	// Agreeing is not enough: the calls must also have done what they
	// say, in moby/ipvs's run and so in compat's.
	for _, want := range []string{
		"new service protocol 132 [fd00:96::3]:5060: ok",
		"new destination protocol 6 10.96.0.1:80 -> 127.0.0.1: ok",
		"new service again: errno file exists",
		"new destination again: errno file exists",
		"new destination in a missing service: errno no such process",
		"update a missing service: errno no such process",
		"update a missing destination: errno no such file or directory",
		"service present: true: ok",
		"missing service present: false: ok",
		"write back destination protocol 6 10.96.0.1:80 -> 127.0.0.1: ok",
		"delete destination again: errno no such file or directory",
		"delete service again: errno no such process",
		"-A -t 10.96.0.1:80 -s wrr -p 60",
		"-a -f 100 -r 10.244.4.2",
		"get services after flush: 0, nil true: ok",
	} {
		if !slices.ContainsFunc(moby, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("the scenario did not observe %q", want)
		}
	}
	t.Logf("%d observations agree:\n%s", len(moby), strings.Join(moby, "\n"))
}

// handle is moby/ipvs's API as the scenario calls it.
type handle interface {
	NewService(*mobyipvs.Service) error
	IsServicePresent(*mobyipvs.Service) bool
	UpdateService(*mobyipvs.Service) error
	DelService(*mobyipvs.Service) error
	Flush() error
	NewDestination(*mobyipvs.Service, *mobyipvs.Destination) error
	UpdateDestination(*mobyipvs.Service, *mobyipvs.Destination) error
	DelDestination(*mobyipvs.Service, *mobyipvs.Destination) error
	GetServices() ([]*mobyipvs.Service, error)
	GetDestinations(*mobyipvs.Service) ([]*mobyipvs.Destination, error)
	GetService(*mobyipvs.Service) (*mobyipvs.Service, error)
	GetConfig() (*mobyipvs.Config, error)
	SetConfig(*mobyipvs.Config) error
	Close()
}

// recorder writes down what a run observes: each call's outcome, the
// values read back, and at checkpoints the kernel's table as ipvsadm and
// package ipvs read it. Two runs agree when their logs are equal.
type recorder struct {
	t    *testing.T
	ns   *testutil.NetNS
	conn *ipvs.Conn
	log  []string
}

// call records the outcome of a call: ok, or the kernel's errno. An error
// without an errno is recorded whole, and differs between the libraries.
func (r *recorder) call(what string, err error) {
	out := "ok"
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		out = "errno " + errno.Error()
	case err != nil:
		out = "error " + err.Error()
	}
	r.log = append(r.log, what+": "+out)
}

// values records values read back, sorted: the kernel lists them in hash
// order, which differs between namespaces.
func (r *recorder) values(what string, vs []string, err error) {
	r.call(what, err)
	slices.Sort(vs)
	for _, v := range vs {
		r.log = append(r.log, "  "+v)
	}
}

func (r *recorder) checkpoint(name string) {
	r.t.Helper()
	save := strings.Split(strings.TrimSpace(r.ns.Run(r.t, "ipvsadm", "-S", "-n")), "\n")
	r.values("ipvsadm -Sn after "+name, save, nil)
	timeouts := strings.TrimSpace(r.ns.Run(r.t, "ipvsadm", "-L", "--timeout"))
	r.log = append(r.log, "ipvsadm --timeout after "+name+": "+timeouts)
	table, err := r.conn.Table(testutil.Context(r.t))
	// Every field, not the types' String methods' short names.
	type service ipvs.Service
	type destination ipvs.Destination
	var vs []string
	for _, v := range table {
		for _, d := range v.Destinations {
			vs = append(vs, fmt.Sprintf("%v -> %+v", v.Service, destination(d)))
		}
		vs = append(vs, fmt.Sprintf("%+v", service(v.Service)))
	}
	r.values("package ipvs's table after "+name, vs, err)
}

// scenario is the one sequence of calls both libraries make.
func scenario(r *recorder, h handle) {
	v := newScenarioValues()
	r.call("set config", h.SetConfig(&mobyipvs.Config{TimeoutTCP: 901 * time.Second, TimeoutTCPFin: 121 * time.Second, TimeoutUDP: 31 * time.Second}))
	c, err := h.GetConfig()
	r.values("get config", []string{fmt.Sprintf("%+v", c)}, err)
	create(r, h, v)
	r.checkpoint("creating")
	update(r, h, v)
	r.checkpoint("updating")
	readAndWriteBack(r, h)
	r.checkpoint("writing back what was read")
	remove(r, h, v)
	r.checkpoint("deleting")
	r.call("set config, TCP only", h.SetConfig(&mobyipvs.Config{TimeoutTCP: 600 * time.Second}))
	r.call("flush", h.Flush())
	svcs, err := h.GetServices()
	r.call(fmt.Sprintf("get services after flush: %d, nil %v", len(svcs), svcs == nil), err)
	r.checkpoint("flushing")
}

// scenarioValues are the scenario's services and destinations.
type scenarioValues struct {
	svcs  []*mobyipvs.Service
	dests map[*mobyipvs.Service][]*mobyipvs.Destination
	// missing is a service the kernel never has.
	missing *mobyipvs.Service
}

func newScenarioValues() scenarioValues {
	ip := net.ParseIP
	v4 := func(proto uint16, addr string, port uint16, sched string) *mobyipvs.Service {
		return &mobyipvs.Service{AddressFamily: syscall.AF_INET, Protocol: proto, Address: ip(addr), Port: port, SchedName: sched, Netmask: 0xffffffff}
	}
	v6 := func(proto uint16, addr string, port uint16, sched string) *mobyipvs.Service {
		return &mobyipvs.Service{AddressFamily: syscall.AF_INET6, Protocol: proto, Address: ip(addr), Port: port, SchedName: sched, Netmask: 128}
	}
	tcp4 := v4(syscall.IPPROTO_TCP, "10.96.0.1", 80, mobyipvs.RoundRobin)
	udp4 := v4(syscall.IPPROTO_UDP, "10.96.0.2", 53, mobyipvs.WeightedRoundRobin)
	udp4.Flags = 0x4 // one-packet scheduling
	sctp4 := v4(syscall.IPPROTO_SCTP, "10.96.0.3", 9, mobyipvs.LeastConnection)
	sticky4 := v4(syscall.IPPROTO_TCP, "10.96.0.4", 443, mobyipvs.SourceHashing)
	sticky4.Flags, sticky4.Timeout = 0x1|0x8|0x10, 600 // persistent, sh-fallback, sh-port
	sticky4.Netmask = binary.NativeEndian.Uint32([]byte{255, 255, 255, 0})
	tcp6 := v6(syscall.IPPROTO_TCP, "fd00:96::1", 80, mobyipvs.DestinationHashing)
	sticky6 := v6(syscall.IPPROTO_UDP, "fd00:96::2", 53, mobyipvs.WeightedLeastConnection)
	sticky6.Flags, sticky6.Timeout, sticky6.Netmask = 0x1, 10800, 64
	mh6 := v6(syscall.IPPROTO_SCTP, "fd00:96::3", 5060, "mh")
	mh6.Flags = 0x8 | 0x10 // mh-fallback, mh-port
	fwm4 := &mobyipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 100, SchedName: mobyipvs.RoundRobin, Netmask: 0xffffffff}
	fwm6 := &mobyipvs.Service{AddressFamily: syscall.AF_INET6, FWMark: 101, SchedName: mobyipvs.SourceHashing, Netmask: 128}

	d := func(addr string, port uint16, weight int, flags uint32) *mobyipvs.Destination {
		return &mobyipvs.Destination{Address: ip(addr), Port: port, Weight: weight, ConnectionFlags: flags}
	}
	route := d("10.244.0.2", 8080, 2, mobyipvs.ConnectionFlagDirectRoute)
	route.UpperThreshold, route.LowerThreshold = 100, 10
	return scenarioValues{
		svcs: []*mobyipvs.Service{tcp4, udp4, sctp4, sticky4, tcp6, sticky6, mh6, fwm4, fwm6},
		dests: map[*mobyipvs.Service][]*mobyipvs.Destination{
			tcp4: {d("10.244.0.1", 8080, 1, mobyipvs.ConnectionFlagMasq), route, d("10.244.0.3", 8080, 3, mobyipvs.ConnectionFlagTunnel),
				d("10.244.0.4", 8080, 0, mobyipvs.ConnectionFlagMasq), d("127.0.0.1", 8080, 1, mobyipvs.ConnectionFlagMasq)},
			udp4:    {d("10.244.1.1", 53, 1, 0)},
			sctp4:   {d("10.244.2.1", 9, 5, 0)},
			sticky4: {d("10.244.3.1", 443, 1, 0), d("10.244.3.2", 443, 1, 0)},
			tcp6:    {d("fd00:244::1", 8080, 1, 0), d("fd00:244::2", 8080, 1, mobyipvs.ConnectionFlagDirectRoute)},
			sticky6: {d("fd00:244::3", 53, 1, 0)},
			mh6:     {d("fd00:244::5", 5060, 1, 0), d("fd00:244::6", 5060, 2, 0)},
			fwm4:    {d("10.244.4.1", 0, 1, 0), d("10.244.4.2", 0, 1, mobyipvs.ConnectionFlagDirectRoute)},
			fwm6:    {d("fd00:244::4", 0, 1, 0)},
		},
		missing: v4(syscall.IPPROTO_TCP, "10.96.9.9", 9, mobyipvs.RoundRobin),
	}
}

func create(r *recorder, h handle, v scenarioValues) {
	for _, s := range v.svcs {
		r.call("new service "+describe(s), h.NewService(s))
		for _, d := range v.dests[s] {
			r.call("new destination "+describe(s)+" -> "+d.Address.String(), h.NewDestination(s, d))
		}
	}
	tcp4 := v.svcs[0]
	r.call("new service again", h.NewService(tcp4))
	r.call("new destination again", h.NewDestination(tcp4, v.dests[tcp4][0]))
	r.call("new destination in a missing service", h.NewDestination(v.missing, v.dests[tcp4][0]))
}

func update(r *recorder, h handle, v scenarioValues) {
	tcp4, fwm4 := *v.svcs[0], *v.svcs[7]
	tcp4.SchedName, tcp4.Flags, tcp4.Timeout = mobyipvs.WeightedRoundRobin, 0x1, 60
	r.call("update service to persistent wrr", h.UpdateService(&tcp4))
	fwm4.SchedName, fwm4.Flags = mobyipvs.SourceHashing, 0x8
	r.call("update fwmark service to sh", h.UpdateService(&fwm4))
	r.call("update a missing service", h.UpdateService(v.missing))

	drain := *v.dests[v.svcs[0]][0]
	drain.Weight = 0
	r.call("drain a destination", h.UpdateDestination(&tcp4, &drain))
	masq := *v.dests[v.svcs[0]][1]
	masq.ConnectionFlags, masq.Weight, masq.UpperThreshold, masq.LowerThreshold = mobyipvs.ConnectionFlagMasq, 7, 0, 0
	r.call("route a destination by masquerading", h.UpdateDestination(&tcp4, &masq))
	r.call("update a missing destination", h.UpdateDestination(&tcp4, &mobyipvs.Destination{Address: net.ParseIP("10.244.9.9"), Port: 1, Weight: 1}))

	r.call(fmt.Sprintf("service present: %v", h.IsServicePresent(&tcp4)), nil)
	r.call(fmt.Sprintf("missing service present: %v", h.IsServicePresent(v.missing)), nil)
	got, err := h.GetService(v.svcs[3])
	r.values("get service", []string{fmt.Sprintf("%#v", got)}, err)
	_, err = h.GetService(v.missing)
	r.call("get a missing service", err)
	ds, err := h.GetDestinations(v.missing)
	r.call(fmt.Sprintf("get destinations of a missing service: %d, nil %v", len(ds), ds == nil), err)
}

// readAndWriteBack reads every service and destination and writes each
// back as read: Get's values are valid input, and change nothing.
func readAndWriteBack(r *recorder, h handle) {
	svcs, err := h.GetServices()
	slices.SortFunc(svcs, func(a, b *mobyipvs.Service) int { return strings.Compare(describe(a), describe(b)) })
	var vs []string
	for _, s := range svcs {
		vs = append(vs, fmt.Sprintf("%#v", *s))
	}
	r.values("get services", vs, err)
	for _, s := range svcs {
		ds, err := h.GetDestinations(s)
		var dvs []string
		for _, d := range ds {
			dvs = append(dvs, fmt.Sprintf("%#v", *d))
		}
		r.values("get destinations of "+describe(s), dvs, err)
		slices.SortFunc(ds, func(a, b *mobyipvs.Destination) int { return strings.Compare(a.Address.String(), b.Address.String()) })
		for _, d := range ds {
			r.call("write back destination "+describe(s)+" -> "+d.Address.String(), h.UpdateDestination(s, d))
		}
	}
	for _, s := range svcs {
		r.call("write back service "+describe(s), h.UpdateService(s))
	}
}

func remove(r *recorder, h handle, v scenarioValues) {
	tcp4, sctp4, fwm6 := v.svcs[0], v.svcs[2], v.svcs[8]
	gone := v.dests[tcp4][2]
	r.call("delete destination", h.DelDestination(tcp4, gone))
	r.call("delete destination again", h.DelDestination(tcp4, gone))
	r.call("delete service", h.DelService(sctp4))
	r.call("delete service again", h.DelService(sctp4))
	r.call("delete fwmark service", h.DelService(fwm6))
	r.call("delete destination of a deleted service", h.DelDestination(fwm6, v.dests[fwm6][0]))
}

func describe(s *mobyipvs.Service) string {
	if s.FWMark != 0 {
		return fmt.Sprintf("fwmark %d family %d", s.FWMark, s.AddressFamily)
	}
	return fmt.Sprintf("protocol %d %s", s.Protocol, net.JoinHostPort(s.Address.String(), fmt.Sprint(s.Port)))
}

// compatHandle gives compat's Handle the scenario's moby-typed API,
// copying each value field by field: TestCompatAPIMatchesMoby shows the
// two packages' fields are the same.
type compatHandle struct{ h *compat.Handle }

func (c compatHandle) NewService(s *mobyipvs.Service) error {
	return c.h.NewService(to[compat.Service](s))
}
func (c compatHandle) IsServicePresent(s *mobyipvs.Service) bool {
	return c.h.IsServicePresent(to[compat.Service](s))
}
func (c compatHandle) UpdateService(s *mobyipvs.Service) error {
	return c.h.UpdateService(to[compat.Service](s))
}
func (c compatHandle) DelService(s *mobyipvs.Service) error {
	return c.h.DelService(to[compat.Service](s))
}
func (c compatHandle) Flush() error { return c.h.Flush() }
func (c compatHandle) NewDestination(s *mobyipvs.Service, d *mobyipvs.Destination) error {
	return c.h.NewDestination(to[compat.Service](s), to[compat.Destination](d))
}
func (c compatHandle) UpdateDestination(s *mobyipvs.Service, d *mobyipvs.Destination) error {
	return c.h.UpdateDestination(to[compat.Service](s), to[compat.Destination](d))
}
func (c compatHandle) DelDestination(s *mobyipvs.Service, d *mobyipvs.Destination) error {
	return c.h.DelDestination(to[compat.Service](s), to[compat.Destination](d))
}
func (c compatHandle) GetServices() ([]*mobyipvs.Service, error) {
	svcs, err := c.h.GetServices()
	return toAll[mobyipvs.Service](svcs), err
}
func (c compatHandle) GetDestinations(s *mobyipvs.Service) ([]*mobyipvs.Destination, error) {
	ds, err := c.h.GetDestinations(to[compat.Service](s))
	return toAll[mobyipvs.Destination](ds), err
}
func (c compatHandle) GetService(s *mobyipvs.Service) (*mobyipvs.Service, error) {
	got, err := c.h.GetService(to[compat.Service](s))
	return to[mobyipvs.Service](got), err
}
func (c compatHandle) GetConfig() (*mobyipvs.Config, error) {
	got, err := c.h.GetConfig()
	return to[mobyipvs.Config](got), err
}
func (c compatHandle) SetConfig(cfg *mobyipvs.Config) error {
	return c.h.SetConfig(to[compat.Config](cfg))
}
func (c compatHandle) Close() { c.h.Close() }

// to copies a struct into the other package's type of the same fields;
// nil stays nil.
func to[T, S any](src *S) *T {
	if src == nil {
		return nil
	}
	var dst T
	copyFields(reflect.ValueOf(&dst).Elem(), reflect.ValueOf(src).Elem())
	return &dst
}

func toAll[T, S any](src []*S) []*T {
	if src == nil {
		return nil
	}
	out := make([]*T, len(src))
	for i, s := range src {
		out[i] = to[T](s)
	}
	return out
}

func copyFields(dst, src reflect.Value) {
	for i := range dst.NumField() {
		f, s := dst.Field(i), src.FieldByName(dst.Type().Field(i).Name)
		if f.Kind() == reflect.Struct && f.Type() != s.Type() {
			copyFields(f, s)
		} else {
			f.Set(s)
		}
	}
}
