# ipvsplane's targets; `make` alone (or `make help`) lists them all.
#
# Start here:
#   make demo       the daemon on example manifests in a VM, with real traffic
#   make test-unit  every package's unit tests; `go test ./... ./daemon/...`
#                   runs the same without root or a VM
#   make lint       gofmt, go vet and staticcheck
#   make test       what CI runs (with CI=true): lint, unit, host-kernel, VM
#                   and cluster tests, installing what they need first
#   make cluster    a cluster of VMs running ipvsplane, and a shell in it
#
# PKGS= narrows test-unit, test-host and test-vm (make test-vm
# PKGS=./ipvs/...); KERNEL= picks test-vm's kernel. This file holds the
# targets above and the builds they share; the others and their knobs are
# in mk/: kernels.mk (other kernels, vmtest's own test, fuzzing),
# cluster.mk (clusters, conformance, takeover, migration, tenant tests),
# bench.mk (benchmarks, soak, the differential test against kube-proxy),
# release.mk (the image and a release).
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

# The library's packages that build on every GOOS lint checks on darwin:
# not the dataplane's (google/nftables builds on Linux only), so not the
# planner's tests either.
PORTABLE_PKGS = ./ipvs/... ./ipset/... ./conntrack/... ./dummy/... ./linkaddr/... ./inet/... ./compat/... \
  $(filter-out %/internal/planner,$(shell $(GO) list -e ./internal/... 2>/dev/null)) \
  ./dataplane/model/... ./examples/ipvs ./examples/ipset ./examples/conntrack ./examples/dummy

RACE := $(shell $(GO) env CGO_ENABLED | grep -q 1 && echo -race)

.PHONY: help test test-unit test-host test-vm lint demo deps deps-vm deps-node vm-kernel clean

# help lists each file's targets with their descriptions (the "## " text
# after a target's prerequisites).
.DEFAULT_GOAL := help
help: ## this list
	@for f in $(MAKEFILE_LIST); do \
	  echo "$$f:"; \
	  sed -n 's/^\([a-z][a-z0-9-]*\):[^=]*## \(.*\)$$/\1\t\2/p' $$f | awk -F'\t' '{printf "  %-19s %s\n", $$1, $$2}'; \
	done

# The README's demo: the daemon on example manifests in the VM, real
# requests through a cluster IP, a node port and a load balancer, then
# ipvsplane status and the IPVS table. It is daemon/cmd/ipvsplane's TestDemo,
# which make test-vm runs too.
demo: deps-vm $(VMTEST) vm-kernel ## the daemon on example manifests in a VM, with real traffic
	cd daemon/cmd/ipvsplane && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/ipvsplane-vm.test .
	cd daemon/cmd/ipvsplane && VMTEST_TIMEOUT=10m $(VMTEST) $(BIN)/ipvsplane-vm.test -test.run '^TestDemo$$'

# make test and make demo install what they need first (hack/install-deps:
# Debian packages, the VM's kernel, and for the tests the Kubernetes
# programs, the cluster node's runtime and its images); nothing is fetched
# again once there.
test: deps-node lint test-unit test-host test-vm test-vmtest test-kernels test-cluster ## what CI runs: lint, then unit, host-kernel, VM, kernel and cluster tests

deps: ## install what the tests need (Debian packages, kernels, Kubernetes programs)
	@hack/install-deps

deps-vm:
	@hack/install-deps --no-kube

deps-node:
	@hack/install-deps --node

# Each test target runs go test -json and ends, when something failed,
# with what did in a few lines (hack/testfailures, which prints the events
# as go test -v's text), its whole output kept in $(BIN)/TARGET.log: CI
# shows the tail of make test's output only; each ends with how long it
# took ("test-vm: 1105 s"). A recipe pipes its output (2>&1, under set -o
# pipefail) into TEST_LOG.
#
# The test targets run go test with -vet=off: lint, which make test runs
# first, vets every package under every build tag with all of vet's
# checks, and go test's own subset of them, keyed apart in the build
# cache, cost minutes more from an empty one.
TESTFAILURES = mkdir -p $(BIN) && $(GO) run ./hack/testfailures
TEST_LOG     = { $(TESTFAILURES) -name $@ -log $(BIN)/$@.log; }

# -timeout: the root package's TestDaemonInstallsAtVERSION builds the
# daemon and the clientset example from a module proxy, Kubernetes'
# packages and all: minutes from a cold build cache beside the other
# packages' tests, past go test's default 10 on a loaded machine.
# It prints what go test without -v prints; $(BIN)/test-unit.log has all.
test-unit: ## unit tests of every package (with -race where cgo is on)
	@set -o pipefail; { echo "$(GO) test -vet=off -json $(RACE) -timeout 25m $(PKGS)"; $(GO) test -vet=off -json $(RACE) -timeout 25m $(PKGS) && \
	  if [ "$(PKGS)" = "$(ALL)" ]; then echo "cd hack/images && GOWORK=off $(GO) test -vet=off -json $(RACE) ./..."; \
	  cd hack/images && GOWORK=off $(GO) test -vet=off -json $(RACE) ./...; fi; } 2>&1 | { $(TESTFAILURES) -brief -name $@ -log $(BIN)/$@.log; }

test-host: ## tests against this machine's kernel (root: ipset, conntrack, nftables)
	@pkgs="$$(hack/pkgs-with-tag hosttest $(PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "test-host: no packages with host-kernel tests in $(PKGS)"; exit 0; fi; \
	echo $(GO) test -vet=off $(RACE) -count=1 -json -tags hosttest $$pkgs; \
	set -o pipefail; $(GO) test -vet=off $(RACE) -count=1 -json -tags hosttest $$pkgs 2>&1 | $(TEST_LOG)

