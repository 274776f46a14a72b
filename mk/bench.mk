# Included by the Makefile: benchmarks, the soak and the differential
# test against kube-proxy.
.PHONY: bench bench-field bench-dataplane soak difftest

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
bench: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## benchmarks beside their baselines, as ratios
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
bench-field: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## the field shapes beside kube-proxy's modes (hours)
	@set -e; for shape in $(FIELD_SHAPES); do \
	  $(MAKE) --no-print-directory bench PKGS=./daemon/e2e/... BENCH=BenchmarkProxies BENCH_SERVICES=$${shape%x*} \
	    BENCH_ENDPOINTS=$${shape#*x} BENCH_SYNC_LIMIT=$(BENCH_SYNC_LIMIT) BENCH_CHURN=$(BENCH_CHURN) BENCH_TIMEOUT=$(BENCH_TIMEOUT) VMTEST_MEM=$(VMTEST_MEM); \
	done

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
soak: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## the churn soak at full size
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
bench-dataplane: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## packets through each proxy: connections a second, latency
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
difftest: $(VMTEST) $(BIN)/ipvsplane vm-kernel ## kernel state and conntrack against kube-proxy on new random seeds
	cd daemon/e2e && CGO_ENABLED=0 $(GO) test -c -tags vmtest -o $(BIN)/e2e-vm.test .
	@first=$$(date +%s); seeds=$${DIFFTEST_SEEDS:-$$(seq -s, $$first $$((first + $(SEEDS) - 1)))}; \
	n=$$(echo "$$seeds" | tr , '\n' | wc -l); echo "difftest: seeds $$seeds"; \
	cd daemon/e2e && IPVSPLANE_DIFFTEST_SEEDS=$$seeds IPVSPLANE_DIFFTEST_SERVICES=$(DIFFTEST_SERVICES) \
	  $(if $(NEIGHBOURS),IPVSPLANE_DIFFTEST_NEIGHBOURS=$(NEIGHBOURS)) \
	  $(if $(CASE),IPVSPLANE_DIFFTEST_CASE=$(abspath $(CASE)) VMTEST_TOOLS="$$VMTEST_TOOLS $(abspath $(CASE))") \
	  VMTEST_TIMEOUT=$$((n * 20 + 15))m $(VMTEST) $(BIN)/e2e-vm.test -test.run '^TestKubeProxy(Conntrack)?Differential$$' -test.v -test.timeout $$((n * 20 + 10))m
