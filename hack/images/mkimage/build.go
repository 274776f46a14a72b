package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// platform is an image's operating system and CPU architecture.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// expand puts p's names in place of {os} and {arch} in a host path.
func (p platform) expand(host string) string {
	return strings.NewReplacer("{os}", p.os, "{arch}", p.arch).Replace(host)
}

// build makes the image s describes, once per platform, and writes the
// archive.
func build(s spec) error {
	if s.busybox != "" && len(s.platforms) > 1 {
		return errors.New("-busybox runs the program to list its applets, so it takes one -platform")
	}
	platforms := s.platforms
	if len(platforms) == 0 {
		platforms = []platform{{os: "linux", arch: "amd64"}}
	}
	images := make([]v1.Image, len(platforms))
	for i, p := range platforms {
		img, err := buildImage(s, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		images[i] = img
	}
	return writeLayout(s.out, platforms, images, s.refs)
}

// buildImage makes the image s describes for p.
func buildImage(s spec, p platform) (v1.Image, error) {
	layerTar, err := layerContents(s, p)
	if err != nil {
		return nil, err
	}
	var layer v1.Layer
	if s.uncompressed {
		layer = static.NewLayer(layerTar, types.OCIUncompressedLayer)
	} else {
		layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layerTar)), nil
		}, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, err
		}
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.os, p.arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Env = append([]string{defaultPath}, s.env...)
	cf.Config.User = s.user
	if s.entrypoint != "" {
		cf.Config.Entrypoint = []string{s.entrypoint}
	}
	cf.Config.Cmd = s.args
	return mutate.ConfigFile(img, cf)
}

// layerContents is the image's one layer as an uncompressed tar.
func layerContents(s spec, p platform) ([]byte, error) {
	var buf bytes.Buffer
	w := &layerWriter{tw: tar.NewWriter(&buf), seen: map[string]bool{}}
	for _, d := range []string{"bin", "etc", "tmp", "usr/bin", "usr/sbin", "sbin", "root", "proc", "sys", "dev", "run", "var/run"} {
		w.dir(d)
	}
	for _, a := range s.adds {
		host, guest, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("-add %q: want HOST=GUEST", a)
		}
		host = p.expand(host)
		data, err := os.ReadFile(host)
		if err != nil {
			return nil, err
		}
		info, err := os.Stat(host)
		if err != nil {
			return nil, err
		}
		w.file(strings.TrimPrefix(guest, "/"), int64(info.Mode().Perm()), data)
	}
	for _, d := range s.dirs {
		w.dir(strings.Trim(d, "/"))
	}
	for _, l := range s.symlinks {
		name, target, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("-symlink %q: want NAME=TARGET", l)
		}
		w.symlink(strings.TrimPrefix(name, "/"), target)
	}
	// Defaults for what no -add gave.
	w.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"))
	w.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
	// glibc's resolver reads this; without it, getent hosts skips DNS.
	w.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
	if s.busybox != "" {
		if err := w.busybox(s.busybox); err != nil {
			return nil, err
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	if err := w.tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layerWriter writes a layer's entries, their parent directories first,
// each once; the first error sticks.
type layerWriter struct {
	tw   *tar.Writer
	seen map[string]bool
	err  error
}

func (w *layerWriter) header(h *tar.Header) {
	if w.err != nil || w.seen[h.Name] {
		return
	}
	if dir := path.Dir(strings.TrimSuffix(h.Name, "/")); dir != "." {
		w.dir(dir)
	}
	w.seen[h.Name] = true
	h.ModTime = time.Unix(0, 0)
	h.Format = tar.FormatPAX
	w.err = w.tw.WriteHeader(h)
}

func (w *layerWriter) dir(name string) {
	mode := int64(0o755)
	if name == "tmp" {
		mode = 0o1777
	}
	w.header(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode})
}

func (w *layerWriter) file(name string, mode int64, data []byte) {
	if w.seen[name] {
		return
	}
	w.header(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data))})
	if w.err == nil {
		_, w.err = w.tw.Write(data)
	}
}

