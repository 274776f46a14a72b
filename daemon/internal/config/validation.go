package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
)

// Validate refuses what kube-proxy's validation
// (pkg/proxy/apis/config/validation) refuses in the fields that matter to
// IPVS mode and the generic ones, with its messages: the fields are named
// by kube-proxy's internal configuration type's path
// (KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPTimeout), as its
// errors name them. Its checks of feature gates and of
// showHiddenMetricsForVersion, which ipvsplane ignores, are left out.
func Validate(kp *kubeproxy.KubeProxyConfiguration) error {
	root := fieldpath.NewPath("KubeProxyConfiguration")
	var errs fieldpath.ErrorList
	if b := kp.IPTables.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, fieldpath.Invalid(root.Child("KubeProxyIPTablesConfiguration", "MasqueradeBit"), b, "must be within the range [0, 31]"))
	}
	// kube-proxy checks these in IPVS mode only; ipvsplane always uses
	// them.
	ipvs := root.Child("KubeProxyIPVSConfiguration")
	errs = append(errs, nonNegative(ipvs.Child("TCPTimeout"), kp.IPVS.TCPTimeout)...)
	errs = append(errs, nonNegative(ipvs.Child("TCPFinTimeout"), kp.IPVS.TCPFinTimeout)...)
	errs = append(errs, nonNegative(ipvs.Child("UDPTimeout"), kp.IPVS.UDPTimeout)...)
	for i, c := range kp.IPVS.ExcludeCIDRs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			errs = append(errs, fieldpath.Invalid(ipvs.Child("ExcludeCidrs").Index(i), c, "must be a valid CIDR"))
		}
	}
	errs = append(errs, validateLinux(kp, root.Child("KubeProxyLinuxConfiguration"))...)
	if m := kp.Mode; m != "" && m != "iptables" && m != "ipvs" && m != "nftables" {
		errs = append(errs, fieldpath.Invalid(root.Child("Mode", "ProxyMode"), string(m), "must be iptables, ipvs, nftables or blank (blank means the best-available proxy [currently iptables])"))
	}
	if kp.ClientConnection.Burst < 0 {
		errs = append(errs, fieldpath.Invalid(root.Child("ClientConnection", "Burst"), int64(kp.ClientConnection.Burst), "must be greater than or equal to 0"))
	}
	errs = append(errs, validatePeriods(kp, root)...)
	if kp.BindAddress != "" && netutils.ParseIPSloppy(kp.BindAddress) == nil {
		errs = append(errs, fieldpath.Invalid(root.Child("BindAddress"), kp.BindAddress, "not a valid textual representation of an IP address"))
	}
	// Empty turns a server off in ipvsplane; kube-proxy defaults it.
	if kp.HealthzBindAddress != "" {
		errs = append(errs, validateHostPort(kp.HealthzBindAddress, root.Child("HealthzBindAddress"))...)
	}
	if kp.MetricsBindAddress != "" {
		errs = append(errs, validateHostPort(kp.MetricsBindAddress, root.Child("MetricsBindAddress"))...)
	}
	errs = append(errs, validateNodePortAddresses(kp.NodePortAddresses, root.Child("NodePortAddresses"))...)
	errs = append(errs, validateDetectLocal(kp, root)...)
	errs = append(errs, validateLogging(kp, root.Child("logging"))...)
	return errs.ToAggregate()
}