# Test binaries are static (CGO_ENABLED=0, so no race detector) and run in
# the VM one package at a time (-p 1). VM_TESTS is the command, for the
# packages in $$pkgs and the kernel in VMTEST_KERNEL.
VM_TESTS = CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -p 1 -timeout 40m -tags vmtest -exec $(VMTEST) $$pkgs

# test-vm runs in two lanes at once when its packages include VM_LANE (the
# e2e package, two thirds of test-vm's time) and others: VM_LANE's
# packages in one, the rest in the other, each one package at a time. A
# guest keeps about one of the two cores busy (vmtest's "qemu used" line:
# 25% to 64% of its two vCPUs), so the lanes end in about the e2e
# package's time instead of after both. Each lane's events are held in
# $(BIN)/test-vm-lane1.json and -lane2.json (tail -f them meanwhile) and
# printed when both have ended. Other package lists run in one lane,
# streamed.
VM_LANE ?= github.com/ipvsplane/ipvsplane/daemon/e2e
test-vm: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## tests in a VM of the kernel KERNEL (IPVS, dummy), the e2e package beside the rest
	@pkgs="$$(hack/pkgs-with-tag vmtest $(PKGS))"; \
	if [ -z "$$pkgs" ]; then echo "test-vm: no packages with VM tests in $(PKGS)"; exit 0; fi; \
	lane1="$$(printf '%s\n' $$pkgs | grep -xF $(foreach p,$(VM_LANE),-e $(p)) || true)"; \
	lane2="$$(printf '%s\n' $$pkgs | grep -vxF $(foreach p,$(VM_LANE),-e $(p)) || true)"; \
	if [ -z "$$lane1" ] || [ -z "$$lane2" ]; then echo "$(VM_TESTS)"; set -o pipefail; $(VM_TESTS) 2>&1 | $(TEST_LOG); exit; fi; \
	mkdir -p $(BIN); start=$$(date +%s); jobs=; \
	for lane in 1 2; do \
	  if [ $$lane = 1 ]; then pkgs="$$lane1"; else pkgs="$$lane2"; fi; \
	  echo "lane $$lane: $(VM_TESTS)" | tr '\n' ' '; echo; \
	  ( $(VM_TESTS) > $(BIN)/test-vm-lane$$lane.json 2>&1 ) & jobs="$$jobs $$!"; \
	done; \
	rc=0; for j in $$jobs; do wait $$j || rc=1; done; \
	cat $(BIN)/test-vm-lane1.json $(BIN)/test-vm-lane2.json | { $(TESTFAILURES) -log $(BIN)/test-vm.log; }; \
	echo "test-vm: $$(( $$(date +%s) - start )) s"; exit $$rc

lint: ## gofmt, go vet, staticcheck; each module on its own; the library off Linux
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(ALL)
	$(GO) vet -tags hosttest $(ALL)
	$(GO) vet -tags vmtest $(ALL)
	$(GO) vet -tags clustertest ./daemon/e2e/cluster/...
	$(GO) vet -tags vmharness ./daemon/internal/testing/vmtest/
	cd hack/images && GOWORK=off $(GO) vet ./...
	$(GO) tool staticcheck $(ALL)
	$(GO) tool staticcheck -tags hosttest $(ALL)
	$(GO) tool staticcheck -tags vmtest $(ALL)
	$(GO) tool staticcheck -tags clustertest ./daemon/e2e/cluster/...
	@# Each module on its own, as importers and go install see it: the
	@# library with its go.mod alone (its go line, its requirements: in the
	@# workspace a test could import what only the daemon requires); what
	@# an importer of the kernel packages gets is the root package's
	@# TestKernelPackagesImporterModules (test-unit). The daemon's
	@# go.mod requires the library at VERSION, which no proxy has before
	@# the tag: TestDaemonInstallsAtVERSION (test-unit) serves both modules
	@# from the tree through a module proxy and checks it there.
	GOWORK=off $(GO) mod tidy -diff
	GOWORK=off $(GO) vet ./...
	GOWORK=off $(GO) vet -tags hosttest ./...
	GOWORK=off $(GO) vet -tags vmtest ./...
	@# The library off Linux: its kernel packages and their fakes build
	@# on macOS, so that unit tests on the fakes compile there (dialing
	@# fails as Linux only). The dataplane needs google/nftables, which
	@# builds on Linux only.
	GOOS=darwin GOWORK=off $(GO) build $(PORTABLE_PKGS)
	GOOS=darwin GOWORK=off $(GO) vet $(PORTABLE_PKGS)

# The e2e tests run the real program; go build only relinks what changed.
# make bin/ipvsplane builds it alone. Its version (ipvsplane version,
# --version, the start-up line, ipvsplane_build_info) is VERSION and its
# commit REVISION, set at link time.
.PHONY: $(BIN)/ipvsplane bin/ipvsplane
bin/ipvsplane: $(BIN)/ipvsplane
$(BIN)/ipvsplane:
	CGO_ENABLED=0 $(GO) build -ldflags '$(VERSION_LDFLAGS)' -o $@ ./daemon/cmd/ipvsplane

# vmtest serves its guest's control plane (daemon/internal/testing/controlplane)
# and more besides its own directory, so go build, which relinks only what
# changed, decides whether it is current: a copy older than the handler a
# test calls answered 404.
.PHONY: $(VMTEST)
$(VMTEST):
	CGO_ENABLED=0 $(GO) build -o $@ ./daemon/internal/testing/vmtest

vm-kernel:
	@hack/fetch-vm-kernel "$(IPVSPLANE_CACHE)/kernel" $(KERNEL)

clean: ## remove bin/ and dist/
	rm -rf $(BIN) dist

include mk/kernels.mk mk/cluster.mk mk/bench.mk mk/release.mk
