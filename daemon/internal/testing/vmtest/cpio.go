package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// archive collects the guest's files and writes them as a cpio "newc"
// archive, the format the kernel unpacks into its initramfs.
type archive struct {
	entries map[string]entry
}

type entry struct {
	mode    uint32 // type and permission bits as in stat(2)
	content []byte // for generated files and symlink targets
	source  string // a host file to copy, when content is nil
}

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
)

func newArchive() *archive { return &archive{entries: map[string]entry{}} }

// dir adds name and its parents as directories.
func (a *archive) dir(name string) {
	for name = path.Clean(name); name != "/" && name != "."; name = path.Dir(name) {
		if _, ok := a.entries[name]; ok {
			return
		}
		a.entries[name] = entry{mode: modeDir | 0o755}
	}
}

func (a *archive) file(name string, perm uint32, content []byte) {
	a.dir(path.Dir(name))
	a.entries[path.Clean(name)] = entry{mode: modeFile | perm, content: content}
}

// copy adds a host file under the guest path name, keeping its permissions.
func (a *archive) copy(name, source string) error {
	info, err := os.Stat(source)
	if err != nil {
		return err
	}
	a.dir(path.Dir(name))
	a.entries[path.Clean(name)] = entry{mode: modeFile | uint32(info.Mode().Perm()), source: source}
	return nil
}

func (a *archive) symlink(name, target string) {
	a.dir(path.Dir(name))
	a.entries[path.Clean(name)] = entry{mode: modeSymlink | 0o777, content: []byte(target)}
}

// write emits the entries, parents before children, and the trailer.
func (a *archive) write(w io.Writer) error {
	names := make([]string, 0, len(a.entries))
	for name := range a.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		e := a.entries[name]
		data := e.content
		if data == nil && e.source != "" {
			var err error
			if data, err = os.ReadFile(e.source); err != nil {
				return err
			}
		}
		if err := writeHeader(w, uint32(i+1), strings.TrimPrefix(name, "/"), e.mode, len(data)); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if err := pad(w, len(data)); err != nil {
			return err
		}
	}
	return writeHeader(w, 0, "TRAILER!!!", 0, 0)
}

// writeHeader writes a newc header: the magic, thirteen 8-digit hex fields,
// the NUL-terminated name, padded to four bytes.
func writeHeader(w io.Writer, ino uint32, name string, mode uint32, size int) error {
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	_, err := fmt.Fprintf(w, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%s\x00",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0, name)
	if err != nil {
		return err
	}
	return pad(w, 110+len(name)+1)
}

func pad(w io.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