// validateLogging runs component-base's validation of the logging
// section, as kube-proxy does, with the logging feature gates the file's
// featureGates set (LoggingAlphaOptions off and LoggingBetaOptions on by
// default). Its check of klog's own flags is left out: kube-proxy never
// sets them.
func validateLogging(kp *kubeproxy.KubeProxyConfiguration, p *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	c := &kp.Logging
	if c.FlushFrequency.Duration.Duration <= 0 {
		errs = append(errs, fieldpath.Invalid(p.Child("flushFrequency"), c.FlushFrequency, "Must be greater than zero"))
	}
	switch c.Format {
	case "", "text":
	case "json":
		if on, set := kp.FeatureGates[loggingBeta]; set && !on {
			errs = append(errs, fieldpath.Forbidden(p.Child("format"), "Log format json is disabled, see "+loggingBeta+" feature"))
		}
	default:
		errs = append(errs, fieldpath.Invalid(p.Child("format"), c.Format, "Unsupported log format"))
	}
	if c.Verbosity > math.MaxInt32 {
		errs = append(errs, fieldpath.Invalid(p.Child("verbosity"), c.Verbosity, fmt.Sprintf("Must be <= %d", math.MaxInt32)))
	}
	vmodule := p.Child("vmodule")
	if len(c.VModule) > 0 && c.Format != "" && c.Format != "text" {
		errs = append(errs, fieldpath.Forbidden(vmodule, "Only supported for text log format"))
	}
	for i, item := range c.VModule {
		if item.FilePattern == "" {
			errs = append(errs, fieldpath.Required(vmodule.Index(i), "File pattern must not be empty"))
		}
		if strings.ContainsAny(item.FilePattern, "=,") {
			errs = append(errs, fieldpath.Invalid(vmodule.Index(i), item.FilePattern, "File pattern must not contain equal sign or comma"))
		}
		if item.Verbosity > math.MaxInt32 {
			errs = append(errs, fieldpath.Invalid(vmodule.Index(i), item.Verbosity, fmt.Sprintf("Must be <= %d", math.MaxInt32)))
		}
	}
	if !kp.FeatureGates[loggingAlpha] {
		opts := p.Child("options")
		for _, o := range []struct {
			format       string
			splitStream  bool
			bufferedInfo bool
		}{
			{"text", c.Options.Text.SplitStream, c.Options.Text.InfoBufferSize.Value() != 0},
			{"json", c.Options.JSON.SplitStream, c.Options.JSON.InfoBufferSize.Value() != 0},
		} {
			if o.splitStream {
				errs = append(errs, fieldpath.Forbidden(opts.Child(o.format, "splitStream"), "Feature "+loggingAlpha+" is disabled"))
			}
			if o.bufferedInfo {
				errs = append(errs, fieldpath.Forbidden(opts.Child(o.format, "infoBufferSize"), "Feature "+loggingAlpha+" is disabled"))
			}
		}
	}
	return errs
}

// The feature gates of component-base's logging options.
const (
	loggingAlpha = "LoggingAlphaOptions"
	loggingBeta  = "LoggingBetaOptions"
)

func nonNegative(p *fieldpath.Path, d metav1.Duration) fieldpath.ErrorList {
	if d.Duration < 0 {
		return fieldpath.ErrorList{fieldpath.Invalid(p, d, "must be greater than or equal to 0")}
	}
	return nil
}

// validateLinux checks the conntrack settings and oomScoreAdj.
func validateLinux(kp *kubeproxy.KubeProxyConfiguration, p *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	ct, c := p.Child("KubeProxyConntrackConfiguration"), kp.Conntrack
	if c.MaxPerCore != nil && *c.MaxPerCore < 0 {
		errs = append(errs, fieldpath.Invalid(ct.Child("MaxPerCore"), c.MaxPerCore, "must be greater than or equal to 0"))
	}
	if c.Min != nil && *c.Min < 0 {
		errs = append(errs, fieldpath.Invalid(ct.Child("Min"), c.Min, "must be greater than or equal to 0"))
	}
	if c.TCPEstablishedTimeout != nil {
		errs = append(errs, nonNegative(ct.Child("TCPEstablishedTimeout"), *c.TCPEstablishedTimeout)...)
	}
	if c.TCPCloseWaitTimeout != nil {
		errs = append(errs, nonNegative(ct.Child("TCPCloseWaitTimeout"), *c.TCPCloseWaitTimeout)...)
	}
	errs = append(errs, nonNegative(ct.Child("UDPTimeout"), c.UDPTimeout)...)
	errs = append(errs, nonNegative(ct.Child("UDPStreamTimeout"), c.UDPStreamTimeout)...)
	if o := kp.OOMScoreAdj; o != nil && (*o < -1000 || *o > 1000) {
		errs = append(errs, fieldpath.Invalid(p.Child("OOMScoreAdj"), *o, "must be within the range [-1000, 1000]"))
	}
	return errs
}

