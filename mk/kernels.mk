# Included by the Makefile: the kernel packages on the other kernels,
# vmtest's own test, fuzzing.
.PHONY: test-vmtest test-kernels fuzz

# The other kernels test-kernels runs the kernel packages' VM tests on
# (with moby/ipvs reading IPVS tables too, from daemon/compare).
OTHER_KERNELS ?= 5.10 6.12
KERNEL_PKGS   ?= ./ipvs/... ./ipset/... ./conntrack/... ./dummy/... ./dataplane/... ./daemon/compare/ipvs/...

# vmtest's own tests of a guest that never ends and one that falls silent:
# five guests of one vCPU, two at a time (71 s in all on an idle machine), to see
# vmtest stop the first at its limit and on SIGTERM, and send the second
# an NMI each of the three times it is booted.
test-vmtest: vm-kernel ## vmtest stopping a guest that never ends or falls silent, and naming it
	@echo "$(GO) test -vet=off -count=1 -json -tags vmharness -run 'TestStuckGuestNamesItself|TestSilentGuestGetsAnNMI' ./daemon/internal/testing/vmtest"; \
	set -o pipefail; $(GO) test -vet=off -count=1 -json -tags vmharness -run 'TestStuckGuestNamesItself|TestSilentGuestGetsAnNMI' ./daemon/internal/testing/vmtest 2>&1 | $(TEST_LOG)

# The kernel packages' VM tests on each of OTHER_KERNELS, all at once, each
# in guests of one vCPU (VMTEST_CPUS): their tests run one at a time, so a
# guest of two vCPUs keeps one of these two cores idle, and the kernels
# one after the other took twice as long (test-vm's 6.1 keeps two vCPUs,
# for the SMP paths). Each kernel's events are held in
# $(BIN)/test-kernels-<kernel>.json and printed as text when it ends,
# timed (the text kept in test-kernels-<kernel>.log).
test-kernels: $(VMTEST) $(BIN)/ipvsplane ## the kernel packages' VM tests on OTHER_KERNELS, at once
	@for k in $(OTHER_KERNELS); do $(MAKE) --no-print-directory -s vm-kernel KERNEL=$$k || exit 1; done
	@pkgs="$$(hack/pkgs-with-tag vmtest $(KERNEL_PKGS))"; jobs=; \
	for k in $(OTHER_KERNELS); do \
	  ( start=$$(date +%s); \
	    VMTEST_KERNEL=$$k VMTEST_CPUS=$${VMTEST_CPUS:-1} $(VM_TESTS) > $(BIN)/test-kernels-$$k.json 2>&1; rc=$$?; \
	    $(TESTFAILURES) -log $(BIN)/test-kernels-$$k.log < $(BIN)/test-kernels-$$k.json; \
	    echo "test-kernels: kernel $$k $$([ $$rc = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - start )) s"; \
	    exit $$rc ) & jobs="$$jobs $$!"; \
	done; \
	rc=0; for j in $$jobs; do wait $$j || rc=1; done; \
	[ $$rc = 0 ] || for k in $(OTHER_KERNELS); do echo "test-kernels: kernel $$k"; \
	  $(TESTFAILURES) -summary-only < $(BIN)/test-kernels-$$k.json; done; exit $$rc

# Every fuzz target for FUZZTIME (default 30s) each; make fuzz PKGS=./ipvs/...
fuzz: ## every fuzz target for FUZZTIME each
	hack/fuzz $(PKGS)
