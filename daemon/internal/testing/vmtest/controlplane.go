package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// controlPlaneMarker is the file by which a package asks for a Kubernetes
// control plane: vmtest runs etcd and kube-apiserver on the host's
// loopback, serves controlplane.Remote's requests (the kubeconfig, API
// server restarts) beside them, and has qemu forward the guest's
// connections to both. Its lines, if any, are extra kube-apiserver
// arguments.
const controlPlaneMarker = "testdata/vmtest-controlplane"

// hostControlPlane is a control plane and its request server for one run.
type hostControlPlane struct {
	cp     *controlplane.ControlPlane
	server *http.Server
	port   int
}

// startControlPlane starts one if the package asks for it; nil otherwise.
func startControlPlane(ctx context.Context) (*hostControlPlane, error) {
	data, err := os.ReadFile(controlPlaneMarker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cfg := &controlplane.Config{ExtraAPIServerArgs: strings.Fields(string(data))}
	ctx, cancel := context.WithTimeout(ctx, controlplane.StartTimeout)
	defer cancel()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = cp.Close()
		return nil, fmt.Errorf("control plane requests: %w", err)
	}
	server := "https://" + guestAddrPort(controlplane.GuestAPIServerPort).String()
	h := &hostControlPlane{cp: cp, server: &http.Server{Handler: cp.Handler(server)}, port: l.Addr().(*net.TCPAddr).Port}
	go func() { _ = h.server.Serve(l) }()
	return h, nil
}

// guestEnv is the variable that tells the guest's test where to ask.
func (h *hostControlPlane) guestEnv() string {
	return controlplane.RemoteEnv + "=http://" + guestAddrPort(controlplane.GuestControlPort).String()
}

// forwards are the guest's only ways out: to the API server and to the
// request server, both on the host's loopback.
func (h *hostControlPlane) forwards() []guestForward {
	return []guestForward{
		{guest: guestAddrPort(controlplane.GuestAPIServerPort), host: "127.0.0.1:" + strconv.Itoa(h.cp.Port())},
		{guest: guestAddrPort(controlplane.GuestControlPort), host: "127.0.0.1:" + strconv.Itoa(h.port)},
	}
}

func guestAddrPort(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(controlplane.GuestForwardAddr), port)
}

func (h *hostControlPlane) close() {
	_ = h.server.Close()
	_ = h.cp.Close()
}
