package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/httpserver"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func localService(name string, hc uint16, eps ...model.Endpoint) model.ServicePort {
	return model.ServicePort{
		Name: model.ServicePortName{Namespace: "demo", Name: name, Port: "http"}, Protocol: inet.TCP, Port: 80,
		ClusterIPs:     []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		ExternalPolicy: model.PolicyLocal, HealthCheckNodePort: hc, Endpoints: eps,
	}
}

func endpoint(addr, node string, ready bool) model.Endpoint {
	return model.Endpoint{Addr: netip.MustParseAddr(addr), Port: 8080, NodeName: node, Ready: ready, Serving: ready}
}

// A health-check port counts the distinct ready endpoints on this node
// over its service's ports, whether the ports come whole or as changes.
func TestLocalEndpoints(t *testing.T) {
	web := localService("web", 32000, endpoint("10.0.0.1", "node-a", true), endpoint("10.0.0.2", "node-b", true), endpoint("10.0.0.3", "node-a", false))
	web2 := web
	web2.Name.Port = "https"
	web2.Endpoints = append(slices.Clone(web2.Endpoints), endpoint("10.0.0.4", "node-a", true))
	none := localService("none", 32001, endpoint("10.0.0.5", "node-b", true))
	cluster := localService("cluster", 32002, endpoint("10.0.0.6", "node-a", true))
	cluster.ExternalPolicy = model.PolicyCluster
	states := func(h *ServiceServers) map[uint16]hcState {
		h.mu.Lock()
		defer h.mu.Unlock()
		out := map[uint16]hcState{}
		for port := range h.byPort {
			out[port], _ = h.stateLocked(port)
		}
		return out
	}
	newServers := func() *ServiceServers {
		h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
		h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
		h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
		t.Cleanup(func() { h.Close(context.Background()) })
		return h
	}
	want := map[uint16]hcState{32000: {"demo", "web", inet.PerFamily[int]{2, 0}, inet.PerFamily[bool]{true, false}}, 32001: {"demo", "none", inet.PerFamily[int]{}, inet.PerFamily[bool]{true, false}}}

	whole := newServers()
	whole.Replace([]model.ServicePort{web, web2, none, cluster})
	if got := states(whole); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replace: got %v, want %v", got, want)
	}
	changes := newServers()
	changes.Apply([]model.Change{{Name: web.Name, Port: &web}, {Name: none.Name, Port: &none}})
	changes.Apply([]model.Change{{Name: web2.Name, Port: &web2}, {Name: cluster.Name, Port: &cluster}})
	if got := states(changes); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("apply: got %v, want %v", got, want)
	}
	changes.Apply([]model.Change{{Name: web2.Name}, {Name: none.Name}})
	if got, want := states(changes), map[uint16]hcState{32000: {"demo", "web", inet.PerFamily[int]{1, 0}, inet.PerFamily[bool]{true, false}}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after removals: got %v, want %v", got, want)
	}
	if got := changes.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("ports after removals: %v", got)
	}
}

// The servers answer like kube-proxy's: 200 with local endpoints, 503
// without; ports come and go with the services.
func TestHealthCheckNodePorts(t *testing.T) {
	addrs := map[uint16]string{}
	healthy := true
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return healthy }})
	h.cfg.Listen = func(a netip.AddrPort) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			addrs[a.Port()] = ln.Addr().String()
		}
		return ln, err
	}
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	defer h.Close(context.Background())
	get := func(port uint16) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get("http://" + addrs[port] + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return resp.StatusCode, v
	}

	h.Replace([]model.ServicePort{
		localService("web", 32000, endpoint("10.0.0.1", "node-a", true)),
		localService("none", 32001, endpoint("10.0.0.2", "node-b", true)),
	})
	if code, v := get(32000); code != 200 || v["localEndpoints"] != 1.0 || v["serviceProxyHealthy"] != true {
		t.Errorf("web: %d %v", code, v)
	}
	if code, v := get(32001); code != 503 || v["localEndpoints"] != 0.0 {
		t.Errorf("none: %d %v", code, v)
	}
	healthy = false
	if code, _ := get(32000); code != 503 {
		t.Errorf("web with the proxy unhealthy: %d", code)
	}
	healthy = true
	h.Replace([]model.ServicePort{localService("web", 32000)})
	if code, _ := get(32000); code != 503 {
		t.Errorf("web without endpoints: %d", code)
	}
	if got := h.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("ports after 32001 went: %v", got)
	}
	if _, err := http.Get("http://" + addrs[32001] + "/"); err == nil {
		t.Error("port 32001 still answers")
	}
}

