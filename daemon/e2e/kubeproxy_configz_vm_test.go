//go:build vmtest

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"
)

// getConfigz reads /configz from a proxy's metrics address, flattened to
// one value per JSON path ("kubeproxy.config.k8s.io.ipvs.scheduler").
func getConfigz(t *testing.T, addr string) map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/configz")
	if err != nil {
		t.Fatalf("GET /configz: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /configz: %s %v: %s", resp.Status, err, body)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/configz: %v: %s", err, body)
	}
	flat := map[string]string{}
	flatten("", doc, flat)
	return flat
}

func flatten(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			out[path] = "{}"
		}
		for k, e := range v {
			flatten(joinPath(path, k), e, out)
		}
	case []any:
		if len(v) == 0 {
			out[path] = "[]"
		}
		for i, e := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	default:
		b, _ := json.Marshal(v)
		out[path] = string(b)
	}
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// configzDiff lists the paths whose values differ between kube-proxy's
// /configz and ipvsplane's from the same configuration file.
func configzDiff(kp, ip map[string]string) []string {
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(kp)) {
		if v, ok := ip[k]; !ok || v != kp[k] {
			diff = append(diff, fmt.Sprintf("%s: kube-proxy %s, ipvsplane %s", k, kp[k], orNone(v, ok)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ip)) {
		if _, ok := kp[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: kube-proxy (none), ipvsplane %s", k, ip[k]))
		}
	}
	return diff
}

func orNone(v string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return v
}
