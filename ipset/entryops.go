package ipset

import (
	"context"
	"errors"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Add adds one entry; with Exclusive it fails with ErrEntryExist if the
// entry is there, otherwise an existing entry gets e's timeout and comment.
// For many entries use AddEntries.
func (c *Conn) Add(ctx context.Context, name string, e Entry, mode Mode) error {
	return c.entryCmd(ctx, "add", cmdAdd, name, e, mode == Exclusive)
}

// Delete removes one entry; with Exclusive it fails with ErrEntryNotExist
// if the entry is not there.
func (c *Conn) Delete(ctx context.Context, name string, e Entry, mode Mode) error {
	return c.entryCmd(ctx, "delete", cmdDel, name, e, mode == Exclusive)
}

// Test reports whether the set holds e. For a hash:net set, an address
// inside a stored network matches.
func (c *Conn) Test(ctx context.Context, name string, e Entry) (bool, error) {
	err := c.entryCmd(ctx, "test", cmdTest, name, e, false)
	if errors.Is(err, unix.Errno(errExist)) {
		return false, nil
	}
	return err == nil, err
}

func (c *Conn) entryCmd(ctx context.Context, op string, cmd uint8, name string, e Entry, exclusive bool) error {
	if err := checkName(op, name); err != nil {
		return err
	}
	r := encodeEntryCmd(c.protocol, cmd, name, e, exclusive)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.execute(ctx, r)
	if err == nil {
		return nil
	}
	return c.entryError(ctx, op, name, e, err)
}

// entryError wraps a kernel error about an entry.
func (c *Conn) entryError(ctx context.Context, op, name string, e Entry, err error) error {
	var typ Type
	var nerr *nl.Error
	if errors.As(err, &nerr) {
		typ = c.typeForErrno(ctx, name, nerr.Errno)
	}
	return opError(op, name+" "+e.String(), typ, err)
}

// typeForErrno looks the set's type up when the error number is
// type-specific: "full" for a hash is "out of range" for a bitmap. It is
// best effort; an unknown type leaves the errno without a sentinel.
func (c *Conn) typeForErrno(ctx context.Context, name string, errno unix.Errno) Type {
	if errno < errTypeSpecific {
		return ""
	}
	h, err := c.kind(ctx, name)
	if err != nil {
		return ""
	}
	return h.Type
}
