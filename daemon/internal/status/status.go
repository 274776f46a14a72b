// Package status is the daemon's report of itself: the state file it
// writes after every sync (Record) and the traffic rates beside it
// (Traffic), and `ipvsplane status`, which reads them with the kernel's
// tables (ReadKernel) and prints them for people (Print, PrintTraffic) or
// scripts (PrintJSON, documented in docs/status-json.md).
package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Record is the state file the daemon writes after every sync (see
// --state-file), for `ipvsplane status`: when it synced, how it went, and
// which service each virtual server belongs to, which the kernel does not
// know.
type Record struct {
	Daemon
	Sync
	// Services maps a virtual server's name (inet.VirtualServer: "TCP
	// 10.96.0.10:80", and "TCP *:30080" for a node port) to
	// "namespace/name:port". It is kept in a file of its own
	// (NamesFile), written only when it changes: at 10,000 services it is
	// a megabyte, and endpoint changes leave it as it is.
	Services map[string]string `json:"-"`
}

// Daemon is which daemon synced, and when it last did: in the state file
// and in `ipvsplane status -o json` under the same names.
type Daemon struct {
	Node     string    `json:"node"`
	Source   string    `json:"source"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	LastSync time.Time `json:"lastSync"`
}

// Sync is how the last sync went: in the state file and in `ipvsplane
// status -o json` under the same names.
type Sync struct {
	DurationSeconds float64 `json:"durationSeconds"`
	Full            bool    `json:"full"`
	Operations      int     `json:"operations"`
	Syncs           int     `json:"syncs"`
	// FirstSyncSeconds is how long the first sync took: the whole state,
	// from an empty or foreign kernel.
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	ServicePorts     int     `json:"servicePorts"`
	// Errors holds the last sync's first errors (MaxRecordedErrors);
	// ErrorCount counts all.
	ErrorCount int      `json:"errorCount"`
	Errors     []string `json:"errors"`
}

// NamesFile is where the record's Services go, beside the state file.
func NamesFile(stateFile string) string {
	return strings.TrimSuffix(stateFile, ".json") + "-services.json"
}

// MaxRecordedErrors bounds the errors kept in the state file.
const MaxRecordedErrors = 20

// PortNames are a service port's virtual servers as the state file names
// them (Keys, inet.VirtualServer's names) and, in the same order, as the
// planner keys them (Virtual): the zero VirtualKey for the node port's
// key, which stands for the port on every node address.
type PortNames struct {
	Keys    []string
	Virtual []plan.VirtualKey
}

// NamesOf returns a service port's PortNames, its keys built in one
// buffer: the daemon names every service port at its first sync, 44,000
// of them in the field's largest shape.
func NamesOf(sp *model.ServicePort) PortNames {
	n := len(sp.ClusterIPs) + len(sp.ExternalIPs) + len(sp.LoadBalancerIPs) + 1
	names := PortNames{Keys: make([]string, 0, n), Virtual: make([]plan.VirtualKey, 0, n)}
	buf := make([]byte, 0, 64)
	add := func(vk plan.VirtualKey, addr netip.Addr, port uint16) {
		buf = inet.AppendVirtualServer(buf[:0], sp.Protocol, addr, port)
		names.Keys = append(names.Keys, string(buf))
		names.Virtual = append(names.Virtual, vk)
	}
	for _, list := range [][]netip.Addr{sp.ClusterIPs, sp.ExternalIPs, sp.LoadBalancerIPs} {
		for _, a := range list {
			add(plan.VirtualKey{Addr: a, Port: sp.Port, Protocol: sp.Protocol}, a, sp.Port)
		}
	}
	if sp.NodePort != 0 {
		add(plan.VirtualKey{}, netip.Addr{}, sp.NodePort)
	}
	return names
}

// Owner returns the service port the planner programs a virtual server
// for (dataplane.Dataplane.Owner): of ports that claim one, its choice.
type Owner func(plan.VirtualKey) (model.ServicePortName, bool)

// ServiceNames maps the virtual servers of services to their names, each
// to its owner's where ports claim one, and lists each service port's
// names in ports, when not nil.
func ServiceNames(services []model.ServicePort, ports map[model.ServicePortName]PortNames, owner Owner) map[string]string {
	out := make(map[string]string, 2*len(services))
	for i := range services {
		cur := NamesOf(&services[i])
		Rename(out, services[i].Name, PortNames{}, cur, owner)
		if ports != nil {
			ports[services[i].Name] = cur
		}
	}
	return out
}

// Rename moves a service port's entries in names from its old PortNames
// to cur (empty when the port went): a key it named passes to the
// virtual server's owner if another port owns it now, and a key of cur
// names the port unless the planner programs it for another. A node
// port's key always names its port: the API server gives each node port
// to one Service.
func Rename(names map[string]string, name model.ServicePortName, old, cur PortNames, owner Owner) {
	self := name.String()
	for i, k := range old.Keys {
		if names[k] != self {
			continue
		}
		delete(names, k)
		if vk := old.Virtual[i]; vk.Addr.IsValid() {
			if o, ok := owner(vk); ok && o != name {
				names[k] = o.String()
			}
		}
	}
	for i, k := range cur.Keys {
		if vk := cur.Virtual[i]; vk.Addr.IsValid() {
			if o, ok := owner(vk); ok && o != name {
				continue
			}
		}
		names[k] = self
	}
}

// WriteRecord replaces the state file, and the names file when names is
// true, each in one rename, so a reader never sees half of one.
func WriteRecord(path string, r *Record, names bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if names {
		if err := writeFile(NamesFile(path), encodeNames(r.Services)); err != nil {
			return err
		}
	}
	return writeJSON(path, r)
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFile(path, data)
}

// encodeNames encodes names as a JSON object, in the map's order: it is
// read back into a map, and at 10,000 services encoding/json's sorting and
// reflection were two thirds of the daemon's CPU in writing its files
// under churn (docs/benchmarks.md).
func encodeNames(names map[string]string) []byte {
	size := 2
	for k, v := range names {
		size += len(k) + len(v) + 6
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	for k, v := range names {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. The names' strings are
// printable ASCII without quotes or backslashes, written as they are;
// anything else goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// writeFile replaces path with data at once. The temporary file beside it
// has a name no one can make ahead (a fixed name's link would be followed
// by the write) and is readable by its owner only: ipvsplane status runs
// as the daemon's user, and the node's other users have no need of it.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadRecord reads the state file at path and the names file beside it;
// a missing state file is fs.ErrNotExist, a missing names file leaves
// Services empty.
func ReadRecord(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	names, err := os.ReadFile(NamesFile(path))
	if err != nil {
		names = nil
	}
	return parseRecord(path, data, names)
}

// parseRecord is ReadRecord on the files' contents; names is nil when the
// names file is missing.
func parseRecord(path string, data, names []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if names != nil {
		if err := json.Unmarshal(names, &r.Services); err != nil {
			return nil, fmt.Errorf("%s: %w", NamesFile(path), err)
		}
		renameLegacyNames(r.Services)
	}
	return &r, nil
}

// renameLegacyNames gives the names ipvsplane v0.1.0-rc.1 wrote,
// "tcp/10.96.0.1:443" and "tcp/*:30080", inet.VirtualServer's form:
// `ipvsplane status` of a new release reads the state file the old
// daemon left until the new one writes its own.
func renameLegacyNames(names map[string]string) {
	for k, name := range names {
		proto, addrPort, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		p, err := inet.ParseProtocol(proto)
		if err != nil {
			continue
		}
		var addr netip.Addr
		port, err := strconv.ParseUint(strings.TrimPrefix(addrPort, "*:"), 10, 16)
		if !strings.HasPrefix(addrPort, "*:") {
			ap, perr := netip.ParseAddrPort(addrPort)
			addr, port, err = ap.Addr(), uint64(ap.Port()), perr
		}
		if err != nil {
			continue
		}
		delete(names, k)
		names[inet.VirtualServer(p, addr, uint16(port))] = name
	}
}

// Kernel is what `ipvsplane status` reads from the kernel.
type Kernel struct {
	table []ipvs.VirtualServer
	// owned are the virtual servers in the KUBE-IPVSPLANE-OWNED sets.
	owned   map[plan.VirtualKey]bool
	sets    []ipset.Header
	devAddr []netip.Addr
	// devRoutes are the service IPs bound as local routes
	// (--service-address-binding=local-route).
	devRoutes []netip.Addr
	devErr    error
}

// ReadKernel reads the IPVS table, the KUBE-* sets and what is on the
// device.
func ReadKernel(ctx context.Context, device string) (*Kernel, error) {
	v := &Kernel{owned: map[plan.VirtualKey]bool{}}
	ic, err := ipvs.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer ic.Close()
	if v.table, err = ic.Table(ctx); err != nil {
		return nil, err
	}
	sc, err := ipset.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	names, err := sc.Names(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "KUBE-") {
			continue
		}
		h, err := sc.Header(ctx, name)
		if err != nil {
			return nil, err
		}
		v.sets = append(v.sets, h)
		if name == model.SetName(model.SetOwned, inet.IPv4) || name == model.SetName(model.SetOwned, inet.IPv6) {
			_, entries, err := sc.List(ctx, name)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				v.owned[plan.VirtualKey{Addr: e.Addr, Port: e.Port, Protocol: e.Protocol}] = true
			}
		}
	}
	dc, err := dummy.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	dev, err := dc.Get(ctx, device)
	if err == nil {
		v.devAddr, err = dev.Addresses(ctx)
	}
	if err == nil {
		// An address-mode connection's leftovers are the local routes.
		v.devRoutes, err = dev.Leftovers(ctx)
	}
	v.devErr = err
	return v, nil
}

// Print writes the human view: the last sync, the services with
// their virtual and real servers, the sets.
func Print(w io.Writer, rec *Record, recErr error, v *Kernel, now time.Time) error {
	printSyncRecord(w, rec, recErr, now)
	if v.devErr != nil {
		fmt.Fprintf(w, "%s: %v\n", dataplane.DefaultDevice, v.devErr)
	} else {
		fmt.Fprintf(w, "%d addresses on %s", len(v.devAddr), dataplane.DefaultDevice)
		if len(v.devRoutes) > 0 {
			fmt.Fprintf(w, ", %d local routes through it", len(v.devRoutes))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if err := printVirtualServers(w, rec, v); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printSets(w, v.sets)
}

// printSyncRecord writes the daemon's last sync, or why there is none.
func printSyncRecord(w io.Writer, rec *Record, recErr error, now time.Time) {
	switch {
	case rec != nil:
		fmt.Fprintf(w, "node %s (source %s, pid %d, up %s)\n", rec.Node, rec.Source, rec.PID, now.Sub(rec.Started).Round(time.Second))
		fmt.Fprintf(w, "last sync %s (%s ago), took %s, %s, %d operations, %d errors; %d syncs, %d service ports\n",
			rec.LastSync.Format(time.RFC3339), now.Sub(rec.LastSync).Round(time.Second), seconds(rec.DurationSeconds),
			map[bool]string{true: "full", false: "incremental"}[rec.Full], rec.Operations, rec.ErrorCount, rec.Syncs, rec.ServicePorts)
		fmt.Fprintf(w, "first sync took %s\n", seconds(rec.FirstSyncSeconds))
		for _, e := range rec.Errors {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
	case errors.Is(recErr, fs.ErrNotExist):
		fmt.Fprintln(w, "no sync recorded (is the daemon running? see --state-file)")
	default:
		fmt.Fprintf(w, "no sync recorded: %v\n", recErr)
	}
}

// seconds is a duration in seconds as the text view shows it.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
}

// printVirtualServers writes the table of virtual servers, sorted, each
// with its real servers; firewall-mark services are left out.
func printVirtualServers(w io.Writer, rec *Record, v *Kernel) error {
	slices.SortFunc(v.table, func(a, b ipvs.VirtualServer) int {
		return cmp.Or(a.Service.Addr.Compare(b.Service.Addr), cmp.Compare(a.Service.Port, b.Service.Port), cmp.Compare(a.Service.Protocol, b.Service.Protocol))
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tVIRTUAL SERVER\tSCHEDULER\tREAL SERVER\tWEIGHT\tACTIVE\tINACTIVE")
	for _, vs := range v.table {
		if vs.Service.FirewallMark != 0 {
			continue
		}
		printVirtualServer(tw, rec, v, vs)
	}
	return tw.Flush()
}

// printVirtualServer writes one virtual server's rows: one per real
// server, or one saying it has none.
func printVirtualServer(tw io.Writer, rec *Record, v *Kernel, vs ipvs.VirtualServer) {
	s := vs.Service
	name := serviceName(rec, s)
	if !v.isOwned(s) {
		name += " [not ipvsplane's]"
	}
	sched := string(s.Scheduler)
	if s.Timeout > 0 {
		sched += fmt.Sprintf(" persistent %ds", int(s.Timeout.Seconds()))
	}
	vip := s.String()
	if len(vs.Destinations) == 0 {
		fmt.Fprintf(tw, "%s\t%s\t%s\t(none)\t-\t-\t-\n", name, vip, sched)
	}
	slices.SortFunc(vs.Destinations, func(a, b ipvs.Destination) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
	})
	for i, d := range vs.Destinations {
		// The service's columns are written on its first row only.
		if i > 0 {
			name, vip, sched = "", "", ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", name, vip, sched, d.String(), d.Weight, d.ActiveConnections, d.InactiveConnections)
	}
}

// isOwned reports whether the owned sets list a virtual server.
func (v *Kernel) isOwned(s ipvs.Service) bool {
	return v.owned[plan.VirtualKey{Addr: s.Addr, Port: s.Port, Protocol: s.Protocol}]
}

// serviceName names the service port of a virtual server from the sync
// record: by its address, else as a node port; "-" if unknown.
func serviceName(rec *Record, s ipvs.Service) string {
	if rec == nil {
		return "-"
	}
	if n, ok := rec.Services[inet.VirtualServer(s.Protocol, s.Addr, s.Port)]; ok {
		return n
	}
	if n, ok := rec.Services[inet.VirtualServer(s.Protocol, netip.Addr{}, s.Port)]; ok {
		return n + " (node port)"
	}
	return "-"
}

// printSets writes the table of the non-empty sets, and how many empty
// ones were left out.
func printSets(w io.Writer, sets []ipset.Header) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SET\tTYPE\tENTRIES")
	empty := 0
	for _, h := range sets {
		if h.Entries == 0 {
			empty++
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", h.Name, h.Type, h.Entries)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if empty > 0 {
		fmt.Fprintf(w, "(%d empty sets not shown)\n", empty)
	}
	return nil
}
