package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The archive is an OCI image layout that names the image once per
// reference, whose blobs match their digests, and whose one layer holds
// the added files, the directories and links asked for and the default
// /etc files unless an -add gave them.
func TestBuildLayout(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passwd, []byte("root:x:0:0::/:/bin/sh\nme:x:1000:1000::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, uncompressed := range []bool{false, true} {
		out := filepath.Join(dir, "image.tar")
		s := spec{
			out:  out,
			refs: []string{"example.test/a:v1", "example.test/b:v2"},
			adds: []string{prog + "=/usr/bin/prog", passwd + "=/etc/passwd"},
			dirs: []string{"/uploads"}, symlinks: []string{"/prog2=usr/bin/prog"},
			entrypoint: "/usr/bin/prog", args: []string{"pause"}, user: "1000",
			uncompressed: uncompressed,
		}
		if err := build(s); err != nil {
			t.Fatal(err)
		}
		blobs, index := readLayout(t, out)
		var idx struct {
			Manifests []struct {
				Digest      string
				Annotations map[string]string
			}
		}
		if err := json.Unmarshal(index, &idx); err != nil {
			t.Fatal(err)
		}
		if len(idx.Manifests) != 2 || idx.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/a:v1" ||
			idx.Manifests[1].Annotations["org.opencontainers.image.ref.name"] != "v2" {
			t.Fatalf("index.json: %s", index)
		}
		var manifest struct {
			Config struct{ Digest string }
			Layers []struct{ Digest, MediaType string }
		}
		if err := json.Unmarshal(blobs[idx.Manifests[0].Digest], &manifest); err != nil || len(manifest.Layers) != 1 {
			t.Fatalf("manifest: %v %s", err, blobs[idx.Manifests[0].Digest])
		}
		if got := strings.Contains(manifest.Layers[0].MediaType, "gzip"); got == uncompressed {
			t.Errorf("uncompressed %v: layer media type %s", uncompressed, manifest.Layers[0].MediaType)
		}
		if cfg := string(blobs[manifest.Config.Digest]); !strings.Contains(cfg, `"User":"1000"`) || !strings.Contains(cfg, `"Entrypoint":["/usr/bin/prog"]`) {
			t.Errorf("config: %s", cfg)
		}
		files := layerFiles(t, blobs[manifest.Layers[0].Digest], uncompressed)
		for name, want := range map[string]string{
			"usr/bin/prog":      "#!/bin/sh\necho hi\n",
			"etc/passwd":        "root:x:0:0::/:/bin/sh\nme:x:1000:1000::/:/bin/sh\n",
			"etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
			"uploads/":          "",
			"prog2":             "-> usr/bin/prog",
		} {
			if got, ok := files[name]; !ok || got != want {
				t.Errorf("layer %s: %q (present %v), want %q", name, got, ok, want)
			}
		}
	}
}

// readLayout returns an OCI layout archive's blobs by digest and its
// index, checking each blob against its digest.
func readLayout(t *testing.T, file string) (map[string][]byte, []byte) {
	t.Helper()
	blobs, index, err := readArchive(file)
	if err != nil {
		t.Fatal(err)
	}
	for digest, data := range blobs {
		if sum := sha256.Sum256(data); "sha256:"+hex.EncodeToString(sum[:]) != digest {
			t.Errorf("blob %s does not match its digest", digest)
		}
	}
	return blobs, index
}

// layerFiles maps a layer's entries to their contents ("-> target" for
// links).
func layerFiles(t *testing.T, layer []byte, uncompressed bool) map[string]string {
	t.Helper()
	var r io.Reader = bytes.NewReader(layer)
	if !uncompressed {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			data = []byte("-> " + h.Linkname)
		}
		files[h.Name] = string(data)
	}
}

// With two platforms every reference names one image index that lists a
// manifest per platform, each with its platform's config, the same
// entrypoint, and the host file chosen by {arch}.
func TestBuildMultiPlatform(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range []string{"amd64", "arm64"} {
		if err := os.WriteFile(filepath.Join(dir, "prog-"+arch), []byte("built for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "image.tar")
	s := spec{
		out: out, refs: []string{"example.test/a:v1", "example.test/a:latest"},
		adds:       []string{filepath.Join(dir, "prog-{arch}") + "=/prog"},
		entrypoint: "/prog", user: "65532",
		platforms: []platform{{"linux", "amd64"}, {"linux", "arm64"}},
	}
	if err := build(s); err != nil {
		t.Fatal(err)
	}
	blobs, index := readLayout(t, out)
	var top struct {
		Manifests []struct {
			MediaType, Digest string
		}
	}
	if err := json.Unmarshal(index, &top); err != nil || len(top.Manifests) != 2 ||
		top.Manifests[0].Digest != top.Manifests[1].Digest || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json: %v %s", err, index)
	}
	var imageIndex struct {
		Manifests []struct {
			Digest   string
			Platform struct{ OS, Architecture string }
		}
	}
	if err := json.Unmarshal(blobs[top.Manifests[0].Digest], &imageIndex); err != nil || len(imageIndex.Manifests) != 2 {
		t.Fatalf("image index: %v %s", err, blobs[top.Manifests[0].Digest])
	}
	for i, arch := range []string{"amd64", "arm64"} {
		m := imageIndex.Manifests[i]
		if m.Platform.OS != "linux" || m.Platform.Architecture != arch {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, m.Platform, arch)
		}
		var manifest struct {
			Config struct{ Digest string }
			Layers []struct{ Digest string }
		}
		if err := json.Unmarshal(blobs[m.Digest], &manifest); err != nil || len(manifest.Layers) != 1 {
			t.Fatalf("%s manifest: %v %s", arch, err, blobs[m.Digest])
		}
		var config struct {
			OS, Architecture string
			Config           struct {
				User       string
				Entrypoint []string
			}
		}
		if err := json.Unmarshal(blobs[manifest.Config.Digest], &config); err != nil {
			t.Fatal(err)
		}
		if config.OS != "linux" || config.Architecture != arch || config.Config.User != "65532" || !slices.Equal(config.Config.Entrypoint, []string{"/prog"}) {
			t.Errorf("%s config: %+v", arch, config)
		}
		if got := layerFiles(t, blobs[manifest.Layers[0].Digest], false)["prog"]; got != "built for "+arch {
			t.Errorf("%s layer's /prog: %q", arch, got)
		}
	}
	images, err := inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, img := range images {
		got = append(got, img.String())
	}
	want := []string{
		`example.test/a:v1 linux/amd64 entrypoint=/prog user="65532"`, `example.test/a:v1 linux/arm64 entrypoint=/prog user="65532"`,
		`example.test/a:latest linux/amd64 entrypoint=/prog user="65532"`, `example.test/a:latest linux/arm64 entrypoint=/prog user="65532"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("inspect:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