// validatePeriods checks the sync periods: IPVS mode's are kube-proxy's
// SyncPeriod and MinSyncPeriod.
func validatePeriods(kp *kubeproxy.KubeProxyConfiguration, root *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	if kp.ConfigSyncPeriod.Duration <= 0 {
		errs = append(errs, fieldpath.Invalid(root.Child("ConfigSyncPeriod"), kp.ConfigSyncPeriod, "must be greater than 0"))
	}
	sync, minSync := kp.IPVS.SyncPeriod, kp.IPVS.MinSyncPeriod
	if sync.Duration <= 0 {
		errs = append(errs, fieldpath.Invalid(root.Child("SyncPeriod"), sync, "must be greater than 0"))
	}
	if minSync.Duration < 0 {
		errs = append(errs, fieldpath.Invalid(root.Child("MinSyncPeriod"), minSync, "must be greater than or equal to 0"))
	}
	if minSync.Duration > sync.Duration {
		errs = append(errs, fieldpath.Invalid(root.Child("SyncPeriod"), minSync, "must be greater than or equal to "+root.Child("MinSyncPeriod").String()))
	}
	return errs
}

// validateHostPort wants IP:port. Port 0 (a port the kernel picks) is
// accepted, where kube-proxy wants 1-65535.
func validateHostPort(s string, p *fieldpath.Path) fieldpath.ErrorList {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fieldpath.ErrorList{fieldpath.Invalid(p, s, "must be IP:port")}
	}
	var errs fieldpath.ErrorList
	if netutils.ParseIPSloppy(host) == nil {
		errs = append(errs, fieldpath.Invalid(p, host, "must be a valid IP"))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		errs = append(errs, fieldpath.Invalid(p, port, "must be a valid port"))
	}
	return errs
}

func validateNodePortAddresses(list []string, p *fieldpath.Path) fieldpath.ErrorList {
	var errs fieldpath.ErrorList
	seen := map[string]bool{}
	for i, a := range list {
		switch a {
		case "primary", "localhost", "all":
			if seen[a] {
				errs = append(errs, fieldpath.Duplicate(p.Index(i), a))
			}
			seen[a] = true
			continue
		}
		if _, _, err := netutils.ParseCIDRSloppy(a); err != nil {
			errs = append(errs, fieldpath.Invalid(p.Index(i), a, "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'"))
		}
	}
	return errs
}

// validateDetectLocal checks detectLocalMode and what it needs.
func validateDetectLocal(kp *kubeproxy.KubeProxyConfiguration, root *fieldpath.Path) fieldpath.ErrorList {
	modes := []string{"ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""}
	mode := string(kp.DetectLocalMode)
	found := false
	for _, m := range modes {
		found = found || m == mode
	}
	if !found {
		return fieldpath.ErrorList{fieldpath.NotSupported(root.Child("DetectLocalMode"), mode, modes)}
	}
	p := root.Child("DetectLocalConfiguration")
	switch mode {
	case "BridgeInterface":
		if kp.DetectLocal.BridgeInterface == "" {
			return fieldpath.ErrorList{fieldpath.Invalid(p.Child("InterfaceName"), "", "must not be empty")}
		}
	case "InterfaceNamePrefix":
		if kp.DetectLocal.InterfaceNamePrefix == "" {
			return fieldpath.ErrorList{fieldpath.Invalid(p.Child("InterfacePrefix"), "", "must not be empty")}
		}
	case "ClusterCIDR":
		if kp.ClusterCIDR != "" {
			return validateClusterCIDRs(strings.Split(kp.ClusterCIDR, ","), p.Child("ClusterCIDRs"))
		}
	}
	return nil
}

// validateClusterCIDRs wants one range, or one of each family.
func validateClusterCIDRs(cidrs []string, p *fieldpath.Path) fieldpath.ErrorList {
	const pair = "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]"
	if len(cidrs) > 2 {
		return fieldpath.ErrorList{fieldpath.Invalid(p, cidrs, pair)}
	}
	var errs fieldpath.ErrorList
	for i, c := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			errs = append(errs, fieldpath.Invalid(p.Index(i), c, "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)"))
		}
	}
	if len(cidrs) == 2 {
		if dual, err := netutils.IsDualStackCIDRStrings(cidrs); err == nil && !dual {
			errs = append(errs, fieldpath.Invalid(p, cidrs, pair))
		}
	}
	return errs
}
