package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"go.uber.org/zap"
)

// hcServers serves the health-check node ports of load-balancer services
// with externalTrafficPolicy Local, as kube-proxy does: an HTTP server on
// each port answers with the number of the service's endpoints on this
// node, 200 when there are some and 503 when there are none, so the cloud
// load balancer sends traffic only to nodes that can take it.
type hcServers struct {
	log     *zap.Logger
	node    string
	healthy func() bool
	// listen opens a port's listener; tests listen elsewhere.
	listen func(port uint16) (net.Listener, error)

	mu      sync.Mutex
	servers map[uint16]*hcServer
}

type hcServer struct {
	srv   *http.Server
	state atomic.Pointer[hcState]
}

// hcState is what a health-check port reports.
type hcState struct {
	Namespace, Name string
	Local           int
}

func newHCServers(log *zap.Logger, node string, healthy func() bool) *hcServers {
	return &hcServers{log: log, node: node, healthy: healthy, servers: map[uint16]*hcServer{},
		listen: func(port uint16) (net.Listener, error) {
			return net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
		}}
}

// localEndpoints works out each health-check port's service and its ready
// endpoints on this node.
func localEndpoints(node string, services []dataplane.ServicePort) map[uint16]hcState {
	out := map[uint16]hcState{}
	seen := map[uint16]map[netip.Addr]bool{}
	for i := range services {
		sp := &services[i]
		if sp.ExternalPolicy != dataplane.PolicyLocal || sp.HealthCheckNodePort == 0 {
			continue
		}
		port := sp.HealthCheckNodePort
		st := out[port]
		st.Namespace, st.Name = sp.Name.Namespace, sp.Name.Name
		if seen[port] == nil {
			seen[port] = map[netip.Addr]bool{}
		}
		for _, ep := range sp.Endpoints {
			if ep.Ready && ep.NodeName == node && !seen[port][ep.Addr] {
				seen[port][ep.Addr] = true
				st.Local++
			}
		}
		out[port] = st
	}
	return out
}

// update opens, updates and closes the servers to match services. A port
// that cannot be opened is logged and tried again on the next update.
func (h *hcServers) update(services []dataplane.ServicePort) {
	want := localEndpoints(h.node, services)
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, s := range h.servers {
		if _, ok := want[port]; !ok {
			s.srv.Close()
			delete(h.servers, port)
		}
	}
	for port, st := range want {
		s := h.servers[port]
		if s == nil {
			ln, err := h.listen(port)
			if err != nil {
				h.log.Error("cannot serve a health-check node port", zap.Uint16("port", port),
					zap.String("service", st.Namespace+"/"+st.Name), zap.Error(err))
				continue
			}
			s = &hcServer{}
			s.srv = &http.Server{Handler: h.handler(s), ReadHeaderTimeout: 10 * time.Second}
			h.servers[port] = s
			go func() {
				if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
					h.log.Error("health-check node port stopped", zap.Uint16("port", port), zap.Error(err))
				}
			}()
		}
		s.state.Store(&st)
	}
}

func (h *hcServers) handler(s *hcServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := s.state.Load()
		healthy := h.healthy()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(st.Local))
		if st.Local == 0 || !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, `{"service":{"namespace":%s,"name":%s},"localEndpoints":%d,"serviceProxyHealthy":%v}`,
			jsonString(st.Namespace), jsonString(st.Name), st.Local, healthy)
	})
}

// ports returns the ports served, for tests and the log.
func (h *hcServers) ports() []uint16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []uint16
	for p := range h.servers {
		out = append(out, p)
	}
	return out
}

// close stops every server.
func (h *hcServers) close(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, s := range h.servers {
		s.srv.Shutdown(ctx)
		delete(h.servers, port)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