// Like kube-proxy's health-check server per family, a port counts the
// endpoints of the family the request came in on (issue 15 §1.12): a
// dual-stack pod is one endpoint, not two.
func TestHealthCheckNodePortPerFamily(t *testing.T) {
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()})
	defer h.Close(context.Background())
	h.Replace([]model.ServicePort{localService("web", 32000,
		endpoint("10.0.0.1", "node-a", true), endpoint("fd00::1", "node-a", true), endpoint("fd00::2", "node-b", true))})
	for _, tt := range []struct {
		local string
		want  float64
	}{{"192.0.2.1", 1}, {"::ffff:192.0.2.1", 1}, {"2001:db8::1", 1}} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
			net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tt.local), 32000))))
		rec := httptest.NewRecorder()
		h.mu.Lock()
		srv := h.servers[32000]
		h.mu.Unlock()
		h.handler(srv).ServeHTTP(rec, req)
		var v map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		if rec.Code != 200 || v["localEndpoints"] != tt.want || rec.Header().Get("X-Load-Balancing-Endpoint-Weight") != "1" {
			t.Errorf("request to %s: %d %v, want 200 and %v local endpoints", tt.local, rec.Code, v, tt.want)
		}
	}
}

// The answer's body is kube-proxy's byte for byte: its JSON indented with
// tabs, no newline at the end; and so are its headers.
func TestHealthCheckNodePortBody(t *testing.T) {
	healthy := true
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return healthy }})
	h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	defer h.Close(context.Background())
	h.Replace([]model.ServicePort{localService("web", 32000, endpoint("10.0.0.1", "node-a", true), endpoint("10.0.0.2", "node-a", true))})
	h.mu.Lock()
	srv := h.servers[32000]
	h.mu.Unlock()
	for _, tt := range []struct {
		healthy bool
		code    int
		body    string
	}{
		{true, 200, "{\n\t\"service\": {\n\t\t\"namespace\": \"demo\",\n\t\t\"name\": \"web\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"},
		{false, 503, "{\n\t\"service\": {\n\t\t\"namespace\": \"demo\",\n\t\t\"name\": \"web\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": false\n}"},
	} {
		healthy = tt.healthy
		rec := httptest.NewRecorder()
		h.handler(srv).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != tt.code || rec.Body.String() != tt.body {
			t.Errorf("healthy %v: %d %q, want %d %q", tt.healthy, rec.Code, rec.Body, tt.code, tt.body)
		}
		want := http.Header{"Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}, "X-Load-Balancing-Endpoint-Weight": {"2"}}
		if diff := cmp.Diff(want, rec.Header()); diff != "" {
			t.Errorf("healthy %v: headers (-want +got):\n%s", tt.healthy, diff)
		}
	}
}

// A port that cannot be opened is tried again at the next update, even
// one that does not change its service.
func TestHealthCheckNodePortRetried(t *testing.T) {
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	busy := true
	h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) {
		if busy {
			return nil, errors.New("address already in use")
		}
		return net.Listen("tcp", "127.0.0.1:0")
	}
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	defer h.Close(context.Background())
	web := localService("web", 32000, endpoint("10.0.0.1", "node-a", true))
	h.Apply([]model.Change{{Name: web.Name, Port: &web}})
	if got := h.Ports(); len(got) != 0 {
		t.Fatalf("ports while busy: %v", got)
	}
	busy = false
	h.Apply(nil)
	if got := h.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("ports after the retry: %v", got)
	}
}

// When the node's health-check addresses change, every port keeps its
// listeners on the addresses still wanted, closes the others and opens
// the new ones; each listener answers on its own socket.
func TestHealthCheckNodePortRelisten(t *testing.T) {
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	// The real sockets are on loopback addresses, on ports the kernel
	// picks; actual maps what was asked for to where it listens.
	actual := map[netip.AddrPort]string{}
	opened := 0
	h.cfg.Listen = func(a netip.AddrPort) (net.Listener, error) {
		ln, err := listenFamily(netip.AddrPortFrom(a.Addr(), 0))
		if err == nil {
			actual[a] = ln.Addr().String()
			opened++
		}
		return ln, err
	}
	defer h.Close(context.Background())
	one, two := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	h.SetAddresses([]netip.Addr{one})
	h.Replace([]model.ServicePort{
		localService("web", 32000, endpoint("10.0.0.1", "node-a", true)),
		localService("api", 32001, endpoint("10.0.0.2", "node-a", true)),
	})
	answers := func(a netip.Addr, port uint16) bool {
		t.Helper()
		resp, err := http.Get("http://" + actual[netip.AddrPortFrom(a, port)] + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if opened != 2 || !answers(one, 32000) || !answers(one, 32001) {
		t.Fatalf("on %v: %d listeners opened, %v", one, opened, actual)
	}

	h.SetAddresses([]netip.Addr{one, two})
	if opened != 4 || !answers(one, 32000) || !answers(two, 32000) || !answers(two, 32001) {
		t.Errorf("adding %v: %d listeners opened in all, want 4 (those on %v kept): %v", two, opened, one, actual)
	}
	h.SetAddresses([]netip.Addr{two})
	if opened != 4 || answers(one, 32000) || answers(one, 32001) || !answers(two, 32000) || !answers(two, 32001) {
		t.Errorf("leaving %v: %d listeners opened in all, want 4, and %v closed: %v", one, opened, one, actual)
	}
	h.SetAddresses(nil)
	if got := h.Ports(); len(got) != 0 || answers(two, 32000) {
		t.Errorf("without addresses: ports %v still listening", got)
	}
}

// A health-check port listens only in its service's families, as
// kube-proxy's proxier of each family serves only its family's services.
func TestHealthCheckPortFamilies(t *testing.T) {
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	listening := map[uint16][]string{}
	h.cfg.Listen = func(a netip.AddrPort) (net.Listener, error) {
		listening[a.Port()] = append(listening[a.Port()], a.Addr().String())
		return net.Listen("tcp", "127.0.0.1:0")
	}
	defer h.Close(context.Background())
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()})
	v4 := localService("v4", 32000)
	v6 := localService("v6", 32001)
	v6.ClusterIPs = []netip.Addr{netip.MustParseAddr("fd00:10:96::10")}
	dual := localService("dual", 32002)
	dual.ClusterIPs = append(dual.ClusterIPs, netip.MustParseAddr("fd00:10:96::11"))
	h.Replace([]model.ServicePort{v4, v6, dual})
	want := map[uint16][]string{32000: {"0.0.0.0"}, 32001: {"::"}, 32002: {"0.0.0.0", "::"}}
	if fmt.Sprint(listening) != fmt.Sprint(want) {
		t.Errorf("listening on %v, want %v", listening, want)
	}
}

