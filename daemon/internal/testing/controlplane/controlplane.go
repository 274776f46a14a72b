package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// ServiceCIDR is the range the API server allocates cluster IPs from:
// kubeadm's default, which holds the 100,000-service benchmark.
const ServiceCIDR = "10.96.0.0/12"

// Config is optional; a nil *Config starts the default control plane.
type Config struct {
	// ExtraAPIServerArgs are appended to the API server's arguments
	// (later flags win), e.g. "--feature-gates=...".
	ExtraAPIServerArgs []string
	// Cluster makes it a real cluster's control plane, for the node
	// that hack/vmtest -node boots: kube-controller-manager (pod CIDRs
	// from ClusterCIDR, EndpointSlices, service accounts) and
	// kube-scheduler run too, the ServiceAccount admission plugin is on,
	// and the API server listens on every address of its network
	// namespace and advertises ClusterHostAddr, where the node reaches
	// it. Run it in a network namespace of its own whose only link leads
	// to the node (vmtest -node makes one): nothing else can reach it.
	Cluster bool
}

// ControlPlane is a running etcd and kube-apiserver on loopback. Make one
// with [Start], [New] or a [Shared]; Close stops both.
type ControlPlane struct {
	dir       string
	token     string
	caPEM     []byte // the API server's certificate, its clients' only root
	etcdURL   string
	apiPort   int
	apiPath   string
	apiArgs   []string
	etcd      *process
	cluster   []*process // kube-controller-manager and kube-scheduler, with Config.Cluster
	mu        sync.Mutex
	apiServer *process // nil while stopped
}

