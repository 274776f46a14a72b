package watcher

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kind names an input the first sync waits for.
type Kind int

// The inputs that must have been listed once before the first sync.
const (
	Services Kind = iota
	EndpointSlices
)

// key names a namespaced object.
type key struct{ namespace, name string }

func compareKeys(a, b key) int {
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

// TrackerConfig configures a [Tracker].
type TrackerConfig struct {
	// Node holds the node's name and settings. A Node object of that name
	// adds its IPs and zone (see [ConvertNode]).
	Node model.Node
	// OnChange, if set, is called after every change that a sync would
	// program and when an input becomes synced; typically it asks the
	// runner for a sync ([Runner.Request]). families are the IP families
	// the change concerns, as kube-proxy queues a sync of each family's
	// proxier: a Service or the Node concerns both, an EndpointSlice its
	// address type's. They are all false for what kube-proxy does not
	// queue: an input listed ([Tracker.MarkSynced]), the node's interface
	// addresses ([Tracker.SetAddresses]), the wait for the Node given up
	// ([Tracker.StopWaitingForNode]). It is called without the tracker's
	// lock held.
	OnChange func(families inet.PerFamily[bool])
	// OnNode, if set, is called with this node's Node object each time
	// it arrives (valid or not), and with nil when it is deleted, for
	// what the Node says beyond the dataplane's settings (such as a
	// pending deletion). It is called without the tracker's lock held.
	OnNode func(*v1.Node)
	// PodCIDRsFromNode tells pods apart by this node's pod ranges, the
	// first of each family in its Node object's spec.podCIDRs, as
	// kube-proxy's detectLocalMode NodeCIDR does: they replace
	// Node.ClusterCIDRs, and the tracker is not synced until a Node with
	// them is read. A deleted Node leaves its ranges in place.
	PodCIDRsFromNode bool
	// WaitForNodeIPs holds the first sync (and every prefill) until a
	// Node of this node's name with IPs is read, or StopWaitingForNode
	// is called, as kube-proxy waits for the Node before it proxies: its
	// primary IPs choose node-port addresses, its zone topology hints.
	WaitForNodeIPs bool
	// Now is the clock that stamps when a change arrived
	// (Update.Arrivals); time.Now if nil.
	Now func() time.Time
}

// Tracker keeps the services, endpoint slices and node that sources feed
// it, and knows which service ports changed since the last [Tracker.Sync].
// Its methods are safe for concurrent use.
type Tracker struct {
	onChange         func(inet.PerFamily[bool])
	onNode           func(*v1.Node)
	podCIDRsFromNode bool
	// waitingForNode is set while the first sync waits for the Node's
	// IPs (TrackerConfig.WaitForNodeIPs).
	waitingForNode bool

	mu       sync.Mutex
	base     model.Node
	node     *model.Node
	services map[key][]model.ServicePort
	// slices are keyed by the slice; bySvc finds a service's slices, in
	// slice-name order (a list, not a map: most services have one).
	slices map[key]*sliceInfo
	bySvc  map[key][]*sliceInfo
	// synced holds the joined service ports as of the last sync; order
	// holds its keys sorted and ports counts them, so a sync after a small
	// change does not sort or grow anything.
	synced    map[key][]model.ServicePort
	order     []key
	ports     int
	svcDirty  map[key]bool
	epDirty   map[key]bool
	nodeDirty bool
	// triggers are the trigger times of the pending endpoint changes, by
	// service and family.
	triggers map[key]inet.PerFamily[[]time.Time]
	// arrived is when the first pending change of each service arrived,
	// once the inputs are synced (the listing's objects are not changes).
	arrived     map[key]time.Time
	now         func() time.Time
	inputSynced [2]bool
}

// NewTracker returns an empty tracker.
func NewTracker(cfg TrackerConfig) *Tracker {
	t := &Tracker{
		onChange:         cfg.OnChange,
		onNode:           cfg.OnNode,
		podCIDRsFromNode: cfg.PodCIDRsFromNode,
		waitingForNode:   cfg.WaitForNodeIPs,
		base:             cfg.Node,
		services:         map[key][]model.ServicePort{},
		slices:           map[key]*sliceInfo{},
		bySvc:            map[key][]*sliceInfo{},
		synced:           map[key][]model.ServicePort{},
		svcDirty:         map[key]bool{},
		epDirty:          map[key]bool{},
		triggers:         map[key]inet.PerFamily[[]time.Time]{},
		arrived:          map[key]time.Time{},
		now:              cfg.Now,
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// notify calls OnChange with the families the change concerns, when
// changed.
func (t *Tracker) notify(changed bool, families inet.PerFamily[bool]) {
	if changed && t.onChange != nil {
		t.onChange(families)
	}
}

// only returns the families of a change that concerns family f alone.
func only(f inet.Family) inet.PerFamily[bool] {
	var families inet.PerFamily[bool]
	*families.Of(f) = true
	return families
}

// bothFamilies are those of a change to a Service or the Node;
// noFamilies, those of a change kube-proxy does not queue.
var (
	bothFamilies = inet.PerFamily[bool]{true, true}
	noFamilies   inet.PerFamily[bool]
)

// SetService adds or updates a service. An invalid service is removed,
// and the error ([*InvalidError]) says why.
func (t *Tracker) SetService(svc *v1.Service) error {
	ports, err := convertService(svc)
	k := key{svc.Namespace, svc.Name}
	t.mu.Lock()
	changed := t.setServiceLocked(k, ports)
	t.mu.Unlock()
	t.notify(changed, bothFamilies)
	return err
}

// DeleteService removes a service.
func (t *Tracker) DeleteService(namespace, name string) {
	t.mu.Lock()
	changed := t.setServiceLocked(key{namespace, name}, nil)
	t.mu.Unlock()
	t.notify(changed, bothFamilies)
}

func (t *Tracker) setServiceLocked(k key, ports []model.ServicePort) bool {
	old, ok := t.services[k]
	if ports == nil {
		if !ok {
			return false
		}
		delete(t.services, k)
	} else {
		if ok && reflect.DeepEqual(old, ports) {
			return false
		}
		t.services[k] = ports
	}
	t.markDirty(t.svcDirty, k)
	return true
}

// markDirty marks service k's services or endpoints changed, noting when
// its first pending change arrived.
func (t *Tracker) markDirty(dirty map[key]bool, k key) {
	dirty[k] = true
	if _, ok := t.arrived[k]; !ok && t.inputSynced[Services] && t.inputSynced[EndpointSlices] {
		t.arrived[k] = t.now()
	}
}

// SetEndpointSlice adds or updates an EndpointSlice; trigger is when the
// change was triggered (zero if unknown), reported by the sync that
// programs it. An invalid slice is removed, and the error says why.
func (t *Tracker) SetEndpointSlice(s *discoveryv1.EndpointSlice, trigger time.Time) error {
	info, err := convertSlice(s)
	t.mu.Lock()
	changed := t.setSliceLocked(key{s.Namespace, s.Name}, info, trigger)
	t.mu.Unlock()
	t.notify(changed, only(sliceFamily(s.AddressType)))
	return err
}

// DeleteEndpointSlice removes an EndpointSlice. As kube-proxy, it drops
// the trigger times of its service's pending changes and adds none: a
// deleted slice's trigger time is that of its last update, not of the
// deletion, so counting it would report the slice's age as latency.
func (t *Tracker) DeleteEndpointSlice(namespace, name string) {
	t.mu.Lock()
	var families inet.PerFamily[bool]
	if old := t.slices[key{namespace, name}]; old != nil {
		families = only(old.family)
	}
	changed := t.setSliceLocked(key{namespace, name}, nil, time.Time{})
	t.mu.Unlock()
	t.notify(changed, families)
}

func (t *Tracker) setSliceLocked(k key, info *sliceInfo, trigger time.Time) bool {
	old := t.slices[k]
	if reflect.DeepEqual(old, info) {
		return false
	}
	if old != nil {
		svc := key{k.namespace, old.service}
		if i, ok := slices.BinarySearchFunc(t.bySvc[svc], k.name, compareSliceName); ok {
			t.bySvc[svc] = slices.Delete(t.bySvc[svc], i, i+1)
		}
		if len(t.bySvc[svc]) == 0 {
			delete(t.bySvc, svc)
		}
		delete(t.slices, k)
		t.markDirty(t.epDirty, svc)
	}
	if info != nil {
		svc := key{k.namespace, info.service}
		i, _ := slices.BinarySearchFunc(t.bySvc[svc], k.name, compareSliceName)
		t.bySvc[svc] = slices.Insert(t.bySvc[svc], i, info)
		t.slices[k] = info
		t.markDirty(t.epDirty, svc)
	}
	switch {
	case info == nil:
		delete(t.triggers, key{k.namespace, old.service})
	case !trigger.IsZero():
		svc := key{k.namespace, info.service}
		times := t.triggers[svc]
		of := times.Of(info.family)
		*of = append(*of, trigger)
		t.triggers[svc] = times
	}
	return true
}

// SetNode takes this node's Node object; objects of other nodes are
// ignored. An address that cannot be read is left out, and the error
// names it; on another error (a bad pod range) the node keeps its
// previous addresses and zone.
func (t *Tracker) SetNode(n *v1.Node) error {
	if n.Name != t.base.Name {
		return nil
	}
	if t.onNode != nil {
		t.onNode(n)
	}
	// Under the lock: SetAddresses changes the base.
	t.mu.Lock()
	node, leftOut := ConvertNode(t.base, n)
	if t.podCIDRsFromNode {
		var err error
		if node.ClusterCIDRs, err = podCIDRs(n); err != nil {
			t.mu.Unlock()
			return err
		}
	}
	changed := t.node == nil || !reflect.DeepEqual(*t.node, node)
	if changed {
		t.node, t.nodeDirty = &node, true
	}
	if len(node.NodeIPs) > 0 {
		t.waitingForNode = false
	}
	t.mu.Unlock()
	t.notify(changed, bothFamilies)
	return leftOut
}

// SetAddresses replaces the node's own addresses (the interfaces'
// addresses, from which node ports are served), for a caller that reads
// them again as kube-proxy does at every sync.
func (t *Tracker) SetAddresses(addrs []netip.Addr) {
	t.mu.Lock()
	changed := !slices.Equal(t.base.Addresses, addrs)
	if changed {
		t.base.Addresses = slices.Clone(addrs)
		if t.node != nil {
			node := *t.node
			node.Addresses = t.base.Addresses
			t.node = &node
		}
		t.nodeDirty = true
	}
	t.mu.Unlock()
	t.notify(changed, noFamilies)
}

// DeleteNode forgets this node's Node object: the node's IPs and zone are
// those of the configuration again. Other names are ignored.
func (t *Tracker) DeleteNode(name string) {
	if name != t.base.Name {
		return
	}
	if t.onNode != nil {
		t.onNode(nil)
	}
	t.mu.Lock()
	changed := t.node != nil
	if changed && t.podCIDRsFromNode && len(t.node.ClusterCIDRs) > 0 {
		// kube-proxy, restarted when its Node goes, keeps the rules of
		// the pod ranges it had until it reads the Node again.
		node := t.base
		node.ClusterCIDRs = t.node.ClusterCIDRs
		t.node = &node
	} else {
		t.node = nil
	}
	t.nodeDirty = t.nodeDirty || changed
	t.mu.Unlock()
	t.notify(changed, bothFamilies)
}

// StopWaitingForNode lets the first sync go on without a Node with IPs,
// as kube-proxy does after 30 s: node ports then follow the node's
// addresses alone. It reports whether the tracker was still waiting.
func (t *Tracker) StopWaitingForNode() bool {
	t.mu.Lock()
	waiting := t.waitingForNode
	t.waitingForNode = false
	t.mu.Unlock()
	t.notify(waiting, noFamilies)
	return waiting
}

// MarkSynced records that an input has been listed completely once.
func (t *Tracker) MarkSynced(k Kind) {
	t.mu.Lock()
	changed := !t.inputSynced[k]
	t.inputSynced[k] = true
	t.mu.Unlock()
	t.notify(changed, noFamilies)
}

// Synced reports whether both Services and EndpointSlices have been
// listed once: before that a sync would remove services that are only
// not yet known. With PodCIDRsFromNode, the node's pod ranges must be
// known too.
func (t *Tracker) Synced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inputSynced[Services] && t.inputSynced[EndpointSlices] && t.nodeKnownLocked()
}

// NodeKnown reports whether the node's settings are known: always,
// unless PodCIDRsFromNode and no Node with pod ranges has been read yet,
// or WaitForNodeIPs and no Node with IPs has been read nor the wait
// stopped.
// Until then nothing can be programmed, not even what is listed so far.
func (t *Tracker) NodeKnown() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeKnownLocked()
}

func (t *Tracker) nodeKnownLocked() bool {
	if t.waitingForNode {
		return false
	}
	return !t.podCIDRsFromNode || (t.node != nil && len(t.node.ClusterCIDRs) > 0)
}

// Pending returns how many services have service changes and endpoint
// changes not yet synced (kube-proxy's service_changes_pending and
// endpoint_changes_pending).
func (t *Tracker) Pending() (services, endpoints int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.svcDirty), len(t.epDirty)
}

