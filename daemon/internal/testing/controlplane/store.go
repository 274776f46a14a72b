package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// etcdPrefix is --etcd-prefix's default, under which the API server keeps
// its objects (see storedPrefix).
const etcdPrefix = "/registry"

// etcdMaxTxnOps is etcd's default --max-txn-ops: the most operations one
// transaction may hold.
const etcdMaxTxnOps = 128

// StoreServices writes services of namespace into the API server's etcd
// as the API server would store them, without its create path; clients
// list and watch them through the API server as any others. Each must
// carry its cluster IP (in the API server's service ranges) and, if it has any, its node ports.
// Its cluster IP's IPAddress is stored beside it, as the ClusterIP
// allocator records one; its node ports are recorded by the API server's
// repair loop afterwards.
//
// Each service is written in a transaction of its own (with its
// IPAddress), so that each has a revision of its own, as created through
// the API server. Written 64 to a transaction, v1.37's ClusterIP repair
// loop never saw the last services of some (88 of 1,000 in a run of
// 2026-11-29, the last 38 and 50 of two transactions) and never recorded
// their addresses, or, stored with them, dropped them (1,912 of 44,000
// gone).
//
// It exists for benchmarks that load tens of thousands of services: the
// ClusterIP allocator of v1.37 counts every allocated address after each
// allocation, so creating N services through the API server costs O(N²).
// If one of the services or addresses exists already, none is written.
func (cp *ControlPlane) StoreServices(ctx context.Context, namespace string, svcs []v1.Service) error {
	ranges := cp.serviceRanges()
	servicesPrefix, _ := storedPrefix("services")
	addressesPrefix := etcdPrefix + "/ipaddresses/"
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	var puts []etcdOp
	for i := range svcs {
		s := svcs[i]
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(ip) }) {
			return fmt.Errorf("service %s/%s: spec.clusterIP %q: not an address in the API server's service ranges %v", namespace, s.Name, s.Spec.ClusterIP, ranges)
		}
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		s.Namespace, s.UID, s.CreationTimestamp = namespace, uuid.NewUUID(), now
		s.Spec.ClusterIPs = []string{ip.String()}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
		policy := v1.IPFamilyPolicySingleStack
		s.Spec.IPFamilyPolicy = &policy
		value, err := json.Marshal(&s)
		if err != nil {
			return fmt.Errorf("service %s/%s: %w", namespace, s.Name, err)
		}
		puts = append(puts, etcdOp{key: servicesPrefix + namespace + "/" + s.Name, value: value})
		if value, err = json.Marshal(ipAddressOf(&s, ip, now)); err != nil {
			return fmt.Errorf("service %s/%s's IPAddress: %w", namespace, s.Name, err)
		}
		puts = append(puts, etcdOp{key: addressesPrefix + ip.String(), value: value})
	}
	if err := cp.etcdAbsent(ctx, puts); err != nil {
		return fmt.Errorf("services of namespace %s: %w", namespace, err)
	}
	err := testutil.Parallel(ctx, 8, 0, len(puts)/2, func(ctx context.Context, i int) error {
		return cp.etcdTxn(ctx, puts[2*i:2*i+2], true)
	})
	if err != nil {
		return fmt.Errorf("services of namespace %s: %w", namespace, err)
	}
	return nil
}

// etcdAbsent checks that none of ops' keys exists.
func (cp *ControlPlane) etcdAbsent(ctx context.Context, ops []etcdOp) error {
	for len(ops) > 0 {
		n := min(len(ops), etcdMaxTxnOps)
		if err := cp.etcdTxn(ctx, ops[:n], false); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// ipAddressOf is the IPAddress the ClusterIP allocator records for svc's
// cluster IP ip.
func ipAddressOf(svc *v1.Service, ip netip.Addr, now metav1.Time) *networkingv1.IPAddress {
	family := v1.IPv4Protocol
	if ip.Is6() {
		family = v1.IPv6Protocol
	}
	return &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ip.String(), UID: uuid.NewUUID(), CreationTimestamp: now,
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(family),
				networkingv1.LabelManagedBy:       "ipallocator.k8s.io",
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Group: "", Resource: "services", Namespace: svc.Namespace, Name: svc.Name,
		}},
	}
}