func (w *layerWriter) symlink(name, target string) {
	w.header(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777})
}

// busybox adds the program and a link in /bin for each of its applets
// that no other file of the image provides there or in /usr/bin. Debian's
// static busybox shell runs its own applets before PATH's programs, so an
// image that has bash gets bash as /bin/sh: scripts then run the image's
// ip, nc or curl, not busybox's.
func (w *layerWriter) busybox(program string) error {
	data, err := os.ReadFile(program)
	if err != nil {
		return err
	}
	w.file("bin/busybox", 0o755, data)
	if w.seen["bin/bash"] {
		w.symlink("bin/sh", "bash")
	}
	out, err := exec.Command(program, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", program, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || w.seen["bin/"+applet] || w.seen["usr/bin/"+applet] {
			continue
		}
		w.symlink("bin/"+applet, "busybox")
	}
	return nil
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   types.MediaType   `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// writeLayout writes images (one per platform) as an OCI image layout in
// a tar file: oci-layout, index.json with one entry per reference
// (containerd names the imported image from its annotations), and the
// blobs. Several platforms' images are listed in one image index, which
// the references name.
func writeLayout(out string, platforms []platform, images []v1.Image, refs []string) error {
	blobs := map[string][]byte{}
	var manifests []descriptor
	for i, img := range images {
		d, err := addImageBlobs(blobs, img)
		if err != nil {
			return err
		}
		d.Platform = &ociPlatform{Architecture: platforms[i].arch, OS: platforms[i].os}
		manifests = append(manifests, d)
	}
	top := manifests[0]
	if len(manifests) > 1 {
		index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": manifests})
		if err != nil {
			return err
		}
		top = addBlob(blobs, types.OCIImageIndex, index)
	}
	index, err := layoutIndex(refs, top)
	if err != nil {
		return err
	}
	return writeTar(out, index, blobs)
}

// writeTar writes the layout's files: oci-layout, index.json and the
// blobs in digest order, each with time zero.
func writeTar(out string, index []byte, blobs map[string][]byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var err error
	put := func(name string, data []byte) {
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)})
		}
		if err == nil {
			_, err = tw.Write(data)
		}
	}
	put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	put("index.json", index)
	for _, h := range slices.Sorted(maps.Keys(blobs)) {
		put("blobs/sha256/"+h, blobs[h])
	}
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// addBlob keeps data as a blob and returns its descriptor.
func addBlob(blobs map[string][]byte, mediaType types.MediaType, data []byte) descriptor {
	sum := sha256.Sum256(data)
	blobs[hex.EncodeToString(sum[:])] = data
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// addImageBlobs keeps img's manifest, config and layers as blobs and
// returns the manifest's descriptor.
func addImageBlobs(blobs map[string][]byte, img v1.Image) (descriptor, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return descriptor{}, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return descriptor{}, err
	}
	addBlob(blobs, types.OCIConfigJSON, config)
	layers, err := img.Layers()
	if err != nil {
		return descriptor{}, err
	}
	for _, l := range layers {
		if err := addLayerBlob(blobs, l); err != nil {
			return descriptor{}, err
		}
	}
	return addBlob(blobs, types.OCIManifestSchema1, manifest), nil
}

func addLayerBlob(blobs map[string][]byte, l v1.Layer) error {
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	addBlob(blobs, "", data)
	return nil
}

// layoutIndex is index.json: top once per reference, annotated with the
// full name (io.containerd.image.name) and the OCI ref name.
func layoutIndex(refs []string, top descriptor) ([]byte, error) {
	var manifests []descriptor
	for _, r := range refs {
		ref, err := name.ParseReference(r, name.WeakValidation)
		if err != nil {
			return nil, err
		}
		d := top
		d.Annotations = map[string]string{
			"io.containerd.image.name":          ref.Name(),
			"org.opencontainers.image.ref.name": ref.Identifier(),
		}
		manifests = append(manifests, d)
	}
	return json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIImageIndex,
		"manifests":     manifests,
	})
}