// Update is what a sync programs.
type Update struct {
	// State is the desired state: its Node always, its Services when
	// Whole. Its slices are shared with the tracker and must not be
	// modified.
	State model.State
	// Whole is true when State.Services holds every service port: from
	// Sync always, and from SyncChanges when NodeChanged, since a new
	// node goes to the dataplane with the whole state. A caller programs
	// the whole state when Whole, else Changes alone; it reads this
	// rather than work the choice out again.
	Whole bool
	// Changed lists the service ports added, changed or removed since
	// the previous sync, in name order.
	Changed []model.ServicePortName
	// Changes are the same service ports as the dataplane takes them:
	// each one's new version, or a nil Port for a removed one. The ports
	// are shared with the tracker and must not be modified.
	Changes []model.Change
	// ServicePorts is the number of service ports in the desired state.
	ServicePorts int
	// NodeChanged is true when the node's addresses or zone changed.
	NodeChanged bool
	// TriggerTimes are the trigger times of the endpoint changes in this
	// update, for the network-programming latency: those of IPv4
	// EndpointSlices, then those of IPv6 ones, as kube-proxy's proxier of
	// each family records its own.
	TriggerTimes inet.PerFamily[[]time.Time]
	// Arrivals are when the first change of each changed service in this
	// update reached the tracker (changes that arrived while the inputs
	// were being listed have none): the proxy's own part of the
	// programming latency, without the API server's and the
	// controllers'.
	Arrivals []time.Time
}

