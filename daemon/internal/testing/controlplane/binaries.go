package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// KubeVersion is the Kubernetes release hack/build-kube builds; a unit test
// keeps it equal to the version hack/kube/go.mod pins.
const KubeVersion = "v1.37.2"

// errNoProgram is wrapped by the lookups when a program is missing.
var errNoProgram = errors.New("program not found")

// CacheBase returns where the hack/ scripts keep what they fetch and
// build, outside git: $IPVSPLANE_CACHE, by default ~/.cache/ipvsplane (or
// $XDG_CACHE_HOME/ipvsplane).
func CacheBase() (string, error) {
	if base := os.Getenv("IPVSPLANE_CACHE"); base != "" {
		return base, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	return filepath.Join(c, "ipvsplane"), nil
}

// CacheDir returns the directory hack/build-kube writes KubeVersion's
// programs into: CacheBase()/kube/<version>.
func CacheDir() (string, error) {
	base, err := CacheBase()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "kube", KubeVersion), nil
}

// KubeProgram returns the path of a program hack/build-kube builds
// ("kube-apiserver", "kube-proxy", "etcd"): from the cache, else from
// PATH.
func KubeProgram(name string) (string, error) {
	if dir, err := CacheDir(); err == nil {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s %s (build it with hack/build-kube): %w", name, KubeVersion, errNoProgram)
}

// ToolProgram returns the path of a program hack/build-tools builds
// ("promtool", "helm"): from the cache (CacheBase()/tools), else from
// PATH.
func ToolProgram(name string) (string, error) {
	if base, err := CacheBase(); err == nil {
		p := filepath.Join(base, "tools", name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s (build it with hack/build-tools %s): %w", name, name, errNoProgram)
}

// EtcdProgram returns the path of the etcd hack/build-kube builds (the
// version k8s.io/kubernetes requires): from the cache, else from PATH.
func EtcdProgram() (string, error) { return KubeProgram("etcd") }