// Start starts etcd and the API server (found with [EtcdProgram] and
// [KubeProgram]) and waits until the API server is
// ready (its /readyz passes) or ctx is done. On error nothing is left
// running.
func Start(ctx context.Context, cfg *Config) (_ *ControlPlane, err error) {
	if cfg == nil {
		cfg = &Config{}
	}
	etcdPath, err := EtcdProgram()
	if err != nil {
		return nil, err
	}
	apiPath, err := KubeProgram("kube-apiserver")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ipvsplane-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	cp := &ControlPlane{dir: dir, apiPath: apiPath}
	defer func() {
		if err != nil {
			cp.Close()
		}
	}()
	if err := cp.writeFiles(); err != nil {
		return nil, err
	}
	if cp.caPEM, err = writeServingCert(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if err := cp.startEtcd(ctx, etcdPath, ports[0], ports[1]); err != nil {
		return nil, err
	}
	cp.apiPort = ports[2]
	cp.apiArgs = append(cp.apiServerArgs(cfg.Cluster), cfg.ExtraAPIServerArgs...)
	if err := cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if cfg.Cluster {
		if err := cp.startControllers(); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// writeFiles writes the token file and the service-account signing key
// the API server requires.
func (cp *ControlPlane) writeFiles() error {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("control plane: token: %w", err)
	}
	cp.token = hex.EncodeToString(tok)
	// token,user,uid,"groups": system:masters passes every authorizer.
	line := cp.token + `,admin,admin,"system:masters"` + "\n"
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(line), 0o600); err != nil {
		return fmt.Errorf("control plane: token file: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("control plane: service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("control plane: service-account key: %w", err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(cp.dir, "sa.key"), pemKey, 0o600); err != nil {
		return fmt.Errorf("control plane: service-account key: %w", err)
	}
	return nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, path string, clientPort, peerPort int) error {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := startProcess(cp.dir, "etcd", path,
		"--name=test",
		"--data-dir="+filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=test="+peer,
		// A test's data need not survive a power cut.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return err
	}
	cp.etcd = p
	cp.etcdURL = client
	return waitReady(ctx, p, client+"/health", "", nil)
}

func (cp *ControlPlane) apiServerArgs(cluster bool) []string {
	if cluster {
		return append(cp.commonAPIServerArgs(),
			"--bind-address=0.0.0.0",
			// The `kubernetes` Service's endpoint: where the node and
			// its pods reach this API server.
			"--advertise-address="+ClusterHostAddr,
			// Proxies run privileged, as kubeadm's clusters allow.
			"--allow-privileged=true",
			"--kubelet-preferred-address-types=InternalIP",
			"--service-cluster-ip-range="+ServiceCIDR+","+ServiceCIDR6)
	}
	return append(cp.commonAPIServerArgs(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--service-cluster-ip-range="+ServiceCIDR,
		// No controller manager runs: the ServiceAccount plugin would
		// wait for service accounts that nothing creates.
		"--disable-admission-plugins=ServiceAccount",
		// The built-in "kubernetes" Service would get a loopback
		// endpoint, which validation rejects.
		"--endpoint-reconciler-type=none")
}

func (cp *ControlPlane) commonAPIServerArgs() []string {
	return []string{
		"--etcd-servers=" + cp.etcdURL,
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--tls-cert-file=" + filepath.Join(cp.dir, servingCertFile),
		"--tls-private-key-file=" + filepath.Join(cp.dir, servingKeyFile),
		"--token-auth-file=" + filepath.Join(cp.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(cp.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(cp.dir, "sa.key"),
		"--profiling=false",
	}
}

// StartAPIServer starts the API server (again, after StopAPIServer) on the
// same address with the same etcd, and waits until it is ready. It is an
// error if it is running.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiServer != nil {
		return errors.New("control plane: kube-apiserver is already running")
	}
	p, err := startProcess(cp.dir, "kube-apiserver", cp.apiPath, cp.apiArgs...)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, p, cp.URL()+"/readyz", cp.token, cp.caPEM); err != nil {
		p.stop(5 * time.Second)
		return err
	}
	cp.apiServer = p
	return nil
}

// StopAPIServer stops the API server gracefully: SIGTERM, and SIGKILL if
// it has not exited within 30 s (it drains open watches first, which can
// take that long). etcd keeps running and its data stays; clients see
// connections refused until StartAPIServer.
func (cp *ControlPlane) StopAPIServer() { cp.stopAPIServer(30 * time.Second) }

// KillAPIServer ends the API server with SIGKILL, as a crash would: open
// connections break without a goodbye. Otherwise as StopAPIServer.
func (cp *ControlPlane) KillAPIServer() { cp.stopAPIServer(0) }

func (cp *ControlPlane) stopAPIServer(grace time.Duration) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiServer != nil {
		cp.apiServer.stop(grace)
		cp.apiServer = nil
	}
}

// URL is the API server's address, https://127.0.0.1:<port>.
func (cp *ControlPlane) URL() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.apiPort)
}

// Port is the API server's port on 127.0.0.1.
func (cp *ControlPlane) Port() int { return cp.apiPort }

// RESTConfig returns a new client configuration for the API server: the
// admin bearer token, and TLS trusting the server's own self-signed
// certificate only.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.URL(),
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM},
		// Tests create objects in bursts; client-go's default 5 qps
		// would pace them.
		QPS:   1000,
		Burst: 1000,
	}
}

// Logs returns the last n lines of the API server's and etcd's logs, for a
// failing test to show.
func (cp *ControlPlane) Logs(n int) string {
	s := "kube-apiserver:\n"
	cp.mu.Lock()
	if cp.apiServer != nil {
		s += cp.apiServer.tail(n)
	} else {
		s += "(stopped)"
	}
	cp.mu.Unlock()
	if cp.etcd != nil {
		s += "\netcd:\n" + cp.etcd.tail(n)
	}
	return s
}

// Close stops the controllers, kills the API server (nothing it holds
// matters any more), stops etcd and removes their files.
func (cp *ControlPlane) Close() error {
	for _, p := range cp.cluster {
		p.stop(5 * time.Second)
	}
	cp.KillAPIServer()
	if cp.etcd != nil {
		cp.etcd.stop(10 * time.Second)
	}
	return os.RemoveAll(cp.dir)
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago; they are held open together so that none repeats.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("control plane: free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
