package ipsettest

import (
	"math/bits"
	"slices"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset"
	"golang.org/x/sys/unix"
)

// The kernel's defaults and bounds for hash sets (ip_set_hash_gen.h).
const (
	defaultHashSize = 1024
	minHashSize     = 64
	defaultMaxElem  = 65536
)

// typeReply answers IPSET_CMD_TYPE: the revisions of a set type.
func typeReply(r request) ([]byte, unix.Errno) {
	l, ok := layoutOf(ipset.Type(r.typeName))
	if !ok {
		return nil, errFindType
	}
	return payload(func(w *nl.Writer) {
		w.String(attrTypeName, r.typeName)
		w.Uint8(attrFamily, uint8(r.family))
		w.Uint8(attrRevision, l.revision)
		w.Uint8(attrRevisionMin, 0)
	}), 0
}

// create makes a set as ip_set_create does. Without excl (ipset's
// -exist) creating a set that exists with the same settings is no error.
func (k *Kernel) create(r request, excl bool) unix.Errno {
	s, errno := newSet(r)
	if errno != 0 {
		return errno
	}
	if old := k.find(s.header.Name); old != nil {
		if excl || old.header != s.header {
			return unix.EEXIST
		}
		return 0
	}
	if i := slices.Index(k.sets, nil); i >= 0 {
		k.sets[i] = s
	} else {
		k.sets = append(k.sets, s)
	}
	return 0
}

// newSet reads a create request: the type and revision must exist, a
// bitmap needs its port range, a hash a family, and hashes get the
// kernel's defaults.
func newSet(r request) (*set, unix.Errno) {
	t := ipset.Type(r.typeName)
	l, ok := layoutOf(t)
	if r.name == "" || !r.hasData {
		return nil, errProtocol
	}
	if !ok || r.revision > l.revision {
		return nil, errFindType
	}
	c, errno := parseCreateData(r.data)
	if errno != 0 {
		return nil, errno
	}
	h := ipset.Header{Set: ipset.Set{Name: r.name, Type: t, Family: r.family, Timeout: c.timeout,
		Counters: c.cadtFlags&flagWithCounters != 0, Comment: c.cadtFlags&flagWithComment != 0}, Revision: r.revision}
	if t == ipset.BitmapPort {
		if !c.hasPorts {
			return nil, errProtocol
		}
		h.PortFrom, h.PortTo = min(c.portFrom, c.portTo), max(c.portFrom, c.portTo)
		h.Family = 0
		return emptySet(h), 0
	}
	if r.family != inet.IPv4 && r.family != inet.IPv6 {
		return nil, errInvalidFam
	}
	h.HashSize, h.MaxElem = hashSize(c.hashSize), c.maxElem
	if h.MaxElem == 0 {
		h.MaxElem = defaultMaxElem
	}
	return emptySet(h), 0
}

// hashSize is the size the kernel gives a hash: at least 64 buckets, a
// power of two.
func hashSize(asked uint32) uint32 {
	if asked == 0 {
		asked = defaultHashSize
	}
	asked = max(asked, minHashSize)
	return 1 << bits.Len32(asked-1)
}

// destroy removes a set, or every set when r names none; a set that
// firewall rules use is busy.
func (k *Kernel) destroy(r request) unix.Errno {
	if r.name == "" {
		for _, s := range k.sets {
			if s != nil && s.refs > 0 {
				return errBusy
			}
		}
		k.sets = nil
		return 0
	}
	i := k.index(r.name)
	switch {
	case i < 0:
		return unix.ENOENT
	case k.sets[i].refs > 0:
		return errBusy
	}
	k.sets[i] = nil
	return 0
}

// flush empties a set, or every set when r names none.
func (k *Kernel) flush(r request) unix.Errno {
	if r.name == "" {
		for _, s := range k.sets {
			if s != nil {
				s.flush()
			}
		}
		return 0
	}
	s := k.find(r.name)
	if s == nil {
		return unix.ENOENT
	}
	s.flush()
	return 0
}

func (k *Kernel) rename(r request) unix.Errno {
	s := k.find(r.name)
	switch {
	case s == nil:
		return unix.ENOENT
	case r.name2 == "":
		return errProtocol
	case s.refs > 0:
		return errReferenced
	case k.find(r.name2) != nil:
		return errExistSetName
	}
	s.header.Name = r.name2
	return 0
}

// swap exchanges two sets' contents, as ip_set_swap exchanges the sets
// behind two indexes: the names and the rules using each index stay.
func (k *Kernel) swap(r request) unix.Errno {
	i, j := k.index(r.name), k.index(r.name2)
	if i < 0 || j < 0 {
		return unix.ENOENT
	}
	a, b := k.sets[i], k.sets[j]
	if a.header.Type != b.header.Type || a.header.Family != b.header.Family {
		return errTypeMismatch
	}
	a.header.Name, b.header.Name = b.header.Name, a.header.Name
	a.refs, b.refs = b.refs, a.refs
	k.sets[i], k.sets[j] = b, a
	return 0
}

// header answers IPSET_CMD_HEADER.
func (k *Kernel) header(r request) ([]byte, unix.Errno) {
	s := k.find(r.name)
	if s == nil {
		return nil, unix.ENOENT
	}
	return payload(func(w *nl.Writer) {
		w.String(attrSetName, s.header.Name)
		w.String(attrTypeName, string(s.header.Type))
		w.Uint8(attrRevision, s.header.Revision)
		w.Uint8(attrFamily, uint8(s.header.Family))
	}), 0
}

// getByName answers IPSET_CMD_GET_BYNAME with the set's kernel index.
func (k *Kernel) getByName(r request) ([]byte, unix.Errno) {
	i := k.index(r.name)
	if i < 0 {
		return nil, unix.ENOENT
	}
	return payload(func(w *nl.Writer) {
		w.Uint8(attrFamily, uint8(k.sets[i].header.Family))
		w.BE16(attrIndex|be, uint16(i))
	}), 0
}
