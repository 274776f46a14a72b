package controlplane

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns a kubeconfig file for programs that take one
// (ipvsplane's daemon, kube-proxy): the admin token, TLS without
// verification, and server as the API server's address. An empty server
// means URL(); a VM guest on qemu's user network reaches the host's
// loopback as 10.0.2.2, so it uses "https://10.0.2.2:" + Port().
func (cp *ControlPlane) Kubeconfig(server string) ([]byte, error) {
	if server == "" {
		server = cp.URL()
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	return b, nil
}
