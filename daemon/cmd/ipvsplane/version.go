package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// version is the release ipvsplane reports: set at build time with
// -ldflags "-X main.version=v1.2.3"; empty takes the module's build
// information.
var version string

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
	reported := a.version
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

// wordSepNormalize spells a flag's underscores as dashes, as kube-proxy's
// flag set does: --hostname_override is --hostname-override.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}
