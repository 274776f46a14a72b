# The project's interface: test, test-unit, test-host, test-vm (each narrowed
# with PKGS=, test-vm's kernel chosen with KERNEL=), test-kernels, lint,
# bench. CI runs `make test` with CI=true.
#
# Two modules, one go.work: the library (the root: ipvs, ipset, conntrack,
# dummy, dataplane) and daemon/ (the program, its Kubernetes watcher, the
# e2e tests, the VM harness and the comparisons with other libraries).
# go.work joins them, but ./... stops at a nested module even in a
# workspace: ALL names the packages of both, and is what PKGS defaults to.
SHELL   := /bin/bash
GO      ?= go
ALL     := ./... ./daemon/...
PKGS    ?= $(ALL)
BIN     := $(CURDIR)/bin
VMTEST  := $(BIN)/vmtest
# Where the VM kernel is unpacked; outside git, reused across runs.
export IPVSPLANE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ipvsplane

# The VM's kernel: 5.10 (Debian 11), 6.1 (Debian 12) or 6.12 (Debian 13).
KERNEL ?= 6.1
export VMTEST_KERNEL := $(KERNEL)
# The other kernels test-kernels runs the kernel packages' VM tests on
# (with moby/ipvs reading IPVS tables too, from daemon/compare).
OTHER_KERNELS ?= 5.10 6.12
KERNEL_PKGS   ?= ./ipvs/... ./ipset/... ./conntrack/... ./dummy/... ./dataplane/... ./daemon/compare/ipvs/...

# The version the binary and the image report, from the file VERSION:
# the tag deploy/, deploy/kubeadm/ and the chart name, so the image
# `make image` builds is the one the kubelet looks for, and the library's
# version daemon/go.mod requires (a test checks they agree). Not git
# describe: tags do not travel with every copy of the history, and a
# commit's name is a tag no manifest holds. The commit is
# REVISION's. `make release VERSION=...` must name the same version.
VERSION  := $(shell cat $(CURDIR)/VERSION)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_LDFLAGS = -X main.version=$(VERSION) -X main.revision=$(REVISION)

# The library's packages that build on every GOOS lint checks on darwin.
PORTABLE_PKGS := ./ipvs/... ./ipset/... ./conntrack/... ./dummy/... ./linkaddr/... ./inet/... \
  ./compat/... ./internal/... ./dataplane/model/... ./examples/ipvs ./examples/ipset ./examples/conntrack ./examples/dummy

RACE := $(shell $(GO) env CGO_ENABLED | grep -q 1 && echo -race)

.PHONY: release test test-unit test-host test-vm test-vmtest test-kernels lint bench bench-dataplane bench-field fuzz demo soak difftest vm-kernel deps deps-vm deps-node image cluster conformance test-cluster test-cluster-nodes test-takeover test-migration test-tenant tools clean

# make test and make demo install what they need first (hack/install-deps:
# Debian packages, the VM's kernel, and for the tests the Kubernetes
# programs, the cluster node's runtime and its images); nothing is fetched
# again once there.
test: deps-node lint test-unit test-host test-vm test-vmtest test-kernels test-cluster

deps:
	@hack/install-deps

deps-vm:
	@hack/install-deps --no-kube

# Each test target ends, when something failed, with what did in a few
# lines (hack/testfailures), its whole output kept in $(BIN)/TARGET.log:
# CI shows the tail of make test's output only. A recipe pipes its output
# (2>&1, under set -o pipefail) into TEST_LOG.
TESTFAILURES = mkdir -p $(BIN) && $(GO) run ./hack/testfailures
TEST_LOG     = { $(TESTFAILURES) -log $(BIN)/$@.log; }

# -timeout: the root package's TestDaemonInstallsAtVERSION builds the
# daemon and the clientset example from a module proxy, Kubernetes'
# packages and all: minutes from a cold build cache beside the other
# packages' tests, past go test's default 10 on a loaded machine.
test-unit:
	@set -o pipefail; { echo "$(GO) test $(RACE) -timeout 25m $(PKGS)"; $(GO) test $(RACE) -timeout 25m $(PKGS) && \
	  if [ "$(PKGS)" = "$(ALL)" ]; then echo "cd hack/images && GOWORK=off $(GO) test $(RACE) ./..."; \
	  cd hack/images && GOWORK=off $(GO) test $(RACE) ./...; fi; } 2>&1 | $(TEST_LOG)

