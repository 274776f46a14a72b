package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// A Config.Cluster control plane is dual-stack, IPv4 first: its API server
// allocates cluster IPs from ServiceCIDR and ServiceCIDR6, and its
// controller manager gives each node a /24 of ClusterCIDR and a /64 of
// ClusterCIDR6 for its pods.
const (
	ClusterCIDR  = "10.244.0.0/16"
	ClusterCIDR6 = "fd00:10:244::/56"
	ServiceCIDR6 = "fd00:10:96::/108"
)

// ClusterHostAddr is the address of a Config.Cluster control plane on the
// link to its node: the API server's advertised address, so the
// `kubernetes` Service's endpoint.
const ClusterHostAddr = "10.0.2.2"

// ClusterHostName names ClusterHostAddr in a cluster node's /etc/hosts and
// nowhere else: no DNS server answers for it (.test is reserved), so a
// client that reaches the API server through it resolved it through the
// node, as a proxy must before it has programmed the cluster DNS Service's
// address.
const ClusterHostName = "control-plane.cluster.test"

// startControllers starts kube-controller-manager and kube-scheduler
// against the API server with the admin kubeconfig. Neither is waited
// for: a node becoming Ready and its pods running show them working.
func (cp *ControlPlane) startControllers() error {
	kubeconfig, err := cp.Kubeconfig("")
	if err != nil {
		return err
	}
	kc := filepath.Join(cp.dir, "admin.kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	programs := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--service-account-private-key-file=" + filepath.Join(cp.dir, "sa.key"),
			// Pods find the API server's certificate in the
			// kube-root-ca.crt ConfigMap made from this file.
			"--root-ca-file=" + filepath.Join(cp.dir, servingCertFile),
			"--use-service-account-credentials=false",
			"--allocate-node-cidrs=true",
			"--cluster-cidr=" + ClusterCIDR + "," + ClusterCIDR6,
			"--node-cidr-mask-size-ipv4=24",
			"--node-cidr-mask-size-ipv6=64",
			"--service-cluster-ip-range=" + ServiceCIDR + "," + ServiceCIDR6,
			"--secure-port=" + strconv.Itoa(ports[0]),
		}},
		{"kube-scheduler", []string{"--secure-port=" + strconv.Itoa(ports[1])}},
	}
	for _, prog := range programs {
		path, err := KubeProgram(prog.name)
		if err != nil {
			return err
		}
		args := append([]string{"--kubeconfig=" + kc, "--leader-elect=false", "--bind-address=127.0.0.1"}, prog.args...)
		p, err := startProcess(cp.dir, prog.name, path, args...)
		if err != nil {
			return err
		}
		cp.cluster = append(cp.cluster, p)
	}
	return nil
}
