package ipset

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/mdlayher/netlink"
)

// Mode says whether finding the work already done is an error.
type Mode int

const (
	// Exclusive fails when the set exists (Create), the entry exists (Add)
	// or the entry is missing (Delete).
	Exclusive Mode = iota
	// ExistOK accepts those, as ipset's -exist does: Create succeeds if a
	// set of that name has the same type and options, Add refreshes an
	// existing entry's timeout and comment, Delete ignores a missing entry.
	ExistOK
)

// Create creates a set at the newest revision of its type that the kernel
// offers.
func (c *Conn) Create(ctx context.Context, s Set, mode Mode) error {
	if err := s.validate(); err != nil {
		return &OpError{Op: "create", Object: s.Name, Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.create(ctx, s, mode == Exclusive)
}

func (c *Conn) create(ctx context.Context, s Set, exclusive bool) error {
	rev, err := c.revision(ctx, s.Type, s.family())
	if err != nil {
		return opError("create", s.Name, s.Type, err)
	}
	_, err = c.execute(ctx, encodeCreate(c.protocol, s, rev, exclusive))
	return opError("create", s.Name, s.Type, err)
}

// revision returns the newest revision of a type, asking the kernel once.
func (c *Conn) revision(ctx context.Context, t Type, f inet.Family) (uint8, error) {
	k := typeFamily{t, f}
	if rev, ok := c.revisions[k]; ok {
		return rev, nil
	}
	replies, err := c.execute(ctx, encodeType(c.protocol, t, f))
	if err != nil {
		return 0, err
	}
	rev, err := decodeType(replies)
	if err != nil {
		return 0, err
	}
	c.revisions[k] = rev
	return rev, nil
}

// Destroy removes a set. The kernel refuses (ErrSetInUse) while a rule or a
// list set refers to it.
func (c *Conn) Destroy(ctx context.Context, name string) error {
	return c.named(ctx, "destroy", cmdDestroy, name)
}

// namedFlags are the netlink flags of requests that name one set; ipset(8)
// marks destroy exclusive.
func namedFlags(cmd uint8) netlink.HeaderFlags {
	if cmd == cmdDestroy {
		return netlink.Acknowledge | netlink.Excl
	}
	return netlink.Acknowledge
}

// Flush removes every entry of a set.
func (c *Conn) Flush(ctx context.Context, name string) error {
	return c.named(ctx, "flush", cmdFlush, name)
}

func (c *Conn) named(ctx context.Context, op string, cmd uint8, name string) error {
	if err := checkName(op, name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.namedLocked(ctx, op, cmd, name)
}

func (c *Conn) namedLocked(ctx context.Context, op string, cmd uint8, name string) error {
	_, err := c.execute(ctx, encodeNamed(c.protocol, cmd, namedFlags(cmd), name))
	return opError(op, name, "", err)
}

// Rename renames a set; it fails with ErrSetExist if to is taken.
func (c *Conn) Rename(ctx context.Context, from, to string) error {
	return c.twoNames(ctx, "rename", cmdRename, from, to)
}

// Swap exchanges the contents of two sets of the same type and family,
// atomically; rules referring to either name see the other's entries.
func (c *Conn) Swap(ctx context.Context, a, b string) error {
	return c.twoNames(ctx, "swap", cmdSwap, a, b)
}

func (c *Conn) twoNames(ctx context.Context, op string, cmd uint8, a, b string) error {
	if err := checkName(op, a); err != nil {
		return err
	}
	if err := checkName(op, b); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.twoNamesLocked(ctx, op, cmd, a, b)
}

func (c *Conn) twoNamesLocked(ctx context.Context, op string, cmd uint8, a, b string) error {
	_, err := c.execute(ctx, encodeTwoNames(c.protocol, cmd, a, b))
	return opError(op, a+" "+b, "", err)
}

// Names lists the names of every set in the namespace.
func (c *Conn) Names(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sets, err := c.list(ctx, "", flagListSetName)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.header.Name
	}
	return names, nil
}

// Header returns a set's type, options and counts, without its entries.
func (c *Conn) Header(ctx context.Context, name string) (Header, error) {
	if err := checkName("header", name); err != nil {
		return Header{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sets, err := c.list(ctx, name, flagListHeader)
	if err != nil {
		return Header{}, err
	}
	return sets[0].header, nil
}

// List returns a set's header and all its entries, read in one dump.
func (c *Conn) List(ctx context.Context, name string) (Header, []Entry, error) {
	if err := checkName("list", name); err != nil {
		return Header{}, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sets, err := c.list(ctx, name, 0)
	if err != nil {
		return Header{}, nil, err
	}
	return sets[0].header, sets[0].entries, nil
}

// kind returns a set's name, type, family and revision, which the kernel
// answers without walking the set (unlike Header, which counts its memory).
func (c *Conn) kind(ctx context.Context, name string) (Header, error) {
	replies, err := c.execute(ctx, encodeNamed(c.protocol, cmdHeader, 0, name))
	if err != nil {
		return Header{}, opError("header", name, "", err)
	}
	sets, err := decodeList(replies)
	if err != nil || len(sets) != 1 || sets[0].header.Name != name {
		return Header{}, &OpError{Op: "header", Object: name, Err: fmt.Errorf("unexpected reply: %v", err)}
	}
	return sets[0].header, nil
}

func (c *Conn) list(ctx context.Context, name string, flags uint32) ([]dumped, error) {
	replies, err := c.execute(ctx, encodeList(c.protocol, name, flags))
	if err != nil {
		return nil, opError("list", name, "", err)
	}
	sets, err := decodeList(replies)
	if err != nil {
		return nil, &OpError{Op: "list", Object: name, Err: err}
	}
	if name != "" && (len(sets) != 1 || sets[0].header.Name != name) {
		return nil, &OpError{Op: "list", Object: name, Err: errors.New("dump did not return the set asked for")}
	}
	return sets, nil
}

// Index returns the set's index in the kernel's table of sets: what an
// nftables rule using the xt "set" match refers to. It needs protocol 7.
func (c *Conn) Index(ctx context.Context, name string) (uint16, error) {
	if err := checkName("index", name); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	replies, err := c.execute(ctx, encodeNamed(c.protocol, cmdGetByName, 0, name))
	if err != nil {
		return 0, opError("index", name, "", err)
	}
	idx, err := decodeIndex(replies)
	if err != nil {
		return 0, &OpError{Op: "index", Object: name, Err: err}
	}
	return idx, nil
}