test-host:
	@pkgs="$$(hack/pkgs-with-tag hosttest $(PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "test-host: no packages with host-kernel tests in $(PKGS)"; exit 0; fi; \
	echo $(GO) test $(RACE) -count=1 -v -tags hosttest $$pkgs; \
	set -o pipefail; $(GO) test $(RACE) -count=1 -v -tags hosttest $$pkgs 2>&1 | $(TEST_LOG)

# Test binaries are static (CGO_ENABLED=0, so no race detector) and run in
# the VM one package at a time (-p 1): a second two-vCPU guest would share
# the two cores. VM_TESTS is the command, for the packages in $$pkgs and
# the kernel in VMTEST_KERNEL.
VM_TESTS = CGO_ENABLED=0 $(GO) test -count=1 -v -p 1 -timeout 40m -tags vmtest -exec $(VMTEST) $$pkgs
test-vm: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	@pkgs="$$(hack/pkgs-with-tag vmtest $(PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "test-vm: no packages with VM tests in $(PKGS)"; exit 0; fi; \
	echo "$(VM_TESTS)"; \
	set -o pipefail; $(VM_TESTS) 2>&1 | $(TEST_LOG)

# vmtest's own test of a guest that never ends: it boots the guest twice
# (about 75 s in all), to see vmtest stop it at its limit and on SIGTERM.
test-vmtest: vm-kernel
	@echo "$(GO) test -count=1 -v -tags vmharness -run TestStuckGuestNamesItself ./daemon/hack/vmtest"; \
	set -o pipefail; $(GO) test -count=1 -v -tags vmharness -run TestStuckGuestNamesItself ./daemon/hack/vmtest 2>&1 | $(TEST_LOG)

# The kernel packages' VM tests on each of OTHER_KERNELS, all at once, each
# in guests of one vCPU (VMTEST_CPUS): their tests run one at a time, so a
# guest of two vCPUs keeps one of these two cores idle, and the kernels
# one after the other took twice as long (test-vm's 6.1 keeps two vCPUs,
# for the SMP paths). Each kernel's output is held
# in $(BIN)/test-kernels-<kernel>.log and printed when it ends, timed.
test-kernels: $(VMTEST) $(BIN)/ipvsplane
	@for k in $(OTHER_KERNELS); do $(MAKE) --no-print-directory -s vm-kernel KERNEL=$$k || exit 1; done
	@pkgs="$$(hack/pkgs-with-tag vmtest $(KERNEL_PKGS))"; jobs=; \
	for k in $(OTHER_KERNELS); do \
	  ( start=$$(date +%s); \
	    VMTEST_KERNEL=$$k VMTEST_CPUS=$${VMTEST_CPUS:-1} $(VM_TESTS) > $(BIN)/test-kernels-$$k.log 2>&1; rc=$$?; \
	    cat $(BIN)/test-kernels-$$k.log; \
	    echo "test-kernels: kernel $$k $$([ $$rc = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - start )) s"; \
	    exit $$rc ) & jobs="$$jobs $$!"; \
	done; \
	rc=0; for j in $$jobs; do wait $$j || rc=1; done; \
	[ $$rc = 0 ] || for k in $(OTHER_KERNELS); do echo "test-kernels: kernel $$k"; \
	  $(TESTFAILURES) -summary-only < $(BIN)/test-kernels-$$k.log; done; exit $$rc

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(ALL)
	$(GO) vet -tags hosttest $(ALL)
	$(GO) vet -tags vmtest $(ALL)
	$(GO) vet -tags clustertest ./daemon/e2e/cluster/...
	$(GO) vet -tags vmharness ./daemon/hack/vmtest/
	cd hack/images && GOWORK=off $(GO) vet ./...
	$(GO) tool staticcheck $(ALL)
	$(GO) tool staticcheck -tags hosttest $(ALL)
	$(GO) tool staticcheck -tags vmtest $(ALL)
	$(GO) tool staticcheck -tags clustertest ./daemon/e2e/cluster/...
	@# Each module on its own, as importers and go install see it: the
	@# library with its go.mod alone (its go line, its requirements: in the
	@# workspace a test could import what only the daemon requires), and
	@# the library's dependencies as an importer gets them. The daemon's
	@# go.mod requires the library at VERSION, which no proxy has before
	@# the tag: TestDaemonInstallsAtVERSION (test-unit) serves both modules
	@# from the tree through a module proxy and checks it there.
	GOWORK=off $(GO) mod tidy -diff
	GOWORK=off $(GO) vet ./...
	GOWORK=off $(GO) vet -tags hosttest ./...
	GOWORK=off $(GO) vet -tags vmtest ./...
	hack/check-library-deps
	@# The library off Linux: its kernel packages and their fakes build
	@# on macOS, so that unit tests on the fakes compile there (dialing
	@# fails as Linux only). The dataplane needs google/nftables, which
	@# builds on Linux only.
	GOOS=darwin GOWORK=off $(GO) build $(PORTABLE_PKGS)
	GOOS=darwin GOWORK=off $(GO) vet $(PORTABLE_PKGS)

