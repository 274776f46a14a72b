// Command mkimage builds a single-layer container image from files on this
// machine and writes it as an OCI image layout in a tar file, which
// `ctr images import` (containerd) and other OCI tools read. No Docker
// daemon or registry is involved.
//
//	mkimage -o OUT.tar -ref NAME:TAG [-ref NAME:TAG ...]
//	        [-add HOST=GUEST ...] [-dir PATH ...] [-symlink NAME=TARGET ...]
//	        [-busybox PATH]
//	        [-entrypoint PATH] [-arg ARG ...] [-user UID] [-env K=V ...]
//	        [-uncompressed] [-platform OS/ARCH ...]
//	mkimage -inspect ARCHIVE
//
// Every -ref names the same image in the archive. -add copies a host file
// to GUEST, following symlinks; {os} and {arch} in HOST stand for each
// -platform's, so one description builds the image for every platform.
// With one -platform (default linux/amd64) each reference names that
// image's manifest; with several it names one image index that lists a
// manifest per platform, the shape multi-platform images are published in (for a dynamically linked program, add its
// libraries too: hack/build-images does, from ldd). -busybox installs a
// static busybox as /bin/busybox with a link for each applet that no -add
// file already provides. /etc/passwd, /etc/group and /etc/nsswitch.conf get
// defaults unless -add gives them. -inspect prints, for each reference and
// platform of an archive, the platform, entrypoint and user its config
// gives. The layer's files all have time zero, so the same
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
	platforms  []platform
	// uncompressed stores the layer as a plain tar: bigger, but a node
	// under emulation imports it without the gunzip that dominates there.
	uncompressed bool
}

func main() {
	var s spec
	var refs, adds, dirs, symlinks, args, env, platforms listFlag
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
	flag.Var(&platforms, "platform", "OS/ARCH: a platform to build for (repeatable; default linux/amd64)")
	inspectFile := flag.String("inspect", "", "print what ARCHIVE's images are, per reference and platform")
	flag.Parse()
	if *inspectFile != "" {
		images, err := inspect(*inspectFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mkimage: %s: %v\n", *inspectFile, err)
			os.Exit(1)
		}
		for _, img := range images {
			fmt.Println(img)
		}
		return
	}
	s.refs, s.adds, s.dirs, s.symlinks, s.args, s.env = refs, adds, dirs, symlinks, args, env
	if s.out == "" || len(s.refs) == 0 {
		fmt.Fprintln(os.Stderr, "mkimage: -o and at least one -ref are required")
		os.Exit(2)
	}
	for _, p := range platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok || osName == "" || arch == "" {
			fmt.Fprintf(os.Stderr, "mkimage: -platform %q: want OS/ARCH\n", p)
			os.Exit(2)
		}
		s.platforms = append(s.platforms, platform{os: osName, arch: arch})
	}
	if err := build(s); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %s: %v\n", s.out, err)
		os.Exit(1)
	}
}