// An IPv6 listener is IPv6-only, as kube-proxy's tcp6 server: on [::] it
// leaves IPv4 to the 0.0.0.0 listener of the same port.
func TestListenFamily(t *testing.T) {
	ln, err := listenFamily(netip.MustParseAddrPort("[::1]:0"))
	if err != nil {
		t.Fatalf("IPv6 loopback: %v", err)
	}
	defer ln.Close()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v6only int
	var optErr error
	if err := raw.Control(func(fd uintptr) {
		v6only, optErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_V6ONLY)
	}); err != nil || optErr != nil {
		t.Fatal(err, optErr)
	}
	if v6only != 1 {
		t.Errorf("IPV6_V6ONLY is %d, want 1", v6only)
	}
	ln4, err := listenFamily(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	if a := ln4.Addr().(*net.TCPAddr); a.IP.To4() == nil {
		t.Errorf("IPv4 listener on %v", a)
	}
}

// reasons records the reasons of the Events it is given.
type reasons []string

func (r *reasons) Eventf(_ v1.ObjectReference, _, reason, _, _ string, _ ...any) {
	*r = append(*r, reason)
}

func (r *reasons) Shared(_ string, _ v1.ObjectReference, _, reason, _, _ string) {
	*r = append(*r, reason)
}

// A health-check node port that cannot open is recorded once on its
// Service, not at every retry.
func TestHealthCheckPortEvent(t *testing.T) {
	var got reasons
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }, Events: &got,
		Listen: func(netip.AddrPort) (net.Listener, error) { return nil, errors.New("address already in use") }})
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	ports := []model.ServicePort{localService("lb", 32000)}
	h.Replace(ports)
	h.Replace(ports)
	if len(got) != 1 || got[0] != "FailedToStartServiceHealthcheck" {
		t.Errorf("events %v, want one FailedToStartServiceHealthcheck", got)
	}
}

// BenchmarkManyLocalEndpoints measures a change to a service port with
// 40,000 ready endpoints on this node.
func BenchmarkManyLocalEndpoints(b *testing.B) {
	var eps []model.Endpoint
	for i := range 40000 {
		eps = append(eps, endpoint(fmt.Sprintf("10.1.%d.%d", i/256, i%256), "node-a", true))
	}
	web := localService("web", 32000, eps...)
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	b.Cleanup(func() { h.Close(context.Background()) })
	b.ReportAllocs()
	for b.Loop() {
		h.Apply([]model.Change{{Name: web.Name, Port: &web}})
	}
}

// A health-check port, which anyone reaching the node reaches, bounds
// what a client costs: headers past httpserver.MaxHeaderBytes are
// refused, and past httpserver.MaxConnections open connections the next
// waits until one closes.
func TestHealthCheckNodePortBounds(t *testing.T) {
	var addr string
	h := NewServiceServers(ServiceConfig{Log: zap.NewNop(), Node: "node-a", Healthy: func() bool { return true }})
	h.cfg.Listen = func(netip.AddrPort) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			addr = ln.Addr().String()
		}
		return ln, err
	}
	h.SetAddresses([]netip.Addr{netip.IPv4Unspecified()})
	defer h.Close(context.Background())
	h.Replace([]model.ServicePort{localService("web", 32000, endpoint("10.0.0.1", "node-a", true))})

	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("X-Filler", strings.Repeat("x", 2*httpserver.MaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a request with %d bytes of headers: %d", 2*httpserver.MaxHeaderBytes, resp.StatusCode)
	}

	var idle []net.Conn
	for range httpserver.MaxConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	answered := make(chan int, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("answered %d past %d open connections", code, httpserver.MaxConnections)
	case <-time.After(300 * time.Millisecond):
	}
	idle[0].Close()
	select {
	case code := <-answered:
		if code != http.StatusOK {
			t.Errorf("once a connection closed: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not answered after a connection closed")
	}
}
