package healthcheck

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/httpserver"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// ServiceServers serve the health-check node ports of load-balancer
// services with externalTrafficPolicy Local, as kube-proxy does: an HTTP server on
// each port answers with the number of the service's endpoints on this
// node, 200 when there are some and 503 when there are none, so the cloud
// load balancer sends traffic only to nodes that can take it. Like
// kube-proxy's server per family, each port listens on the node's
// health-check addresses (see plan.HealthCheckAddresses) and
// counts the endpoints of the family the request came in on.
type ServiceServers struct {
	cfg ServiceConfig

	mu sync.Mutex
	// addrs are the addresses every port listens on; an unspecified one
	// stands for every address of its family.
	addrs   []netip.Addr
	servers map[uint16]*hcServer
	// entries are the service ports that have a health-check port, with
	// their ready endpoints on this node; byPort indexes them by port (the
	// Ports of one service share it).
	entries map[model.ServicePortName]hcEntry
	byPort  map[uint16]map[model.ServicePortName]bool
	// failed are the ports that could not be opened on some address,
	// tried again at every update.
	failed map[uint16]bool
}

// hcEntry is one service port's share of a health-check port.
type hcEntry struct {
	port  uint16
	local []netip.Addr
	// families are the service's IP families, those of its cluster IPs.
	families inet.PerFamily[bool]
}

// hcServer is one health-check port: what it reports, and its listeners,
// one per address.
type hcServer struct {
	state     atomic.Pointer[hcState]
	listeners map[netip.Addr]*hcListener
}

// hcListener serves a port on one address.
type hcListener struct {
	srv *http.Server
	// ln is closed by stop too: a server stopped before its goroutine
	// reached Serve would close it only when it got there.
	ln net.Listener
}

// stop closes the server and its listener, letting requests under way end
// while ctx lasts.
func (l *hcListener) stop(ctx context.Context) {
	l.srv.Shutdown(ctx)
	l.ln.Close()
}

// close closes the server, its listener and its connections at once.
func (l *hcListener) close() {
	l.srv.Close()
	l.ln.Close()
}

// hcState is what a health-check port reports: Local counts the
// service's endpoints on this node, per family.
type hcState struct {
	Namespace, Name string
	Local           inet.PerFamily[int]
	// Families are the service's IP families: kube-proxy's proxier of a
	// family serves only its own family's services, so the port listens
	// only on those families' addresses.
	Families inet.PerFamily[bool]
}

// ServiceConfig is what ServiceServers need.
type ServiceConfig struct {
	Log *zap.Logger
	// Node is this node's name: the endpoints counted are those on it.
	Node string
	// Healthy reports whether the daemon is healthy (ProxyHealth.Healthy);
	// an unhealthy daemon's ports answer 503.
	Healthy func() bool
	// Events, if set, records on the Service a port that cannot open.
	Events events.Recorder
	// Listen opens a port's listener on one address; nil listens there
	// in the address's family only, as kube-proxy does.
	Listen func(addr netip.AddrPort) (net.Listener, error)
}

// NewServiceServers returns servers listening nowhere yet: SetAddresses,
// then Replace or Apply, open them. Close stops them.
func NewServiceServers(cfg ServiceConfig) *ServiceServers {
	if cfg.Listen == nil {
		cfg.Listen = listenFamily
	}
	return &ServiceServers{cfg: cfg, servers: map[uint16]*hcServer{},
		entries: map[model.ServicePortName]hcEntry{}, byPort: map[uint16]map[model.ServicePortName]bool{},
		failed: map[uint16]bool{}}
}

// listenFamily listens on addr in its family only, as kube-proxy's tcp4
// and tcp6 servers do: on [::] the socket is IPv6-only, so that 0.0.0.0
// is left to the IPv4 listener.
func listenFamily(addr netip.AddrPort) (net.Listener, error) {
	network := "tcp4"
	if addr.Addr().Is6() {
		network = "tcp6"
	}
	return net.Listen(network, addr.String())
}

