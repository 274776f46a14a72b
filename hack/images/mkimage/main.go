// Command mkimage builds a single-layer container image from files on this
// machine and writes it as an OCI image layout in a tar file, which
// `ctr images import` (containerd) and other OCI tools read. No Docker
// daemon or registry is involved.
//
//	mkimage -o OUT.tar -ref NAME:TAG [-ref NAME:TAG ...]
//	        [-add HOST=GUEST ...] [-dir PATH ...] [-symlink NAME=TARGET ...]
//	        [-busybox PATH]
//	        [-entrypoint PATH] [-arg ARG ...] [-user UID] [-env K=V ...]
//	        [-uncompressed]
//
// Every -ref names the same image in the archive. -add copies a host file
// to GUEST, following symlinks (for a dynamically linked program, add its
// libraries too: hack/build-images does, from ldd). -busybox installs a
// static busybox as /bin/busybox with a link for each applet that no -add
// file already provides. /etc/passwd, /etc/group and /etc/nsswitch.conf get
// defaults unless -add gives them. The layer's files all have time zero, so the same
// inputs give the same image digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// spec is what one image is built from.
type spec struct {
	out        string
	refs       []string
	adds       []string // HOST=GUEST
	dirs       []string // empty directories
	symlinks   []string // NAME=TARGET
	busybox    string
	entrypoint string
	args       []string
	user       string
	env        []string
	// uncompressed stores the layer as a plain tar: bigger, but a node
	// under emulation imports it without the gunzip that dominates there.
	uncompressed bool
}

func main() {
	var s spec
	var refs, adds, dirs, symlinks, args, env listFlag
	flag.StringVar(&s.out, "o", "", "the OCI archive to write")
	flag.Var(&refs, "ref", "an image reference, NAME:TAG (repeatable)")
	flag.Var(&adds, "add", "HOST=GUEST: a file to copy in (repeatable)")
	flag.Var(&dirs, "dir", "an empty directory to make (repeatable)")
	flag.Var(&symlinks, "symlink", "NAME=TARGET: a symbolic link (repeatable)")
	flag.StringVar(&s.busybox, "busybox", "", "a static busybox to install with its applets")
	flag.StringVar(&s.entrypoint, "entrypoint", "", "the image's entrypoint")
	flag.Var(&args, "arg", "a default argument (repeatable)")
	flag.StringVar(&s.user, "user", "", "the user the image runs as (default root)")
	flag.BoolVar(&s.uncompressed, "uncompressed", false, "store the layer uncompressed")
	flag.Var(&env, "env", "K=V: an environment variable (repeatable; PATH has a default)")
	flag.Parse()
	s.refs, s.adds, s.dirs, s.symlinks, s.args, s.env = refs, adds, dirs, symlinks, args, env
	if s.out == "" || len(s.refs) == 0 {
		fmt.Fprintln(os.Stderr, "mkimage: -o and at least one -ref are required")
		os.Exit(2)
	}
	if err := build(s); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %s: %v\n", s.out, err)
		os.Exit(1)
	}
}
