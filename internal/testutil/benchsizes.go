package testutil

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchServicesEnv names the sizes a benchmark runs at, in services,
// comma-separated; make bench sets it from BENCH_SERVICES, and
// daemon/internal/testing/vmtest passes it into the guest.
const BenchServicesEnv = "IPVSPLANE_BENCH_SERVICES"

// BenchSizes returns the sizes BenchServicesEnv lists, in increasing
// order, or else defaults; each at most max.
func BenchSizes(t testing.TB, max int, defaults ...int) []int {
	t.Helper()
	v := os.Getenv(BenchServicesEnv)
	if v == "" {
		return defaults
	}
	var sizes []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > max {
			t.Fatalf("%s=%q: %q is not a number of services from 1 to %d", BenchServicesEnv, v, f, max)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}