# Benchmarks run side by side with their baselines (ipset restore,
# conntrack -D, moby/ipvs, ...) in one run; hack/benchratio prints ratios.
BENCH     ?= .
BENCHTIME ?= 1x
# The e2e benchmark at 10,000 services runs kube-proxy's IPVS mode for
# most of an hour under emulation: make bench PKGS=./daemon/e2e/... BENCH_TIMEOUT=3h
# The comparisons with other Go libraries (moby/ipvs, vishvananda/netlink)
# are in daemon/compare: make bench PKGS="./ipvs/... ./daemon/compare/ipvs/..."
# The dataplane's sync benchmarks (BenchmarkFullSyncFloor, InitialSync,
# EndpointChange) run at the sizes BENCH_SERVICES lists, which reach the
# guest as IPVSPLANE_BENCH_SERVICES:
# make bench PKGS=./dataplane/... BENCH=FullSyncFloor BENCH_SERVICES=50000,100000 VMTEST_MEM=8192
BENCH_SERVICES ?=
# Endpoints per service in daemon/e2e's BenchmarkProxies (default 10): the
# field shapes are BENCH_SERVICES=44000 BENCH_ENDPOINTS=1 and
# BENCH_SERVICES=5000 BENCH_ENDPOINTS=50.
BENCH_ENDPOINTS ?=
# BenchmarkProxies' proxies (default all four) and the bound on each one's
# first sync, past which it is reported as not done and its other figures
# go unmeasured (default 3h):
# BENCH_PROXIES=ipvsplane,kube-proxy-iptables BENCH_SYNC_LIMIT=30m.
BENCH_PROXIES ?=
BENCH_SYNC_LIMIT ?=
# BenchmarkProxies' churn of each restarted proxy (with its default
# --*-min-sync-period): endpoint moves at IPVSPLANE_BENCH_CHURN_RATE a
# second (default 50) for BENCH_CHURN (default none; bench-field: 60s),
# reported as churn-p50-s and churn-p99-s.
BENCH_CHURN ?=
BENCH_TIMEOUT ?= 60m
bench: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	@set -o pipefail; $(if $(BENCH_SERVICES),export IPVSPLANE_BENCH_SERVICES='$(BENCH_SERVICES)';) $(if $(BENCH_ENDPOINTS),export IPVSPLANE_BENCH_ENDPOINTS='$(BENCH_ENDPOINTS)';) \
	  $(if $(BENCH_PROXIES),export IPVSPLANE_BENCH_PROXIES='$(BENCH_PROXIES)';) $(if $(BENCH_SYNC_LIMIT),export IPVSPLANE_BENCH_SYNC_LIMIT='$(BENCH_SYNC_LIMIT)';) \
	  $(if $(BENCH_CHURN),export IPVSPLANE_BENCH_CHURN='$(BENCH_CHURN)';) { \
	  pkgs="$$(hack/pkgs-with-tag hosttest --bench $(PKGS))"; \
	  [ -z "$$pkgs" ] || $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime=$(BENCHTIME) -benchmem -tags hosttest $$pkgs; \
	  pkgs="$$(hack/pkgs-with-tag vmtest --bench $(PKGS))"; \
	  [ -z "$$pkgs" ] || VMTEST_MEM=$${VMTEST_MEM:-4096} CGO_ENABLED=0 $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime=$(BENCHTIME) -benchmem -timeout $(BENCH_TIMEOUT) -p 1 -tags vmtest -exec $(VMTEST) $$pkgs; \
	} 2>&1 | $(GO) run ./hack/benchratio

