package controlplane

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns a kubeconfig file for programs that take one
// (ipvsplane's daemon, kube-proxy): the admin token, the API server's
// certificate as the only authority, and server as the API server's
// address. An empty server means URL(); a VM guest reaches the API server
// through daemon/internal/testing/vmtest's forward, so its server is
// https://GuestForwardAddr:GuestAPIServerPort (the certificate covers both).
func (cp *ControlPlane) Kubeconfig(server string) ([]byte, error) {
	if server == "" {
		server = cp.URL()
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	return b, nil
}
