package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// RemoteEnv names the environment variable through which daemon/internal/testing/vmtest tells
// a test binary in its VM guest where the host's control plane takes
// requests: http://GuestForwardAddr:GuestControlPort.
const RemoteEnv = "IPVSPLANE_VMTEST_CONTROL"

// A VM guest of daemon/internal/testing/vmtest reaches the host's control plane only through
// qemu's forwards, at GuestForwardAddr in its user network: the API server
// at GuestAPIServerPort and the request server ([ControlPlane.Handler]) at
// GuestControlPort. qemu drops everything else the guest sends out
// (restrict=on): the host's loopback at 10.0.2.2, and every other address,
// are out of its reach.
const (
	GuestForwardAddr          = "10.0.2.100"
	GuestAPIServerPort uint16 = 6443
	GuestControlPort   uint16 = 80
)

// HostTargetsEnv names the environment variable through which daemon/internal/testing/vmtest
// tells a networked guest's tests the host addresses where it listens for
// TCP connections and echoes UDP datagrams (host:port, separated by
// commas): the host's loopback as the guest's gateway 10.0.2.2 would reach
// it, and the host's own addresses. A test shows the guest reaches none.
const HostTargetsEnv = "IPVSPLANE_VMTEST_HOST_TARGETS"

// Handler serves the control requests a [Remote] makes: the kubeconfig for
// a client at server, and stopping, killing and starting the API server.
// daemon/internal/testing/vmtest serves it on the host's loopback for its guest.
func (cp *ControlPlane) Handler(server string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kubeconfig", func(w http.ResponseWriter, r *http.Request) {
		b, err := cp.Kubeconfig(server)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /logs", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("lines"))
		if err != nil || n <= 0 {
			n = 50
		}
		_, _ = io.WriteString(w, cp.Logs(n))
	})
	mux.HandleFunc("POST /apiserver/stop", func(w http.ResponseWriter, r *http.Request) { cp.StopAPIServer() })
	mux.HandleFunc("POST /apiserver/kill", func(w http.ResponseWriter, r *http.Request) { cp.KillAPIServer() })
	mux.HandleFunc("POST /apiserver/start", func(w http.ResponseWriter, r *http.Request) {
		if err := cp.StartAPIServer(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("POST /namespaces/{namespace}/stored-services", func(w http.ResponseWriter, r *http.Request) {
		var svcs []v1.Service
		if err := json.NewDecoder(r.Body).Decode(&svcs); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := cp.StoreServices(r.Context(), r.PathValue("namespace"), svcs); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("DELETE /namespaces/{namespace}/stored/{resource}", func(w http.ResponseWriter, r *http.Request) {
		if err := cp.DeleteStored(r.Context(), r.PathValue("resource"), r.PathValue("namespace")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	return mux
}

// Remote is a control plane this process does not run: the one
// daemon/internal/testing/vmtest starts on the host for a test binary in its VM guest, reached
// through qemu's forwards. Its methods mirror ControlPlane's.
type Remote struct {
	control    string
	kubeconfig []byte
	rest       *rest.Config
}

// FromVM returns the control plane daemon/internal/testing/vmtest runs for this test binary
// (a package asks for one with a testdata/vmtest-controlplane file). Outside
// such a guest the test is skipped, or fails under CI=true.
func FromVM(t testing.TB) *Remote {
	t.Helper()
	control := os.Getenv(RemoteEnv)
	testutil.Require(t, control != "", "a control plane from daemon/internal/testing/vmtest (testdata/vmtest-controlplane in a VM test)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := DialRemote(ctx, control)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// DialRemote fetches the kubeconfig of the control plane whose Handler
// serves at control.
func DialRemote(ctx context.Context, control string) (*Remote, error) {
	r := &Remote{control: strings.TrimSuffix(control, "/")}
	b, err := r.call(ctx, http.MethodGet, "/kubeconfig", nil)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig from %s: %w", control, err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	r.kubeconfig, r.rest = b, cfg
	return r, nil
}

// Kubeconfig returns a kubeconfig for programs that take one.
func (r *Remote) Kubeconfig() []byte { return r.kubeconfig }

// RESTConfig returns a new client configuration for the API server.
func (r *Remote) RESTConfig() *rest.Config { return rest.CopyConfig(r.rest) }

// StopAPIServer stops the API server gracefully (see ControlPlane.StopAPIServer).
func (r *Remote) StopAPIServer(ctx context.Context) error {
	_, err := r.call(ctx, http.MethodPost, "/apiserver/stop", nil)
	return err
}

// KillAPIServer ends the API server as a crash would.
func (r *Remote) KillAPIServer(ctx context.Context) error {
	_, err := r.call(ctx, http.MethodPost, "/apiserver/kill", nil)
	return err
}

// StartAPIServer starts the API server again and waits until it is ready.
func (r *Remote) StartAPIServer(ctx context.Context) error {
	_, err := r.call(ctx, http.MethodPost, "/apiserver/start", nil)
	return err
}

// StoreServices writes services straight into etcd (see
// ControlPlane.StoreServices).
func (r *Remote) StoreServices(ctx context.Context, namespace string, svcs []v1.Service) error {
	body, err := json.Marshal(svcs)
	if err != nil {
		return err
	}
	_, err = r.call(ctx, http.MethodPost, "/namespaces/"+namespace+"/stored-services", body)
	return err
}

// DeleteStored deletes every object of resource in namespace from etcd
// (see ControlPlane.DeleteStored).
func (r *Remote) DeleteStored(ctx context.Context, resource, namespace string) error {
	_, err := r.call(ctx, http.MethodDelete, "/namespaces/"+namespace+"/stored/"+resource, nil)
	return err
}

// Logs returns the last n lines of the API server's and etcd's logs.
func (r *Remote) Logs(ctx context.Context, n int) string {
	b, err := r.call(ctx, http.MethodGet, "/logs?lines="+strconv.Itoa(n), nil)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// call makes a request of the control plane, with body when not nil.
func (r *Remote) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	answer, err := exchange(ctx, method, r.control+path, "", body)
	if err != nil {
		return nil, fmt.Errorf("control plane: %s %s: %w", method, path, err)
	}
	return answer, nil
}

// exchange makes one HTTP request and returns the answer's body; an
// answer other than 200 OK is an error carrying its status and body.
func exchange(ctx context.Context, method, url, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %w", strings.TrimSpace(string(answer)), errors.New(resp.Status))
	}
	return answer, nil
}