# The field shapes of issue 28 (kubernetes#139513, #135639 and #130119):
# BenchmarkProxies at 44,000 services x 1 endpoint, 5,000 x 50 and
# 10,000 x 10, one VM run each, every proxy's first sync bounded by
# BENCH_SYNC_LIMIT (default here 45m; kube-proxy's modes take hours at
# these sizes under emulation), each proxy that synced then churned at
# 50 endpoint moves a second for BENCH_CHURN (default here 60s).
FIELD_SHAPES ?= 44000x1 5000x50 10000x10
bench-field: BENCH_SYNC_LIMIT = 45m
bench-field: BENCH_CHURN = 60s
bench-field: BENCH_TIMEOUT = 6h
bench-field: VMTEST_MEM = 12288
bench-field: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	@set -e; for shape in $(FIELD_SHAPES); do \
	  $(MAKE) --no-print-directory bench PKGS=./daemon/e2e/... BENCH=BenchmarkProxies BENCH_SERVICES=$${shape%x*} \
	    BENCH_ENDPOINTS=$${shape#*x} BENCH_SYNC_LIMIT=$(BENCH_SYNC_LIMIT) BENCH_CHURN=$(BENCH_CHURN) BENCH_TIMEOUT=$(BENCH_TIMEOUT) VMTEST_MEM=$(VMTEST_MEM); \
	done

# Every fuzz target for FUZZTIME (default 30s) each; make fuzz PKGS=./ipvs/...
fuzz:
	hack/fuzz $(PKGS)

# The README's demo: the daemon on example manifests in the VM, real
# requests through a cluster IP, a node port and a load balancer, then
# ipvsplane status and the IPVS table. It is daemon/cmd/ipvsplane's TestDemo,
# which make test-vm runs too.
demo: deps-vm $(VMTEST) vm-kernel
	cd daemon/cmd/ipvsplane && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/ipvsplane-vm.test .
	cd daemon/cmd/ipvsplane && VMTEST_TIMEOUT=10m $(VMTEST) $(BIN)/ipvsplane-vm.test -test.run '^TestDemo$$'

# The churn soak at full size: 10,000 services through the API server,
# 50 changes a second for a minute (e2e's TestChurnSoak; make test-vm runs
# it with short defaults). SOAK_* override the size; SOAK_PROXIES=
# kube-proxy-nftables,kube-proxy-ipvs,ipvsplane runs kube-proxy's modes
# through the same churn first and prints the three side by side;
# ipvsplane-local-route is ipvsplane with --service-address-binding=local-route.
# IPVSPLANE_SOAK_PROFILE=1 adds a CPU profile of ipvsplane through the
# churn to the output; hack/profiles LOG writes it to bin/ and prints its top.
# IPVSPLANE_SOAK_LOG=1 runs ipvsplane at debug level and adds its log, a
# line per sync, which hack/profiles writes to bin/ too.
SOAK_SERVICES ?= 10000
SOAK_DURATION ?= 60s
SOAK_RATE     ?= 50
SOAK_PROXIES  ?= ipvsplane
soak: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	cd daemon/e2e && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/e2e-vm.test .
	cd daemon/e2e && IPVSPLANE_SOAK_SERVICES=$(SOAK_SERVICES) IPVSPLANE_SOAK_DURATION=$(SOAK_DURATION) IPVSPLANE_SOAK_RATE=$(SOAK_RATE) \
	  IPVSPLANE_SOAK_PROXIES=$(SOAK_PROXIES) VMTEST_MEM=$${VMTEST_MEM:-4096} VMTEST_TIMEOUT=150m \
	  $(VMTEST) $(BIN)/e2e-vm.test -test.run '^TestChurnSoak$$' -test.v -test.timeout 140m

# The data-plane benchmark (e2e's TestDataPlaneBench; make test-vm runs it
# with 100 services and ipvsplane alone): with each of DATAPLANE_SIZES
# services installed through the API server, each of DATAPLANE_PROXIES in
# turn, a client opening short TCP connections to one service's
# ClusterIP, NodePort and load balancer IP for DATAPLANE_DURATION each;
# connections per second and connect latency, as ratios to ipvsplane;
# each proxy's periodic sync is put off, so only packets are measured.
# The proxies of a size are all synced first, then take turns path by
# path, DATAPLANE_ROUNDS times; DATAPLANE_PERF=1 adds a round under a
# system-wide perf profile of the guest (Debian's linux-perf on the host,
# copied in) and prints each proxy's kernel functions.
DATAPLANE_SIZES    ?= 1000,10000,30000
DATAPLANE_PROXIES  ?= ipvsplane,kube-proxy-ipvs,kube-proxy-nftables,kube-proxy-iptables
DATAPLANE_DURATION ?= 10s
DATAPLANE_ROUNDS   ?= 1
DATAPLANE_PERF     ?=
bench-dataplane: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	cd daemon/e2e && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/e2e-vm.test .
	cd daemon/e2e && IPVSPLANE_DATAPLANE_SIZES=$(DATAPLANE_SIZES) IPVSPLANE_DATAPLANE_PROXIES=$(DATAPLANE_PROXIES) \
	  IPVSPLANE_DATAPLANE_ROUNDS=$(DATAPLANE_ROUNDS) IPVSPLANE_DATAPLANE_PERF=$(DATAPLANE_PERF) $(if $(DATAPLANE_PERF),VMTEST_TOOLS="$$VMTEST_TOOLS perf") \
	  IPVSPLANE_DATAPLANE_DURATION=$(DATAPLANE_DURATION) VMTEST_MEM=$${VMTEST_MEM:-6144} VMTEST_TIMEOUT=300m \
	  $(VMTEST) $(BIN)/e2e-vm.test -test.run '^TestDataPlaneBench$$' -test.v -test.timeout 290m

# The differential tests against kube-proxy (e2e's TestKubeProxyDifferential
# and TestKubeProxyConntrackDifferential, which make test-vm runs on fixed
# seeds) on SEEDS new seeds of
# DIFFTEST_SERVICES random Services each; DIFFTEST_SEEDS=1,2,3 reruns
# given seeds; CASE=FILE runs the reproduction a failing seed printed,
# saved to FILE. NEIGHBOURS=1 puts other programs' rules on the node too
# (portmap hostPorts, Docker, FORWARD DROP, kube-proxy's other modes'
# leftovers), or NEIGHBOURS=KIND,... those kinds (randomcluster's
# NeighbourKinds, all, default); NEIGHBOURS=0 none, even on the CI seed
# that has them. A seed takes some minutes in the emulated guest.
SEEDS             ?= 3
DIFFTEST_SERVICES ?= 40
NEIGHBOURS        ?=
difftest: $(VMTEST) $(BIN)/ipvsplane vm-kernel
	cd daemon/e2e && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/e2e-vm.test .
	@first=$$(date +%s); seeds=$${DIFFTEST_SEEDS:-$$(seq -s, $$first $$((first + $(SEEDS) - 1)))}; \
	n=$$(echo "$$seeds" | tr , '\n' | wc -l); echo "difftest: seeds $$seeds"; \
	cd daemon/e2e && IPVSPLANE_DIFFTEST_SEEDS=$$seeds IPVSPLANE_DIFFTEST_SERVICES=$(DIFFTEST_SERVICES) \
	  $(if $(NEIGHBOURS),IPVSPLANE_DIFFTEST_NEIGHBOURS=$(NEIGHBOURS)) \
	  $(if $(CASE),IPVSPLANE_DIFFTEST_CASE=$(abspath $(CASE)) VMTEST_TOOLS="$$VMTEST_TOOLS $(abspath $(CASE))") \
	  VMTEST_TIMEOUT=$$((n * 20 + 15))m $(VMTEST) $(BIN)/e2e-vm.test -test.run '^TestKubeProxy(Conntrack)?Differential$$' -test.v -test.timeout $$((n * 20 + 10))m

# The ipvsplane image, built without Docker or a registry: the static
# binary on an empty base, as an OCI archive that `ctr images import` (or
# any OCI tool) loads. IMAGE names it.
IMAGE     ?= ghcr.io/ipvsplane/ipvsplane:$(VERSION)
IMAGE_TAR := $(BIN)/ipvsplane-image.tar
# The one description of the image, for `make image` and `make release`:
# the static binary ({os} and {arch} name the platform's) as entrypoint.
# It runs as root, as kube-proxy's does (docs/releases.md says why).
IMAGE_RECIPE = -add '$(1)=/ipvsplane' -entrypoint /ipvsplane
image: $(BIN)/ipvsplane $(BIN)/mkimage
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
release: $(BIN)/mkimage
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

# A cluster of NODES nodes (default one), each a VM (daemon/hack/vmtest
# -node): the control plane on the host's loopback, nodes with containerd,
# kubelet and CNI, PROXY (ipvsplane from deploy/, or kube-proxy in
# KUBE_PROXY_MODE: ipvs, iptables or nftables) and CoreDNS on each; then
# CMD runs on the host with KUBECONFIG set (default: an interactive shell).
# Each node takes VMTEST_MEM (3072 MiB).
PROXY ?= ipvsplane
KUBE_PROXY_MODE ?= ipvs
NODES ?= 1
# ginkgo runs hack/conformance's PROCS above 1; it is built on the host,
# as the harness's namespace has no network.
BUILD_GINKGO = @[ "$${PROCS:-1}" -le 1 ] || hack/build-kube ginkgo >/dev/null
NODE   = $(VMTEST) -node -nodes $(NODES) -proxy $(PROXY) -kube-proxy-mode $(KUBE_PROXY_MODE) -image $(IMAGE_TAR) -image-ref $(IMAGE)
cluster: deps-node image $(VMTEST) vm-kernel
	$(BUILD_GINKGO)
	$(NODE) -- $(or $(CMD),bash)

# Upstream's conformance specs for Services, DNS and networking (e2e.test
# from the pinned k8s.io/kubernetes) against that cluster; FOCUS and SKIP
# narrow them (hack/conformance). vmtest plays the cloud's load balancer
# (-load-balancers) for the [Feature:LoadBalancer] specs.
conformance: deps-node image $(VMTEST) vm-kernel
	$(BUILD_GINKGO)
	$(NODE) -load-balancers -- hack/conformance

# The cluster tests (daemon/e2e/cluster: the proxy installed with helm from
# charts/ipvsplane, as `make cluster` installs deploy/ with kubectl, Ready and clean,
# DNS through the cluster IP, a Service by name, a NodePort and a load
# balancer from outside the node, scaling), and CONFORMANCE_SLICE and
# TWO_NODE_SPEC of upstream's specs, in one booted cluster of two nodes:
# the smoke of more than one node is TestTwoNodes (a pod reaching a pod on
# the other node through a ClusterIP, a NodePort answering on the node
# without endpoints, both families) and TWO_NODE_SPEC; the other
# TestTwoNodes* tests are make test-cluster-nodes'. The suite's go test
# has a timeout of its own: it ran past go test's default 10 minutes on a
# 2-core host whose nodes were Ready 7 minutes after their boot.
CONFORMANCE_SLICE ?= \[sig-network\] (Services should serve a basic endpoint from pods|DNS should provide DNS for services|Networking Granular Checks: Pods should function for intra-pod communication: udp).*\[Conformance\]
TWO_NODE_SPEC ?= \[sig-network\] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service
test-cluster: NODES = 2
test-cluster: deps-node image $(VMTEST) vm-kernel
	set -o pipefail; $(NODE) -install helm -- sh -c 'CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 40m -tags clustertest -skip "TestTakeoverFromKubeProxy|TestKubeadmMigration|TestTenantCannotHarmOthers|TestTwoNodes." ./daemon/e2e/cluster/ && FOCUS="$(CONFORMANCE_SLICE)|$(TWO_NODE_SPEC)" hack/conformance' \
	  2>&1 | $(TEST_LOG)

# The two-node smoke: a cluster of two nodes, the TestTwoNodes tests (a
# pod reaching a pod on the other node through a ClusterIP, a NodePort
# answering on the node without endpoints, externalTrafficPolicy Local
# and its health-check node port on each node, hairpin, a UDP flow
# following its endpoint to the other node, session affinity across a
# scale-up; each on both families) and TWO_NODE_SLICE of upstream's specs,
# which skip themselves on one node.
TWO_NODE_SLICE ?= \[sig-network\] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service
test-cluster-nodes: NODES = 2
test-cluster-nodes: deps-node image $(VMTEST) vm-kernel
	set -o pipefail; $(NODE) -- sh -c 'CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 40m -tags clustertest -run TestTwoNodes ./daemon/e2e/cluster/ && FOCUS="$(TWO_NODE_SLICE)" hack/conformance' \
	  2>&1 | $(TEST_LOG)

# docs/migrating-from-kube-proxy.md in the cluster: kube-proxy serving
# pods in its iptables (kubeadm's default, which the cluster starts it in),
# nftables and IPVS modes in turn, deploy/ (with deploy/migration's files) taking the
# nodes over one by one and handing them back, under traffic from a client
# on every node (e2e/cluster's TestTakeoverFromKubeProxy); NODES=2 for two.
test-takeover: PROXY = kube-proxy
test-takeover: KUBE_PROXY_MODE = iptables
test-takeover: deps-node image $(VMTEST) vm-kernel
	set -o pipefail; $(NODE) -- env CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 150m -tags clustertest -run TestTakeoverFromKubeProxy ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)

