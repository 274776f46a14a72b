# Included by the Makefile: clusters of VMs and the tests run on them.
.PHONY: cluster conformance test-cluster test-cluster-nodes test-takeover test-migration test-tenant

# A cluster of NODES nodes (default one), each a VM (daemon/internal/testing/vmtest
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
cluster: deps-node image $(VMTEST) vm-kernel ## NODES VMs with PROXY, then CMD (a shell) with KUBECONFIG set
	$(BUILD_GINKGO)
	$(NODE) -- $(or $(CMD),bash)

# Upstream's conformance specs for Services, DNS and networking (e2e.test
# from the pinned k8s.io/kubernetes) against that cluster; FOCUS and SKIP
# narrow them (hack/conformance). vmtest plays the cloud's load balancer
# (-load-balancers) for the [Feature:LoadBalancer] specs.
conformance: deps-node image $(VMTEST) vm-kernel ## upstream's Services, DNS and networking specs on that cluster
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
test-cluster: deps-node image $(VMTEST) vm-kernel ## two nodes from the chart: the cluster tests and a slice of conformance
	set -o pipefail; $(NODE) -install helm -- sh -c 'CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -timeout 40m -tags clustertest -skip "TestTakeoverFromKubeProxy|TestKubeadmMigration|TestTenantCannotHarmOthers|TestTwoNodes." ./daemon/e2e/cluster/ && FOCUS="$(CONFORMANCE_SLICE)|$(TWO_NODE_SPEC)" hack/conformance' \
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
test-cluster-nodes: deps-node image $(VMTEST) vm-kernel ## the two-node tests
	set -o pipefail; $(NODE) -- sh -c 'CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -timeout 40m -tags clustertest -run TestTwoNodes ./daemon/e2e/cluster/ && FOCUS="$(TWO_NODE_SLICE)" hack/conformance' \
	  2>&1 | $(TEST_LOG)

# docs/migrating-from-kube-proxy.md in the cluster: kube-proxy serving
# pods in its iptables (kubeadm's default, which the cluster starts it in),
# nftables and IPVS modes in turn, deploy/ (with deploy/migration's files) taking the
# nodes over one by one and handing them back, under traffic from a client
# on every node (e2e/cluster's TestTakeoverFromKubeProxy); NODES=2 for two.
test-takeover: PROXY = kube-proxy
test-takeover: KUBE_PROXY_MODE = iptables
test-takeover: deps-node image $(VMTEST) vm-kernel ## taking nodes over from kube-proxy's three modes, under traffic
	set -o pipefail; $(NODE) -- env CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -timeout 150m -tags clustertest -run TestTakeoverFromKubeProxy ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)

# docs/kubeadm.md's migration, its commands read from the docs and run
# (e2e/cluster's TestKubeadmMigration): a cluster whose kube-proxy the
# pinned kubeadm installed (vmtest -proxy kubeadm), the image made by
# `make image` and imported on each node as
# docs/migrating-from-kube-proxy.md says, then the nodes moved one by one
# under traffic. The nodes boot without the image: importing it is the
# docs' step.
test-migration: NODES = 2
test-migration: deps-node $(VMTEST) vm-kernel ## docs/kubeadm.md's migration, its commands read from the docs
	set -o pipefail; $(VMTEST) -node -nodes $(NODES) -proxy kubeadm -- env CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -timeout 40m -tags clustertest -run 'TestKubeadmMigration|TestKubeadmDocBlocks|TestDocSteps' ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)

# A namespace tenant's hostile input against two nodes (e2e/cluster's
# TestTenantCannotHarmOthers): another namespace's Service, the API
# server's and DNS's cluster IPs answering throughout, across a restart of
# every proxy; no proxy restarts. About 10 minutes, 2 to 3 of them the
# test; outside make test, whose CI run is already near its 45-minute
# budget (docs/security.md records its runs).
test-tenant: NODES = 2
test-tenant: deps-node image $(VMTEST) vm-kernel ## a namespace tenant's hostile input on two nodes
	set -o pipefail; $(NODE) -install helm -- env CGO_ENABLED=0 $(GO) test -vet=off -count=1 -json -timeout 40m -tags clustertest -run TestTenantCannotHarmOthers ./daemon/e2e/cluster/ \
	  2>&1 | $(TEST_LOG)
