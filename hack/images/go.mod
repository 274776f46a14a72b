// Builds the container images the cluster tests run (ipvsplane's own, the
// pause and e2e test images, CoreDNS) without a Docker daemon or a
// registry: hack/build-images and `make image` run mkimage from here, and
// CoreDNS is built from its module at the version pinned below. A module of
// its own so that ipvsplane never depends on these.
module github.com/ipvsplane/ipvsplane/hack/images

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/sys v0.49.0
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
