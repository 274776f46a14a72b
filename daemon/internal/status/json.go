package status

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// statusFormat is the format field of `ipvsplane status -o json`. Fields
// are only ever added within a format; one removed or changed in meaning
// gets a new format (docs/status-json.md).
const statusFormat = "ipvsplane.status/v1"

// statusJSON is `ipvsplane status -o json`, for scripts: the text view's
// facts with stable names, every set (empty ones too), and times in
// RFC 3339 and durations in seconds.
type statusJSON struct {
	Format string `json:"format"`
	// Sync is the daemon's last sync; null with SyncError saying why
	// (no state file: the daemon is not running or runs without one).
	Sync           *statusSync     `json:"sync"`
	SyncError      string          `json:"syncError,omitempty"`
	Device         statusDevice    `json:"device"`
	VirtualServers []statusVirtual `json:"virtualServers"`
	Sets           []statusSet     `json:"sets"`
	// Traffic is null without the daemon's --service-traffic-metrics.
	Traffic      *statusTraffic `json:"traffic"`
	TrafficError string         `json:"trafficError,omitempty"`
}

// statusSync is the state file's record with the time since, in the
// documented order: the daemon, secondsAgo, the sync.
type statusSync struct {
	Daemon
	SecondsAgo float64 `json:"secondsAgo"`
	Sync
}

type statusDevice struct {
	Name        string   `json:"name"`
	Addresses   []string `json:"addresses"`
	LocalRoutes []string `json:"localRoutes"`
	Error       string   `json:"error,omitempty"`
}

type statusVirtual struct {
	// Service is "namespace/name:port", "" if the sync record does not
	// name it; NodePort is true for a node port's virtual server.
	Service  string `json:"service"`
	NodePort bool   `json:"nodePort"`
	// Owned is false for a virtual server ipvsplane did not make.
	Owned              bool         `json:"owned"`
	Protocol           string       `json:"protocol"`
	Address            string       `json:"address"`
	Port               uint16       `json:"port"`
	Scheduler          string       `json:"scheduler"`
	PersistenceSeconds int          `json:"persistenceSeconds"`
	RealServers        []statusReal `json:"realServers"`
}

type statusReal struct {
	Address             string `json:"address"`
	Port                uint16 `json:"port"`
	Weight              int    `json:"weight"`
	ActiveConnections   uint32 `json:"activeConnections"`
	InactiveConnections uint32 `json:"inactiveConnections"`
}

type statusSet struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Entries uint32 `json:"entries"`
}

type statusTraffic struct {
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
	// Ports are the busiest first, --top of them; the rest had less.
	Ports     []PortRate `json:"ports"`
	MorePorts int        `json:"morePorts"`
}

// newStatusJSON gathers the status for -o json.
func newStatusJSON(rec *Record, recErr error, v *Kernel, traffic *Traffic, trafficErr error, top int, now time.Time) *statusJSON {
	s := &statusJSON{
		Format:         statusFormat,
		Device:         statusDevice{Name: dataplane.DefaultDevice, Addresses: []string{}, LocalRoutes: []string{}},
		VirtualServers: []statusVirtual{},
		Sets:           []statusSet{},
	}
	switch {
	case rec != nil:
		s.Sync = &statusSync{Daemon: rec.Daemon, SecondsAgo: now.Sub(rec.LastSync).Seconds(), Sync: rec.Sync}
		// A list is [] when empty, never null.
		s.Sync.Errors = append([]string{}, rec.Errors...)
	case errors.Is(recErr, fs.ErrNotExist):
		s.SyncError = "no sync recorded (is the daemon running? see --state-file)"
	case recErr != nil:
		s.SyncError = recErr.Error()
	}
	if v.devErr != nil {
		s.Device.Error = v.devErr.Error()
	}
	for _, a := range v.devAddr {
		s.Device.Addresses = append(s.Device.Addresses, a.String())
	}
	for _, a := range v.devRoutes {
		s.Device.LocalRoutes = append(s.Device.LocalRoutes, a.String())
	}
	s.VirtualServers = statusVirtuals(rec, v)
	for _, h := range v.sets {
		s.Sets = append(s.Sets, statusSet{Name: h.Name, Type: string(h.Type), Entries: h.Entries})
	}
	switch {
	case traffic != nil:
		s.Traffic = &statusTraffic{At: traffic.At, Seconds: traffic.Seconds, Ports: append([]PortRate{}, traffic.Ports...)}
		if top > 0 && len(s.Traffic.Ports) > top {
			s.Traffic.Ports, s.Traffic.MorePorts = s.Traffic.Ports[:top], len(s.Traffic.Ports)-top
		}
	case trafficErr != nil && !errors.Is(trafficErr, fs.ErrNotExist):
		s.TrafficError = trafficErr.Error()
	}
	return s
}

// statusVirtuals lists the virtual servers as printVirtualServers does:
// sorted, firewall-mark services left out, real servers sorted.
func statusVirtuals(rec *Record, v *Kernel) []statusVirtual {
	out := []statusVirtual{}
	slices.SortFunc(v.table, func(a, b ipvs.VirtualServer) int {
		return cmp.Or(a.Service.Addr.Compare(b.Service.Addr), cmp.Compare(a.Service.Port, b.Service.Port), cmp.Compare(a.Service.Protocol, b.Service.Protocol))
	})
	for _, vs := range v.table {
		s := vs.Service
		if s.FirewallMark != 0 {
			continue
		}
		name := serviceName(rec, s)
		nodePort := strings.HasSuffix(name, " (node port)")
		name = strings.TrimSuffix(name, " (node port)")
		if name == "-" {
			name = ""
		}
		sv := statusVirtual{
			Service: name, NodePort: nodePort, Owned: v.isOwned(s),
			Protocol: strings.ToUpper(s.Protocol.String()), Address: s.Addr.String(), Port: s.Port, Scheduler: string(s.Scheduler),
			PersistenceSeconds: int(s.Timeout.Seconds()), RealServers: []statusReal{},
		}
		slices.SortFunc(vs.Destinations, func(a, b ipvs.Destination) int {
			return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
		})
		for _, d := range vs.Destinations {
			sv.RealServers = append(sv.RealServers, statusReal{
				Address: d.Addr.String(), Port: d.Port, Weight: d.Weight,
				ActiveConnections: d.ActiveConnections, InactiveConnections: d.InactiveConnections,
			})
		}
		out = append(out, sv)
	}
	return out
}

// PrintJSON writes the status for scripts, one indented object
// (docs/status-json.md): the record, or why there is none; the kernel; the
// top busiest ports of the traffic rates, or why they cannot be read.
func PrintJSON(w io.Writer, rec *Record, recErr error, v *Kernel, traffic *Traffic, trafficErr error, top int, now time.Time) error {
	return writeStatusJSON(w, newStatusJSON(rec, recErr, v, traffic, trafficErr, top, now))
}

// writeStatusJSON writes s indented, one object.
func writeStatusJSON(w io.Writer, s *statusJSON) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(s)
}