// DeleteStored deletes every object of resource ("services" or
// "endpointslices") in namespace from etcd at once, the API server's
// delete path aside: creating services through it costs O(N) each in
// v1.37, so does deleting them, and a DeleteCollection of tens of
// thousands of objects outlasts its request timeout. Clients watching see
// them deleted; the repair loops release the services' addresses and
// ports.
func (cp *ControlPlane) DeleteStored(ctx context.Context, resource, namespace string) error {
	prefix, ok := storedPrefix(resource)
	if !ok {
		return fmt.Errorf("control plane: deleting %s of namespace %s: not one of services, endpointslices", resource, namespace)
	}
	prefix += namespace + "/"
	req := map[string]string{"key": b64(prefix), "range_end": b64(prefixEnd(prefix))}
	if err := cp.etcdCall(ctx, "/v3/kv/deleterange", req, nil); err != nil {
		return fmt.Errorf("%s of namespace %s: %w", resource, namespace, err)
	}
	return nil
}

// storedPrefix is where the API server keeps resource, a namespace's
// objects under the namespace's name: a Service or an EndpointSlice.
func storedPrefix(resource string) (string, bool) {
	switch resource {
	case "services":
		return etcdPrefix + "/services/specs/", true
	case "endpointslices":
		return etcdPrefix + "/endpointslices/", true
	}
	return "", false
}

// serviceRanges is what the API server's last --service-cluster-ip-range
// (later flags win) holds.
func (cp *ControlPlane) serviceRanges() []netip.Prefix {
	var ranges []netip.Prefix
	for _, arg := range cp.apiArgs {
		value, ok := strings.CutPrefix(arg, "--service-cluster-ip-range=")
		if !ok {
			continue
		}
		ranges = ranges[:0]
		for _, r := range strings.Split(value, ",") {
			if p, err := netip.ParsePrefix(r); err == nil {
				ranges = append(ranges, p)
			}
		}
	}
	return ranges
}

type etcdOp struct {
	key   string
	value []byte
}

// etcdTxn runs a transaction that succeeds if none of ops' keys exists,
// and then puts them if put is set.
func (cp *ControlPlane) etcdTxn(ctx context.Context, ops []etcdOp, put bool) error {
	type compare struct {
		Key     string `json:"key"`
		Target  string `json:"target"`
		Result  string `json:"result"`
		Version string `json:"version"`
	}
	type putOp struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type requestOp struct {
		RequestPut putOp `json:"request_put"`
	}
	var txn struct {
		Compare []compare   `json:"compare"`
		Success []requestOp `json:"success"`
	}
	for _, op := range ops {
		txn.Compare = append(txn.Compare, compare{Key: b64(op.key), Target: "VERSION", Result: "EQUAL", Version: "0"})
		if put {
			txn.Success = append(txn.Success, requestOp{RequestPut: putOp{Key: b64(op.key), Value: base64.StdEncoding.EncodeToString(op.value)}})
		}
	}
	var resp struct {
		Succeeded bool `json:"succeeded"`
	}
	if err := cp.etcdCall(ctx, "/v3/kv/txn", txn, &resp); err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("one of %s..%s exists already", ops[0].key, ops[len(ops)-1].key)
	}
	return nil
}

// etcdCall posts req as JSON to etcd's gRPC gateway and decodes its answer
// into resp (when not nil).
func (cp *ControlPlane) etcdCall(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	answer, err := exchange(ctx, http.MethodPost, cp.etcdURL+path, "application/json", body)
	if err == nil && resp != nil {
		err = json.Unmarshal(answer, resp)
	}
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	return nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// prefixEnd is the end of the key range that holds every key starting
// with prefix (etcd's range_end): prefix with its last byte raised.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	b[len(b)-1]++
	return string(b)
}