// Sync takes the changes since the previous Sync or SyncChanges and
// returns them with the whole desired state.
func (t *Tracker) Sync() *Update { return t.sync(true) }

// SyncChanges is Sync for a caller that holds the state of the previous
// sync: it leaves out the services that did not change, so its cost
// follows the number of changes, not the size of the cluster. When the
// node changed it returns the whole state all the same (Update.Whole).
func (t *Tracker) SyncChanges() *Update { return t.sync(false) }

func (t *Tracker) sync(whole bool) *Update {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The update is whole when the caller asks, or when the node changed:
	// decided here once, under the lock that takes the node's change.
	u := &Update{NodeChanged: t.nodeDirty, Whole: whole || t.nodeDirty}
	for _, f := range inet.Families() {
		all := u.TriggerTimes.Of(f)
		for _, times := range t.triggers {
			*all = append(*all, times.Get(f)...)
		}
		slices.SortFunc(*all, time.Time.Compare)
	}
	dirty := make(map[key]bool, len(t.svcDirty)+len(t.epDirty))
	maps.Copy(dirty, t.svcDirty)
	maps.Copy(dirty, t.epDirty)
	for k := range dirty {
		var ports []model.ServicePort
		if svc, ok := t.services[k]; ok {
			ports = join(svc, t.bySvc[k])
		}
		old, ok := t.synced[k]
		u.Changes = append(u.Changes, changedPorts(old, ports)...)
		t.ports += len(ports) - len(old)
		i, _ := slices.BinarySearchFunc(t.order, k, compareKeys)
		switch {
		case ports == nil && ok:
			delete(t.synced, k)
			t.order = slices.Delete(t.order, i, i+1)
		case ports != nil:
			if !ok {
				t.order = slices.Insert(t.order, i, k)
			}
			t.synced[k] = ports
		}
	}
	slices.SortFunc(u.Changes, func(a, b model.Change) int { return cmp.Compare(a.Name.String(), b.Name.String()) })
	for _, c := range u.Changes {
		u.Changed = append(u.Changed, c.Name)
	}
	// New maps after a large sync, not clear: a cleared map keeps the
	// table it grew to, and every later sync would walk (and a clone
	// copy) a table the size of the first sync's, the whole cluster.
	t.svcDirty, t.epDirty = emptied(t.svcDirty), emptied(t.epDirty)
	t.nodeDirty = false
	clear(t.triggers)
	for _, at := range t.arrived {
		u.Arrivals = append(u.Arrivals, at)
	}
	t.arrived = emptied(t.arrived)

	u.ServicePorts = t.ports
	u.State.Node = t.base
	if t.node != nil {
		u.State.Node = *t.node
	}
	if !u.Whole {
		return u
	}
	if t.ports > 0 {
		u.State.Services = make([]model.ServicePort, 0, t.ports)
	}
	for _, k := range t.order {
		u.State.Services = append(u.State.Services, t.synced[k]...)
	}
	return u
}