// SetAddresses makes every port listen on addrs, which the node's
// addresses decide and may change at any sync: listeners on an address
// still wanted stay, the others close, and the new addresses open.
func (h *ServiceServers) SetAddresses(addrs []netip.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.Equal(h.addrs, addrs) {
		return
	}
	h.addrs = slices.Clone(addrs)
	dirty := map[uint16]bool{}
	for port := range h.servers {
		dirty[port] = true
	}
	h.refreshLocked(dirty)
}

// entry returns a service port's share of its health-check port, if it
// has one: its ready endpoints on node.
func entry(node string, sp *model.ServicePort) (hcEntry, bool) {
	if sp == nil || sp.ExternalPolicy != model.PolicyLocal || sp.HealthCheckNodePort == 0 {
		return hcEntry{}, false
	}
	e := hcEntry{port: sp.HealthCheckNodePort}
	for _, a := range sp.ClusterIPs {
		*e.families.Of(inet.FamilyOf(a.Unmap())) = true
	}
	// A set, not a scan of the addresses so far: a tenant may list tens
	// of thousands of endpoints on the node.
	seen := map[netip.Addr]bool{}
	for _, ep := range sp.Endpoints {
		if ep.Ready && ep.NodeName == node && !seen[ep.Addr] {
			seen[ep.Addr] = true
			e.local = append(e.local, ep.Addr)
		}
	}
	return e, true
}

// Replace makes the servers match services, after a sync that handed
// over the whole state.
func (h *ServiceServers) Replace(services []model.ServicePort) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dirty := map[uint16]bool{}
	for port := range h.byPort {
		dirty[port] = true
	}
	clear(h.entries)
	clear(h.byPort)
	for i := range services {
		h.setLocked(services[i].Name, &services[i], dirty)
	}
	h.refreshLocked(dirty)
}

// Apply updates the servers for the service ports that changed; its cost
// follows the changes, not the number of services.
func (h *ServiceServers) Apply(changes []model.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dirty := map[uint16]bool{}
	for _, c := range changes {
		h.setLocked(c.Name, c.Port, dirty)
	}
	h.refreshLocked(dirty)
}

// setLocked records a service port's new version (nil: removed) and marks
// the ports it was and is on.
func (h *ServiceServers) setLocked(name model.ServicePortName, sp *model.ServicePort, dirty map[uint16]bool) {
	if old, ok := h.entries[name]; ok {
		dirty[old.port] = true
		delete(h.byPort[old.port], name)
		if len(h.byPort[old.port]) == 0 {
			delete(h.byPort, old.port)
		}
		delete(h.entries, name)
	}
	e, ok := entry(h.cfg.Node, sp)
	if !ok {
		return
	}
	dirty[e.port] = true
	h.entries[name] = e
	if h.byPort[e.port] == nil {
		h.byPort[e.port] = map[model.ServicePortName]bool{}
	}
	h.byPort[e.port][name] = true
}

// state works out what a health-check port reports: its service and the
// distinct addresses of the ready endpoints on this node over the
// service's ports, as kube-proxy's LocalReadyEndpoints counts them.
func (h *ServiceServers) stateLocked(port uint16) (hcState, bool) {
	names := h.byPort[port]
	if len(names) == 0 {
		return hcState{}, false
	}
	var st hcState
	seen := map[netip.Addr]bool{}
	for _, name := range slices.SortedFunc(maps.Keys(names), func(a, b model.ServicePortName) int {
		return cmp.Compare(a.String(), b.String())
	}) {
		st.Namespace, st.Name = name.Namespace, name.Name
		for _, f := range inet.Families() {
			if h.entries[name].families.Get(f) {
				*st.Families.Of(f) = true
			}
		}
		for _, a := range h.entries[name].local {
			if !seen[a] {
				seen[a] = true
				*st.Local.Of(inet.FamilyOf(a.Unmap()))++
			}
		}
	}
	return st, true
}

