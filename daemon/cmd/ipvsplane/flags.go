package main

import (
	"strconv"

	"github.com/spf13/pflag"
)

// ignoredFlag is one of kube-proxy's flags that does not apply to
// ipvsplane: accepted with any value, so that a kube-proxy DaemonSet's
// arguments work unchanged, and reported once at start.
type ignoredFlag struct {
	name, value string
	isBool      bool
	set         bool
}

func (f *ignoredFlag) String() string { return f.value }
func (f *ignoredFlag) Type() string {
	if f.isBool {
		return "bool"
	}
	return "string"
}

func (f *ignoredFlag) Set(v string) error {
	if f.isBool {
		if _, err := strconv.ParseBool(v); err != nil {
			return err
		}
	}
	f.value, f.set = v, true
	return nil
}

// IsBoolFlag lets a boolean flag stand without a value.
func (f *ignoredFlag) IsBoolFlag() bool { return f.isBool }

// kube-proxy's flags (v1.37, with its logging flags) that ipvsplane
// accepts and ignores, and why.
var ignoredFlags = []struct {
	name, shorthand string
	isBool          bool
	why             string
}{
	{"feature-gates", "", false, "ipvsplane has no feature gates; it behaves as kube-proxy with its default gates"},
	{"bind-address", "", false, "the node's primary IPs come from its Node object"},
	{"bind-address-hard-fail", "", true, "a /healthz or /metrics address that cannot be bound always stops ipvsplane"},
	{"show-hidden-metrics-for-version", "", false, "ipvsplane hides no metrics"},
	{"oom-score-adj", "", false, "set the pod's OOM score through its resources instead"},
	{"iptables-localhost-nodeports", "", true, "iptables mode only"},
	{"iptables-sync-period", "", false, "iptables mode only; see --ipvs-sync-period"},
	{"iptables-min-sync-period", "", false, "iptables mode only; see --ipvs-min-sync-period"},
	{"vmodule", "", false, "see --log-level"},
	{"logging-format", "", false, "see --log-format"},
	{"log-flush-frequency", "", false, "ipvsplane's logs are not buffered"},
	{"log-text-split-stream", "", true, "ipvsplane logs to stderr"},
	{"log-text-info-buffer-size", "", false, "ipvsplane's logs are not buffered"},
	{"log-json-split-stream", "", true, "ipvsplane logs to stderr"},
	{"log-json-info-buffer-size", "", false, "ipvsplane's logs are not buffered"},
	{"boot-id-file", "", false, "not used"},
	{"machine-id-file", "", false, "not used"},
}

// addIgnoredFlags registers kube-proxy's flags that do not apply.
func (o *options) addIgnoredFlags(fs *pflag.FlagSet) {
	for _, f := range ignoredFlags {
		v := &ignoredFlag{name: f.name, isBool: f.isBool}
		o.ignored = append(o.ignored, v)
		flag := fs.VarPF(v, f.name, f.shorthand, "kube-proxy's flag, accepted and ignored: "+f.why)
		if f.isBool {
			flag.NoOptDefVal = "true"
		}
	}
}

// ignoredFlagsGiven lists the ignored flags the command line gave, as
// "--name=value (why)".
func (o *options) ignoredFlagsGiven() []string {
	var out []string
	for i, f := range o.ignored {
		if f.set {
			out = append(out, "--"+f.name+"="+f.value+" ("+ignoredFlags[i].why+")")
		}
	}
	return out
}