func compareSliceName(s *sliceInfo, name string) int { return strings.Compare(s.name, name) }

// changedPorts returns the ports that differ between two versions of a
// service: each one's new version, or a nil Port for one that is gone.
// The old ports are found by name in a map, not a scan each: a Service
// may have thousands.
func changedPorts(old, cur []model.ServicePort) []model.Change {
	var changes []model.Change
	before := make(map[model.ServicePortName]*model.ServicePort, len(old))
	for i := range old {
		before[old[i].Name] = &old[i]
	}
	for i := range cur {
		o, ok := before[cur[i].Name]
		if !ok || !reflect.DeepEqual(*o, cur[i]) {
			changes = append(changes, model.Change{Name: cur[i].Name, Port: &cur[i]})
		}
		delete(before, cur[i].Name)
	}
	for _, o := range old {
		if _, gone := before[o.Name]; gone {
			changes = append(changes, model.Change{Name: o.Name})
		}
	}
	return changes
}

// SetObject adds or updates a *v1.Service, *discoveryv1.EndpointSlice or
// *v1.Node, as [ParseManifests] returns them; trigger applies to a slice.
func (t *Tracker) SetObject(obj runtime.Object, trigger time.Time) error {
	switch o := obj.(type) {
	case *v1.Service:
		return t.SetService(o)
	case *discoveryv1.EndpointSlice:
		return t.SetEndpointSlice(o, trigger)
	case *v1.Node:
		return t.SetNode(o)
	}
	return fmt.Errorf("watcher: cannot track a %T", obj)
}

// emptied returns m cleared, or a new map if m held many entries.
func emptied[V any](m map[key]V) map[key]V {
	if len(m) > 64 {
		return map[key]V{}
	}
	clear(m)
	return m
}
