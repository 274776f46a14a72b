package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSummary is what an archive's image is for one platform: what
// `mkimage -inspect` prints and a release is checked by.
type imageSummary struct {
	Ref        string
	Platform   string
	Entrypoint []string
	User       string
}

func (s imageSummary) String() string {
	return fmt.Sprintf("%s %s entrypoint=%s user=%q", s.Ref, s.Platform, strings.Join(s.Entrypoint, " "), s.User)
}

// inspect reads an OCI layout archive and follows each reference of
// index.json through an image index, if there is one, to every
// platform's config.
func inspect(file string) ([]imageSummary, error) {
	blobs, index, err := readArchive(file)
	if err != nil {
		return nil, err
	}
	var top struct{ Manifests []descriptor }
	if err := json.Unmarshal(index, &top); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	var out []imageSummary
	for _, d := range top.Manifests {
		ref := d.Annotations["io.containerd.image.name"]
		manifests := []descriptor{d}
		if d.MediaType == types.OCIImageIndex {
			var ix struct{ Manifests []descriptor }
			if err := json.Unmarshal(blobs[d.Digest], &ix); err != nil {
				return nil, fmt.Errorf("%s: image index %s: %w", ref, d.Digest, err)
			}
			manifests = ix.Manifests
		}
		for _, m := range manifests {
			s, err := summarize(blobs, m)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
			s.Ref = ref
			out = append(out, s)
		}
	}
	return out, nil
}

// summarize reads one manifest's config.
func summarize(blobs map[string][]byte, m descriptor) (imageSummary, error) {
	var manifest struct{ Config descriptor }
	if err := json.Unmarshal(blobs[m.Digest], &manifest); err != nil {
		return imageSummary{}, fmt.Errorf("manifest %s: %w", m.Digest, err)
	}
	var config struct {
		OS, Architecture string
		Config           struct {
			User       string
			Entrypoint []string
		}
	}
	if err := json.Unmarshal(blobs[manifest.Config.Digest], &config); err != nil {
		return imageSummary{}, fmt.Errorf("config %s: %w", manifest.Config.Digest, err)
	}
	if m.Platform != nil && (m.Platform.OS != config.OS || m.Platform.Architecture != config.Architecture) {
		return imageSummary{}, fmt.Errorf("manifest %s is listed for %s/%s but its config says %s/%s",
			m.Digest, m.Platform.OS, m.Platform.Architecture, config.OS, config.Architecture)
	}
	return imageSummary{Platform: config.OS + "/" + config.Architecture, Entrypoint: config.Config.Entrypoint, User: config.Config.User}, nil
}

// readArchive returns an archive's blobs by digest and its index.json.
func readArchive(file string) (map[string][]byte, []byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	blobs := map[string][]byte{}
	var index []byte
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		if h.Name == "index.json" {
			index = data
		} else if hexDigest, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok {
			blobs["sha256:"+hexDigest] = data
		}
	}
	if index == nil {
		return nil, nil, errors.New("no index.json: not an OCI image layout")
	}
	return blobs, index, nil
}
