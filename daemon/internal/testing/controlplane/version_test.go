package controlplane

import (
	"os"
	"regexp"
	"testing"
)

// KubeVersion must name what hack/build-kube builds, or the tests would
// look for programs in a cache directory nothing fills.
func TestKubeVersionMatchesBuildModule(t *testing.T) {
	b, err := os.ReadFile("../../../../hack/kube/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/kube/go.mod requires no k8s.io/kubernetes")
	}
	if got := string(m[1]); got != KubeVersion {
		t.Errorf("hack/kube/go.mod builds %s, KubeVersion is %s", got, KubeVersion)
	}
}
