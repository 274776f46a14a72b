package proxier

import (
	"maps"
	"os"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// writeRecord records the sync in the state file, and the service ports'
// names of the virtual servers beside it, at most once per recordEvery
// and namesEvery but after a full sync.
func (p *Proxier) writeRecord(u *watcher.Update, changes []model.Change, res *dataplane.Result, start time.Time, took time.Duration) {
	if p.records == nil {
		return
	}
	r := &p.record
	r.PID = os.Getpid()
	r.LastSync = start.Add(took)
	r.DurationSeconds = took.Seconds()
	r.Full = res.Full
	r.Operations = res.Plan.Len()
	r.Syncs++
	if r.Syncs == 1 {
		r.FirstSyncSeconds = r.DurationSeconds
	}
	r.ErrorCount = len(res.Errors)
	r.Errors = r.Errors[:0]
	for _, e := range res.Errors[:min(len(res.Errors), status.MaxRecordedErrors)] {
		r.Errors = append(r.Errors, e.Error())
	}
	r.ServicePorts = u.ServicePorts
	p.namesPending = p.updateNames(u, changes) || p.namesPending
	// Under churn a sync may follow every change, and writing the files
	// after each cost as much as the syncs: the names file holds every
	// service port (at 10,000 services, 4 ms and 1.2 MB of garbage to
	// encode natively). The record is handed to the writer at most once
	// per recordEvery and the names at most once per namesEvery; the
	// next sync after that catches up, and the periodic sync bounds how
	// stale they get.
	now := p.now()
	if !res.Full && now.Sub(p.recordWritten) < recordEvery {
		return
	}
	names := p.namesPending && (res.Full || now.Sub(p.namesWritten) >= namesEvery)
	// The writer owns what it is given: the names are copied (a
	// fraction of encoding them), and the errors, whose slice the next
	// sync reuses.
	snapshot := *r
	snapshot.Errors = slices.Clone(r.Errors)
	snapshot.Services = nil
	if names {
		snapshot.Services = maps.Clone(r.Services)
	}
	p.records.Put(snapshot)
	p.recordWritten = now
	if names {
		p.namesWritten, p.namesPending = now, false
	}
}

// How often at most the state file and the names file are written.
const (
	recordEvery = time.Second
	namesEvery  = 5 * time.Second
)

// updateNames keeps the record's map of virtual servers to service names
// up to date, in the time the changes take, and reports whether it
// changed: endpoint changes leave it as it is. A virtual server ports
// contend for names the port the kernel programs it for.
func (p *Proxier) updateNames(u *watcher.Update, changes []model.Change) bool {
	r := &p.record
	if p.names == nil {
		p.names = make(map[model.ServicePortName]status.PortNames, len(u.State.Services))
		r.Services = status.ServiceNames(u.State.Services, p.names, p.dataplane.Owner)
		return true
	}
	dirty := false
	for _, c := range changes {
		old := p.names[c.Name]
		var cur status.PortNames
		if c.Port != nil {
			cur = status.NamesOf(c.Port)
		}
		if slices.Equal(old.Keys, cur.Keys) {
			continue
		}
		dirty = true
		status.Rename(r.Services, c.Name, old, cur, p.dataplane.Owner)
		if cur.Keys == nil {
			delete(p.names, c.Name)
		} else {
			p.names[c.Name] = cur
		}
	}
	return dirty
}
