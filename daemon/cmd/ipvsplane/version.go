package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is the release ipvsplane reports: set at build time with
// -ldflags "-X main.version=v1.2.3"; empty takes the module's build
// information.
var version string

// revision is the commit ipvsplane was built from: set at build time with
// -ldflags "-X main.revision=<commit>"; empty takes the module's build
// information (go build's vcs.revision, when it stamped one).
var revision string

// buildVersion returns the version the binary reports.
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// buildInfo describes the binary: what `ipvsplane version` prints, the
// start-up log line carries and ipvsplane_build_info's labels hold.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
	Compiler  string `json:"compiler"`
	Platform  string `json:"platform"`
}

// readBuildInfo returns the running binary's build information.
func readBuildInfo() buildInfo {
	b := buildInfo{
		Version: buildVersion(), Revision: revision, GoVersion: runtime.Version(),
		Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok && b.Revision == "" {
		b.Revision = vcsRevision(bi.Settings)
	}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	return b
}

// vcsRevision is the commit go build stamped, with "-dirty" when the
// tree had changes, as git describe --dirty writes it.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev string
	dirty := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// printBuildInfo writes `ipvsplane version`'s output: text (the
// --version line, then the rest) or json (the buildInfo object).
func printBuildInfo(w io.Writer, b buildInfo, format string) error {
	switch format {
	case "json":
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(b)
	case "text", "":
		_, err := fmt.Fprintf(w, "ipvsplane %s\nrevision: %s\ngo: %s (%s, %s)\n", b.Version, b.Revision, b.GoVersion, b.Compiler, b.Platform)
		return err
	}
	return fmt.Errorf("--output %q: want text or json", format)
}

// versionFlag is kube-proxy's --version: a boolean that also takes "raw"
// (the build's details) or a version starting with "v" (reported instead
// of the binary's).
type versionFlag struct {
	// print is "", "true" or "raw"; override is a version given.
	print, override string
}

func (v *versionFlag) String() string {
	if v.print == "" {
		return "false"
	}
	return v.print
}

func (v *versionFlag) Type() string { return "version" }

// IsBoolFlag lets --version stand without a value.
func (v *versionFlag) IsBoolFlag() bool { return true }

func (v *versionFlag) Set(s string) error {
	switch {
	case s == "raw":
		v.print = "raw"
	case strings.HasPrefix(s, "v"):
		v.print, v.override = "true", s
	default:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.print = ""
		if b {
			v.print = "true"
		}
	}
	return nil
}

func (v *versionFlag) add(fs *pflag.FlagSet) {
	f := fs.VarPF(v, "version", "", "print the version and exit; --version=raw prints the build's details, --version=vX.Y.Z reports that version")
	f.NoOptDefVal = "true"
}

// errVersionPrinted ends a command that printed the version: exit 0.
var errVersionPrinted = errors.New("version printed")

// printVersion prints the version if --version asked for it, and then
// returns errVersionPrinted.
func (v *versionFlag) printVersion(a *app) error {
	reported := a.build.Version
	if v.override != "" {
		reported = v.override
	}
	switch v.print {
	case "true":
		fmt.Fprintf(a.stdout, "ipvsplane %s\n", reported)
	case "raw":
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			fmt.Fprintf(a.stdout, "ipvsplane %s (no build information)\n", reported)
			break
		}
		fmt.Fprintf(a.stdout, "version\t%s\n%s", reported, bi)
	default:
		return nil
	}
	return errVersionPrinted
}

// versionCommand makes "ipvsplane version".
func (a *app) versionCommand() *cobra.Command {
	format := "text"
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit, and the Go toolchain and platform ipvsplane was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printBuildInfo(a.stdout, a.build, format)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", format, "output format: text or json")
	return cmd
}

// wordSepNormalize spells a flag's underscores as dashes, as kube-proxy's
// flag set does: --hostname_override is --hostname-override.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}
