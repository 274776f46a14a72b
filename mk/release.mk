# Included by the Makefile: the image and a release.
.PHONY: image release

# The ipvsplane image, built without Docker or a registry: the static
# binary on an empty base, as an OCI archive that `ctr images import` (or
# any OCI tool) loads. IMAGE names it.
IMAGE     ?= ghcr.io/ipvsplane/ipvsplane:$(VERSION)
IMAGE_TAR := $(BIN)/ipvsplane-image.tar
# The one description of the image, for `make image` and `make release`:
# the static binary ({os} and {arch} name the platform's) as entrypoint.
# It runs as root, as kube-proxy's does (docs/releases.md says why).
IMAGE_RECIPE = -add '$(1)=/ipvsplane' -entrypoint /ipvsplane
image: $(BIN)/ipvsplane $(BIN)/mkimage ## the image, an OCI archive in bin/ (no Docker, no registry)
	$(BIN)/mkimage -o $(IMAGE_TAR) -ref $(IMAGE) $(call IMAGE_RECIPE,$(BIN)/ipvsplane)
	@echo "image: $(IMAGE) in $(IMAGE_TAR)"

$(BIN)/mkimage: $(wildcard hack/images/mkimage/*.go) hack/images/go.mod
	cd hack/images && GOWORK=off $(GO) build -o $@ ./mkimage

# make release: what a release of VERSION publishes, in dist/VERSION:
# static binaries for each of RELEASE_PLATFORMS, one image index with all
# of them (checked: each platform's config and entrypoint), the licence
# notices of every module the binaries link, and SHA256SUMS of it all.
RELEASE_PLATFORMS := linux/amd64 linux/arm64
DIST = $(CURDIR)/dist/$(VERSION)
release: $(BIN)/mkimage ## binaries, image, licences and sums of VERSION in dist/
	@echo "$(VERSION)" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$' || { echo "release: VERSION must be vX.Y.Z, not $(VERSION)"; exit 2; }
	@[ "$(VERSION)" = "$$(cat VERSION)" ] || { echo "release: VERSION=$(VERSION), the file VERSION says $$(cat VERSION): change the file (and what names it)"; exit 2; }
	@$(GO) test -count=1 -run '^TestVersionEverywhere$$' ./daemon/cmd/ipvsplane >/dev/null || \
	  { echo "release: not everything names $(VERSION): go test -run TestVersionEverywhere ./daemon/cmd/ipvsplane"; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	for p in $(RELEASE_PLATFORMS); do \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(VERSION_LDFLAGS) -s -w' \
	    -o $(DIST)/ipvsplane-$${p%/*}-$${p#*/} ./daemon/cmd/ipvsplane || exit 1; \
	done
	$(DIST)/ipvsplane-linux-amd64 version | grep -qx 'ipvsplane $(VERSION)'
	$(BIN)/mkimage -o $(DIST)/ipvsplane-image.tar -ref $(IMAGE) $(addprefix -platform ,$(RELEASE_PLATFORMS)) \
	  $(call IMAGE_RECIPE,$(DIST)/ipvsplane-{os}-{arch})
	$(BIN)/mkimage -inspect $(DIST)/ipvsplane-image.tar | tee $(DIST)/image.txt
	for p in $(RELEASE_PLATFORMS); do grep -q " $$p entrypoint=/ipvsplane " $(DIST)/image.txt || { echo "release: no $$p image"; exit 1; }; done
	rm $(DIST)/image.txt
	hack/licenses $(DIST)/licenses ./daemon/cmd/ipvsplane
	tar -C $(DIST) --sort=name --mtime=@0 --owner=0 --group=0 -czf $(DIST)/licenses.tar.gz licenses && rm -r $(DIST)/licenses
	cd $(DIST) && sha256sum ipvsplane-* licenses.tar.gz > SHA256SUMS
	@echo "release: $(VERSION) in $(DIST)"; cat $(DIST)/SHA256SUMS
