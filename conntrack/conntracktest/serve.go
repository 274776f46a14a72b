package conntracktest

import (
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// serve plays the kernel for one write: each request in order, its
// replies, then its acknowledgement if it asked for one or failed.
func (k *Kernel) serve(reqs []netlink.Message) []netlink.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	k.expire(now)
	var out []netlink.Message
	for _, m := range reqs {
		out = append(out, k.answer(m, now)...)
	}
	return out
}

func (k *Kernel) answer(m netlink.Message, now time.Time) []netlink.Message {
	r, ok := parseRequest(m.Data)
	if uint16(m.Header.Type)>>8 != subsysCTNetlink || !ok {
		return []netlink.Message{nl.Ack(m, int(unix.EINVAL), "")}
	}
	var (
		out   []netlink.Message
		errno unix.Errno
	)
	switch uint8(m.Header.Type) {
	case msgGet:
		if m.Header.Flags&netlink.Dump != 0 {
			return k.dump(m, r, now)
		}
		var f conntrack.Flow
		if f, errno = k.get(r, now); errno == 0 {
			out = append(out, reply(m, msgNew, 0, flowData(f)))
		}
	case msgNew:
		errno = k.create(m.Header.Flags, r, now)
	case msgDelete:
		errno = k.delete(r)
	case msgGetStats:
		out = append(out, reply(m, msgGetStats, 0, statsData(uint32(len(k.entries)), maxEntries)))
	default:
		errno = unix.EOPNOTSUPP
	}
	if errno != 0 || m.Header.Flags&netlink.Acknowledge != 0 {
		out = append(out, nl.Ack(m, int(errno), ""))
	}
	return out
}

// reply frames a ctnetlink message answering req.
func reply(req netlink.Message, msg uint8, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{
			Type:     netlink.HeaderType(nl.NFType(subsysCTNetlink, msg)),
			Flags:    flags,
			Sequence: req.Header.Sequence,
			PID:      req.Header.PID,
		},
		Data: data,
	}
}

// lookupTuple is the tuple a get or delete names: the original one, else
// the reply one.
func lookupTuple(r request) (conntrack.Tuple, bool) {
	switch {
	case r.orig != nil:
		return *r.orig, validTuple(r.orig)
	case r.reply != nil:
		return *r.reply, validTuple(r.reply)
	}
	return conntrack.Tuple{}, false
}

func zoneOf(r request) uint16 {
	if r.zone == nil {
		return 0
	}
	return *r.zone
}

// get answers as ctnetlink_get_conntrack: the entry tracking the tuple
// in either direction, ENOENT if none, EINVAL without a tuple.
func (k *Kernel) get(r request, now time.Time) (conntrack.Flow, unix.Errno) {
	t, ok := lookupTuple(r)
	if !ok {
		return conntrack.Flow{}, unix.EINVAL
	}
	i := k.find(t, zoneOf(r))
	if i < 0 {
		return conntrack.Flow{}, unix.ENOENT
	}
	return k.entries[i].report(now), 0
}

// create answers as ctnetlink_new_conntrack: an entry that exists is
// EEXIST with NLM_F_EXCL and updated without; a new one needs
// NLM_F_CREATE (else ENOENT), both tuples and a timeout (else EINVAL),
// a status that keeps the confirmed bit (else EBUSY), and no tracked
// tuple (EEXIST).
func (k *Kernel) create(flags netlink.HeaderFlags, r request, now time.Time) unix.Errno {
	t, ok := lookupTuple(r)
	if !ok {
		return unix.EINVAL
	}
	zone := zoneOf(r)
	if i := k.find(t, zone); i >= 0 {
		if flags&netlink.Excl != 0 {
			return unix.EEXIST
		}
		return k.entries[i].change(r, now)
	}
	switch {
	case flags&netlink.Create == 0:
		return unix.ENOENT
	case !validTuple(r.orig) || !validTuple(r.reply) || r.timeout == nil:
		return unix.EINVAL
	}
	f := conntrack.Flow{Orig: *r.orig, Reply: *r.reply, Zone: zone, Timeout: time.Duration(*r.timeout) * time.Second}
	if r.mark != nil {
		f.Mark = *r.mark
	}
	// The kernel marks the entry confirmed before it applies the
	// request's status, which must therefore keep that bit.
	e := &entry{flow: f}
	e.flow.Status = conntrack.StatusConfirmed
	if errno := e.change(r, now); errno != 0 {
		return errno
	}
	if k.clash(f) {
		return unix.EEXIST
	}
	k.insert(f, now).flow.Status = e.flow.Status
	return 0
}

// Status bits the kernel keeps to itself (IPS_UNCHANGEABLE_MASK): a
// request's are ignored, except that changing those in statusFixed is
// EBUSY.
const (
	statusFixed        = conntrack.StatusExpected | conntrack.StatusConfirmed | conntrack.StatusDying
	statusUnchangeable = statusFixed | conntrack.StatusSrcNAT | conntrack.StatusDstNAT |
		conntrack.StatusSrcNATDone | conntrack.StatusDstNATDone | 1<<11 | 1<<12 | 1<<13 | 1<<14 | 1<<15
)

// change applies a request's timeout, mark and status to the entry as
// ctnetlink_change_conntrack does; status bits can be set, not cleared
// (EBUSY), and the kernel's own stay as they are.
func (e *entry) change(r request, now time.Time) unix.Errno {
	if r.status != nil {
		s := *r.status
		changed, cleared := e.flow.Status^s, e.flow.Status&^s
		if changed&statusFixed != 0 || cleared&(conntrack.StatusSeenReply|conntrack.StatusAssured) != 0 {
			return unix.EBUSY
		}
		e.flow.Status = e.flow.Status&statusUnchangeable | s&^statusUnchangeable
	}
	if r.timeout != nil {
		e.flow.Timeout = time.Duration(*r.timeout) * time.Second
		e.expires = now.Add(e.flow.Timeout)
	}
	if r.mark != nil {
		e.flow.Mark = *r.mark
	}
	return 0
}

// delete answers as ctnetlink_del_conntrack: with a tuple, the entry
// tracking it (ENOENT if none, or if CTA_ID names another incarnation);
// without, a flush of the message's family, honoured only when the
// nfgenmsg version is nonzero (Linux 4.19 on), else of every family.
func (k *Kernel) delete(r request) unix.Errno {
	if r.orig == nil && r.reply == nil {
		fam := r.family
		if r.version == 0 {
			fam = 0
		}
		k.flush(fam)
		return 0
	}
	t, ok := lookupTuple(r)
	if !ok {
		return unix.EINVAL
	}
	i := k.find(t, zoneOf(r))
	if i < 0 || (r.id != nil && *r.id != k.entries[i].flow.ID) {
		return unix.ENOENT
	}
	k.entries = append(k.entries[:i], k.entries[i+1:]...)
	return 0
}

func (k *Kernel) flush(fam inet.Family) {
	kept := k.entries[:0]
	for _, e := range k.entries {
		if fam != 0 && e.flow.Family() != fam {
			kept = append(kept, e)
		}
	}
	clear(k.entries[len(kept):])
	k.entries = kept
}
