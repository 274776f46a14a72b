package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// installAddons installs the node's proxy and CoreDNS with kubectl, as an
// operator would, and waits until both are Ready.
func (n *node) installAddons(ctx context.Context) error {
	if n.config.image != "" {
		// Written in every mode: the takeover test applies it over a
		// kube-proxy node.
		var err error
		if n.overlay, err = n.writeOverlay(); err != nil {
			return err
		}
	}
	switch n.config.proxy {
	case "ipvsplane":
		install := n.installIPVSplane
		if n.config.install == "helm" {
			install = n.helmInstall
		}
		if err := install(ctx); err != nil {
			return err
		}
		if err := n.kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/ipvsplane", "--timeout=10m"); err != nil {
			return err
		}
	case "kube-proxy":
		if err := n.apply(ctx, "kube-proxy.yaml", "daemonset/kube-proxy"); err != nil {
			return err
		}
	case "kubeadm":
		if err := n.kubeadmInstall(ctx); err != nil {
			return err
		}
	}
	return n.apply(ctx, "coredns.yaml", "deployment/coredns")
}

// installIPVSplane applies deploy/ through the overlay, as the README
// tells operators to.
func (n *node) installIPVSplane(ctx context.Context) error {
	return n.kubectl(ctx, "apply", "-k", n.overlay)
}

// helmInstall installs the chart with helm, setting what the overlay
// sets: the image, and the API server's name as the node resolves it.
func (n *node) helmInstall(ctx context.Context) error {
	helm, err := controlplane.ToolProgram("helm")
	if err != nil {
		return fmt.Errorf("%w (hack/build-tools helm)", err)
	}
	repo, tag, err := splitImageRef(n.config.imageRef)
	if err != nil {
		return err
	}
	args := []string{"install", "ipvsplane", n.config.chart, "--kubeconfig=" + n.kubeconfig, "--namespace", "kube-system",
		"--set", "image.repository=" + repo, "--set-string", "image.tag=" + tag,
		"--set", "apiServer.host=" + controlplane.ClusterHostName, "--set-string", fmt.Sprintf("apiServer.port=%d", n.cp.Port())}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// kubeadmInstall has the pinned kubeadm upload its configuration
// (kubeadm-config, and kubelet-config, which `kubeadm upgrade` reads too)
// and install its kube-proxy addon, the phases of `kubeadm init` that
// make what the kubeadm docs start from, and waits for kube-proxy's
// rollout. (The nodes' kubelets keep vmtest's own configuration.)
func (n *node) kubeadmInstall(ctx context.Context) error {
	kubeadm, err := controlplane.KubeProgram("kubeadm")
	if err != nil {
		return fmt.Errorf("%w (hack/build-kube kubeadm)", err)
	}
	config, err := n.writeNodeFile("kubeadm.yaml")
	if err != nil {
		return err
	}
	for _, phase := range [][]string{{"upload-config", "kubeadm"}, {"upload-config", "kubelet"}, {"addon", "kube-proxy"}} {
		args := append(append([]string{"init", "phase"}, phase...), "--config="+config, "--kubeconfig="+n.kubeconfig)
		cmd := exec.CommandContext(ctx, kubeadm, args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubeadm %s: %w", strings.Join(args, " "), err)
		}
	}
	return n.kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=10m")
}

// apply applies one of the node's manifests, filled in, and waits for its
// workload's rollout.
func (n *node) apply(ctx context.Context, manifest, workload string) error {
	file, err := n.writeNodeFile(manifest)
	if err != nil {
		return err
	}
	if err := n.kubectl(ctx, "apply", "-f", file); err != nil {
		return err
	}
	return n.kubectl(ctx, "-n", "kube-system", "rollout", "status", workload, "--timeout=10m")
}

// writeNodeFile fills in one of the node's files and writes it to the
// work directory, returning its path.
func (n *node) writeNodeFile(name string) (string, error) {
	data, err := renderNodeFile("node/"+name, map[string]any{
		"ClusterCIDR":   controlplane.ClusterCIDR,
		"ClusterCIDR6":  controlplane.ClusterCIDR6,
		"ServiceCIDR":   controlplane.ServiceCIDR,
		"ServiceCIDR6":  controlplane.ServiceCIDR6,
		"KubeVersion":   controlplane.KubeVersion,
		"APIServerHost": controlplane.ClusterHostAddr,
		"APIServerName": controlplane.ClusterHostName,
		"APIServerPort": n.cp.Port(),
		"NodeName":      nodeName,
		"Nodes":         len(n.vms),
		"KubeProxyMode": n.config.kubeProxyMode,
	})
	if err != nil {
		return "", err
	}
	file := filepath.Join(n.work, name)
	return file, os.WriteFile(file, data, 0o644)
}

// writeOverlay writes a kustomization over deploy/ that sets what an
// operator sets: the image, and the API server's name as the node
// resolves it.
func (n *node) writeOverlay() (string, error) {
	dir := filepath.Join(n.work, "overlay")
	abs, err := filepath.Abs(n.config.deploy)
	if err != nil {
		return "", err
	}
	// kustomize takes only relative paths to the bases.
	deploy, err := filepath.Rel(dir, abs)
	if err != nil {
		return "", err
	}
	k, err := overlayKustomization(deploy, n.config.imageRef, n.cp.Port())
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// overlayKustomization is the overlay's kustomization.yaml: deploy/ at the
// relative path base, the image imageRef (NAME:TAG), and the API server at
// ClusterHostName:apiPort, a name only the node's resolver knows.
func overlayKustomization(base, imageRef string, apiPort int) (string, error) {
	name, tag, err := splitImageRef(imageRef)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/ipvsplane/ipvsplane
  newName: %s
  newTag: %q
patches:
- target: {kind: ConfigMap, name: ipvsplane}
  patch: |-
    - op: add
      path: /data/apiServerHost
      value: %q
    - op: add
      path: /data/apiServerPort
      value: "%d"
`, base, name, tag, controlplane.ClusterHostName, apiPort), nil
}

// splitImageRef splits NAME:TAG; the NAME may hold a registry's port.
func splitImageRef(imageRef string) (name, tag string, err error) {
	slash := strings.LastIndex(imageRef, "/")
	base, tag, ok := strings.Cut(imageRef[slash+1:], ":")
	if !ok || tag == "" {
		return "", "", fmt.Errorf("-image-ref %q has no tag", imageRef)
	}
	return imageRef[:slash+1] + base, tag, nil
}

// kubectl runs kubectl against the cluster, its output on stderr.
func (n *node) kubectl(ctx context.Context, args ...string) error {
	path, err := controlplane.KubeProgram("kubectl")
	if err != nil {
		return fmt.Errorf("%w (hack/build-kube kubectl)", err)
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig=" + n.kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
