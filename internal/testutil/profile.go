package testutil

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
)

// ProfileEnv, set to 1 in a VM benchmark's environment, asks the
// benchmarks that support it for CPU profiles (PrintProfile).
const ProfileEnv = "IPVSPLANE_BENCH_PROFILE"

// PrintProfile writes a profile to stdout in base64 between marker lines,
// which hack/profiles turns back into a file: a VM guest has no other way
// out.
func PrintProfile(name string, data []byte) {
	var b strings.Builder
	fmt.Fprintf(&b, "PROFILE-BEGIN %s\n", name)
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\n")
		enc = enc[76:]
	}
	fmt.Fprintf(&b, "%s\nPROFILE-END %s\n", enc, name)
	os.Stdout.WriteString(b.String())
}

// CPUProfile profiles the process's CPU, when ProfileEnv is 1, until the
// returned function is called, which prints the profile under name.
func CPUProfile(t testing.TB, name string) (stop func()) {
	if os.Getenv(ProfileEnv) != "1" {
		return func() {}
	}
	var profile bytes.Buffer
	if err := pprof.StartCPUProfile(&profile); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		PrintProfile(name, profile.Bytes())
	}
}