# docs/kubeadm.md's migration, its commands read from the docs and run
# (e2e/cluster's TestKubeadmMigration): a cluster whose kube-proxy the
# pinned kubeadm installed (vmtest -proxy kubeadm), the image made by
# `make image` and imported on each node as
# docs/migrating-from-kube-proxy.md says, then the nodes moved one by one
# under traffic. The nodes boot without the image: importing it is the
# docs' step.
test-migration: NODES = 2
test-migration: deps-node $(VMTEST) vm-kernel
	set -o pipefail; $(VMTEST) -node -nodes $(NODES) -proxy kubeadm -- env CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 40m -tags clustertest -run 'TestKubeadmMigration|TestKubeadmDocBlocks|TestDocSteps' ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)

# A namespace tenant's hostile input against two nodes (e2e/cluster's
# TestTenantCannotHarmOthers): another namespace's Service, the API
# server's and DNS's cluster IPs answering throughout, across a restart of
# every proxy; no proxy restarts. About 10 minutes, 2 to 3 of them the
# test; outside make test, whose CI run is already near its 45-minute
# budget (docs/security.md records its runs).
test-tenant: NODES = 2
test-tenant: deps-node image $(VMTEST) vm-kernel
	set -o pipefail; $(NODE) -install helm -- env CGO_ENABLED=0 $(GO) test -count=1 -v -timeout 40m -tags clustertest -run TestTenantCannotHarmOthers ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)

deps-node:
	@hack/install-deps --node

# The e2e tests run the real program; go build only relinks what changed.
# make bin/ipvsplane builds it alone. Its version (ipvsplane version,
# --version, the start-up line, ipvsplane_build_info) is VERSION and its
# commit REVISION, set at link time.
.PHONY: $(BIN)/ipvsplane bin/ipvsplane
bin/ipvsplane: $(BIN)/ipvsplane
$(BIN)/ipvsplane:
	CGO_ENABLED=0 $(GO) build -ldflags '$(VERSION_LDFLAGS)' -o $@ ./daemon/cmd/ipvsplane

# vmtest serves its guest's control plane (daemon/internal/controlplane)
# and more besides its own directory, so go build, which relinks only what
# changed, decides whether it is current: a copy older than the handler a
# test calls answered 404.
.PHONY: $(VMTEST)
$(VMTEST):
	CGO_ENABLED=0 $(GO) build -o $@ ./daemon/hack/vmtest

vm-kernel:
	@hack/fetch-vm-kernel "$(IPVSPLANE_CACHE)/kernel" $(KERNEL)

clean:
	rm -rf $(BIN) dist