// refreshLocked opens, updates and closes the servers of the dirty ports.
// A port that cannot be opened is logged, recorded on its Service once,
// and tried again at the next update.
func (h *ServiceServers) refreshLocked(dirty map[uint16]bool) {
	retrying := maps.Clone(h.failed)
	maps.Copy(dirty, h.failed)
	clear(h.failed)
	for port := range dirty {
		st, want := h.stateLocked(port)
		s := h.servers[port]
		if !want {
			if s != nil {
				s.close()
				delete(h.servers, port)
			}
			continue
		}
		if s == nil {
			s = &hcServer{listeners: map[netip.Addr]*hcListener{}}
			h.servers[port] = s
		}
		s.state.Store(&st)
		if err := h.listenLocked(port, s, h.addrsOf(st.Families)); err != nil {
			h.cfg.Log.Error("cannot serve a health-check node port", zap.Uint16("port", port),
				zap.String("service", st.Namespace+"/"+st.Name), zap.Error(err))
			h.failed[port] = true
			if h.cfg.Events != nil && !retrying[port] {
				h.cfg.Events.Eventf(events.ServiceRef(st.Namespace, st.Name), v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen",
					"node %s failed to start healthcheck %q on port %d: %v", h.cfg.Node, st.Namespace+"/"+st.Name, port, err)
			}
		}
	}
}

// addrsOf returns the listen addresses of the families.
func (h *ServiceServers) addrsOf(families inet.PerFamily[bool]) []netip.Addr {
	var out []netip.Addr
	for _, a := range h.addrs {
		if families.Get(inet.FamilyOf(a.Unmap())) {
			out = append(out, a)
		}
	}
	return out
}

// listenLocked makes a port's listeners match addrs: it closes those on
// addresses no longer wanted and opens the missing ones, returning the
// errors of those that cannot open.
func (h *ServiceServers) listenLocked(port uint16, s *hcServer, addrs []netip.Addr) error {
	for a, l := range s.listeners {
		if !slices.Contains(addrs, a) {
			l.close()
			delete(s.listeners, a)
		}
	}
	var errs []error
	for _, a := range addrs {
		if s.listeners[a] != nil {
			continue
		}
		ln, err := h.cfg.Listen(netip.AddrPortFrom(a, port))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ln = httpserver.Limit(ln, httpserver.MaxConnections)
		l := &hcListener{ln: ln, srv: httpserver.New(h.handler(s))}
		s.listeners[a] = l
		go func() {
			if err := l.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				h.cfg.Log.Error("health-check node port stopped", zap.Stringer("address", netip.AddrPortFrom(a, port)), zap.Error(err))
			}
		}()
	}
	return errors.Join(errs...)
}

// close closes a port's listeners at once.
func (s *hcServer) close() {
	for a, l := range s.listeners {
		l.close()
		delete(s.listeners, a)
	}
}

func (h *ServiceServers) handler(s *hcServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		local := st.Local.Get(inet.IPv4)
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
			ip, _ := netip.AddrFromSlice(a.IP)
			local = st.Local.Get(inet.FamilyOf(ip.Unmap()))
		}
		healthy := h.cfg.Healthy()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(local))
		if local == 0 || !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		// kube-proxy's body byte for byte: indented with tabs, no newline
		// at the end.
		fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %s,\n\t\t\"name\": %s\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
			jsonString(st.Namespace), jsonString(st.Name), local, healthy)
	})
}

// Ports returns the ports served on at least one address.
func (h *ServiceServers) Ports() []uint16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []uint16
	for p, s := range h.servers {
		if len(s.listeners) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Close stops every server, letting requests under way end while ctx
// lasts.
func (h *ServiceServers) Close(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, s := range h.servers {
		for _, l := range s.listeners {
			l.stop(ctx)
		}
		delete(h.servers, port)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
