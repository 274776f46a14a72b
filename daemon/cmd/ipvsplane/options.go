package main

import (
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/spf13/pflag"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// options are the settings of the commands that compute the desired state
// (run, apply, plan). Flags named like kube-proxy's write into a
// KubeProxyConfiguration, the same structure --config fills, so that both
// reach the daemon through one conversion.
type options struct {
	configFile string
	master     string
	source     string
	manifests  string
	stateFile  string
	// cleanup, initOnly and writeConfigTo are kube-proxy's flags that do
	// something and exit instead of running the daemon.
	cleanup       bool
	initOnly      bool
	writeConfigTo string
	// healthzPort and metricsPort are kube-proxy's deprecated flags: a
	// port for the bind addresses, 0 to turn the server off.
	healthzPort, metricsPort int32
	// offline (plan only) plans against an empty kernel without reading
	// it; nodeAddresses are then the node's addresses.
	offline       bool
	nodeAddresses []string
	// ignored are kube-proxy's flags that do not apply to ipvsplane.
	ignored []*ignoredFlag
	// memoryLimit is the --memory-limit flag: empty for the automatic
	// soft limit, "0" for none.
	memoryLimit string
	// own holds ipvsplane's settings that the --config file's ipvsplane
	// section sets too.
	own config.Own
	// kp holds kube-proxy's settings: defaults, then the --config file,
	// then the flags given on the command line.
	kp *kubeproxy.KubeProxyConfiguration
}

// The sources of Services and EndpointSlices.
const (
	sourceKubernetes = "kubernetes"
	sourceFiles      = "files"
)

// defaultDrainTimeout is the drain bound without --drain-timeout, the
// dataplane's own default.
const defaultDrainTimeout = dataplane.DefaultDrainTimeout

// defaultStateFile is where the daemon records its last sync for
// `ipvsplane status`.
const defaultStateFile = "/run/ipvsplane/status.json"

func newOptions() *options {
	return &options{source: sourceKubernetes, stateFile: defaultStateFile, own: config.DefaultOwn(), kp: config.Default(), healthzPort: config.HealthzPort, metricsPort: config.MetricsPort}
}

// addFlags registers the flags of run: every flag of kube-proxy (those
// that do not apply are accepted and ignored), and ipvsplane's own.
func (o *options) addFlags(fs *pflag.FlagSet) {
	o.addSyncFlags(fs)
	o.addDaemonFlags(fs)
}

// addPlanFlags registers the flags plan reads: the source's and those of
// the desired state. Those of kube-proxy keep its names and meanings.
func (o *options) addPlanFlags(fs *pflag.FlagSet) {
	kp := o.kp
	fs.StringVar(&o.configFile, "config", "", "kube-proxy's configuration file (a KubeProxyConfiguration); flags given on the command line override it")
	fs.StringVar(&kp.ClientConnection.Kubeconfig, "kubeconfig", "", "kubeconfig file with the API server's address and credentials; in a pod, the pod's service account is used when this and --master are empty")
	fs.StringVar(&o.master, "master", "", "the API server's address (overrides the kubeconfig's)")
	fs.StringVar(&kp.HostnameOverride, "hostname-override", "", "this node's name, if not the hostname")
	fs.Uint32VarP((*uint32)(&kp.Logging.Verbosity), "v", "v", uint32(kp.Logging.Verbosity), "klog's verbosity, as logging.verbosity: 4 or more logs at debug level unless --log-level says otherwise")
	fs.Float32Var(&kp.ClientConnection.QPS, "kube-api-qps", kp.ClientConnection.QPS, "queries per second to the API server")
	fs.Int32Var(&kp.ClientConnection.Burst, "kube-api-burst", kp.ClientConnection.Burst, "burst of queries to the API server")
	fs.StringVar(&kp.ClientConnection.ContentType, "kube-api-content-type", kp.ClientConnection.ContentType, "content type of requests to the API server")
	fs.StringVar(&o.source, "source", o.source, "where Services and EndpointSlices come from: kubernetes (the API server) or files (a directory of manifests, see --manifests)")
	fs.StringVar(&o.manifests, "manifests", "", "with --source=files, the directory of Service, EndpointSlice and Node manifests (YAML or JSON), watched for changes")
	fs.StringVar(&kp.ClusterCIDR, "cluster-cidr", "", "the pods' address ranges, comma-separated (one per family): traffic to service IPs from outside them is masqueraded")
	fs.BoolVar(&kp.IPTables.MasqueradeAll, "masquerade-all", false, "masquerade all traffic to service IPs")
	fs.Int32Var(kp.IPTables.MasqueradeBit, "iptables-masquerade-bit", *kp.IPTables.MasqueradeBit, "the fwmark bit (0-31) that marks packets for masquerade")
	fs.StringVar((*string)(&kp.Mode), "proxy-mode", string(kp.Mode), "only ipvs is supported; accepted for kube-proxy compatibility")
	fs.StringVar(&kp.IPVS.Scheduler, "ipvs-scheduler", "", "the IPVS scheduler (rr, wrr, lc, wlc, sh, mh, ...); empty means rr")
	fs.BoolVar(&kp.IPVS.StrictARP, "ipvs-strict-arp", false, "set arp_ignore=1 and arp_announce=2, so the service IPs on kube-ipvs0 are not announced")
	fs.StringSliceVar(&kp.IPVS.ExcludeCIDRs, "ipvs-exclude-cidrs", nil, "address ranges whose IPVS virtual servers are never removed")
	fs.StringSliceVar(&kp.NodePortAddresses, "nodeport-addresses", nil, "address ranges (or 'all') of the node addresses that serve node ports; empty means all")
	fs.StringVar((*string)(&kp.DetectLocalMode), "detect-local-mode", string(kp.DetectLocalMode), "how traffic from pods is told apart: ClusterCIDR, NodeCIDR, InterfaceNamePrefix or BridgeInterface")
	fs.StringVar(&kp.DetectLocal.InterfaceNamePrefix, "pod-interface-name-prefix", "", "with --detect-local-mode=InterfaceNamePrefix, the prefix of the pods' host-side interfaces")
	fs.StringVar(&kp.DetectLocal.BridgeInterface, "pod-bridge-interface", "", "with --detect-local-mode=BridgeInterface, the bridge the pods sit behind")
	fs.StringVar(&o.own.ServiceAddressBinding, "service-address-binding", o.own.ServiceAddressBinding, "how service IPs are bound to kube-ipvs0: address (as kube-proxy does; ip addr show lists them) or local-route (IPv4 ones as local routes, proto 201 in table local, which is faster to program for many services; IPv6 ones stay addresses) (config file: ipvsplane.serviceAddressBinding)")
	fs.StringSliceVar(&o.own.ExternalIPRanges, "external-ip-ranges", nil, "CIDRs, comma-separated, that a Service's external IPs must be in to be served; one outside gets no virtual server and an Event on its Service. Empty serves any, as kube-proxy does (config file: ipvsplane.externalIPRanges)")
	fs.StringSliceVar(&o.own.ProtectedPorts, "protected-ports", o.own.ProtectedPorts, "ports (PORT/PROTOCOL, comma-separated) of the node's own addresses that no external IP or load-balancer address gets a virtual server on, besides the ports run serves /healthz and /metrics on, which always are; empty protects those alone (config file: ipvsplane.protectedPorts)")
	fs.StringSliceVar(&o.own.AllowedSchedulers, "allowed-schedulers", nil, "the IPVS schedulers, comma-separated, that a Service's ipvsplane.io/scheduler annotation may name; another gets the node's scheduler and an Event. Empty allows any (config file: ipvsplane.allowedSchedulers)")
}

// addSyncFlags registers the flags apply reads: plan's, and the node's
// settings that a sync writes.
func (o *options) addSyncFlags(fs *pflag.FlagSet) {
	o.addPlanFlags(fs)
	kp := o.kp
	fs.DurationVar(&kp.IPVS.TCPTimeout.Duration, "ipvs-tcp-timeout", 0, "the IPVS timeout of idle TCP connections; 0 leaves the kernel's")
	fs.DurationVar(&kp.IPVS.TCPFinTimeout.Duration, "ipvs-tcpfin-timeout", 0, "the IPVS timeout of TCP connections after a FIN; 0 leaves the kernel's")
	fs.DurationVar(&kp.IPVS.UDPTimeout.Duration, "ipvs-udp-timeout", 0, "the IPVS timeout of UDP flows; 0 leaves the kernel's")
}

// addDaemonFlags registers the flags that only run reads: the daemon's
// periods, servers, conntrack settings, state and kube-proxy's one-shot
// flags.
func (o *options) addDaemonFlags(fs *pflag.FlagSet) {
	kp := o.kp
	c := &kp.Conntrack
	fs.DurationVar(&kp.IPVS.MinSyncPeriod.Duration, "ipvs-min-sync-period", kp.IPVS.MinSyncPeriod.Duration, "the shortest time between syncs (after a burst of 2); changes that come sooner are programmed together")
	fs.DurationVar(&kp.IPVS.SyncPeriod.Duration, "ipvs-sync-period", kp.IPVS.SyncPeriod.Duration, "the longest time between syncs; a periodic sync also rereads the kernel to repair outside changes")
	fs.StringVar(&kp.HealthzBindAddress, "healthz-bind-address", kp.HealthzBindAddress, "address and port of /healthz and /livez (a bare IP gets port 10256, or --healthz-port); empty disables them")
	fs.StringVar(&kp.MetricsBindAddress, "metrics-bind-address", kp.MetricsBindAddress, "address and port of /metrics (a bare IP gets port 10249, or --metrics-port); empty disables it")
	fs.BoolVar(&kp.EnableProfiling, "profiling", false, "serve Go's profiles under /debug/pprof/ on the metrics address")
	fs.DurationVar(&kp.ConfigSyncPeriod.Duration, "config-sync-period", kp.ConfigSyncPeriod.Duration, "accepted for kube-proxy compatibility; no effect: ipvsplane keeps no cache of objects to replay")
	fs.Int32Var(c.MaxPerCore, "conntrack-max-per-core", *c.MaxPerCore, "nf_conntrack_max per CPU (0 leaves the limit as it is and ignores --conntrack-min); the limit is only ever raised")
	fs.Int32Var(c.Min, "conntrack-min", *c.Min, "the least nf_conntrack_max, whatever --conntrack-max-per-core gives")
	fs.DurationVar(&c.TCPEstablishedTimeout.Duration, "conntrack-tcp-timeout-established", c.TCPEstablishedTimeout.Duration, "conntrack's timeout of idle established TCP connections (0 leaves it as it is)")
	fs.DurationVar(&c.TCPCloseWaitTimeout.Duration, "conntrack-tcp-timeout-close-wait", c.TCPCloseWaitTimeout.Duration, "conntrack's timeout of TCP connections in CLOSE_WAIT (0 leaves it as it is)")
	fs.BoolVar(&c.TCPBeLiberal, "conntrack-tcp-be-liberal", false, "set nf_conntrack_tcp_be_liberal, so TCP packets outside the window are not marked INVALID")
	fs.DurationVar(&c.UDPTimeout.Duration, "conntrack-udp-timeout", 0, "conntrack's timeout of UNREPLIED UDP flows (0 leaves it as it is)")
	fs.DurationVar(&c.UDPStreamTimeout.Duration, "conntrack-udp-timeout-stream", 0, "conntrack's timeout of ASSURED UDP flows (0 leaves it as it is)")
	fs.BoolVar(&o.cleanup, "cleanup", false, "remove what ipvsplane made and exit, as ipvsplane cleanup does")
	fs.BoolVar(&o.initOnly, "init-only", false, "make the settings that need full privileges (conntrack, the IPVS sysctls and timeouts, after the scheduler check), and exit")
	fs.StringVar(&o.writeConfigTo, "write-config-to", "", "write the configuration (defaults, the --config file and the flags) to this file as a KubeProxyConfiguration, and exit")
	fs.Int32Var(&o.healthzPort, "healthz-port", config.HealthzPort, "the port given to a --healthz-bind-address without one; 0 turns /healthz off")
	fs.MarkDeprecated("healthz-port", "use --healthz-bind-address")
	fs.Int32Var(&o.metricsPort, "metrics-port", config.MetricsPort, "the port given to a --metrics-bind-address without one; 0 turns /metrics off")
	fs.MarkDeprecated("metrics-port", "use --metrics-bind-address")
	o.addIgnoredFlags(fs)
	fs.StringVar(&o.memoryLimit, "memory-limit", "", "the daemon's soft memory limit (a quantity such as 256Mi; 0 for none); empty sets it after each full sync to the live heap and half again (at least 8 MiB more) plus the runtime's memory beside the heap. GOMEMLIMIT, if set, wins")
	fs.StringVar(&o.stateFile, "state-file", o.stateFile, "where the daemon records its last sync, for ipvsplane status; empty disables it")
	fs.BoolVar(&o.own.ServiceTrafficMetrics, "service-traffic-metrics", false, "export each service port's connections, packets and bytes (ipvsplane_service_*_total), and their rates to ipvsplane status, from one read of the IPVS counters every --service-traffic-metrics-interval")
	fs.DurationVar(&o.own.ServiceTrafficMetricsInterval.Duration, "service-traffic-metrics-interval", traffic.DefaultInterval, "how often --service-traffic-metrics reads the kernel; scrapes in between get the last reading")
	fs.DurationVar(&o.own.DrainTimeout.Duration, "drain-timeout", defaultDrainTimeout, "how long a real server whose endpoint left keeps its open TCP connections at weight 0 before it is deleted anyway; a Service's ipvsplane.io/drain-timeout annotation overrides it (config file: ipvsplane.drainTimeout)")
}

// load applies the --config file under the flags given on the command
// line, and returns what loading the file has to report.
func (o *options) load(fs *pflag.FlagSet) (config.Notes, error) {
	if o.configFile == "" {
		o.applyDeprecatedPorts(fs)
		return config.Notes{}, o.validate()
	}
	// Keep the values of the flags given, read the file into the
	// configuration the flags point into, then set the flags again.
	type given struct {
		flag  *pflag.Flag
		value string
		slice []string
	}
	var set []given
	fs.Visit(func(f *pflag.Flag) {
		g := given{flag: f, value: f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			g.slice = sv.GetSlice()
		}
		set = append(set, g)
	})
	cfg, notes, err := config.Load(o.configFile)
	if err != nil {
		return notes, err
	}
	// The flags point into the pointed-to values: keep those.
	rebind(o.kp.IPTables.MasqueradeBit, &cfg.IPTables.MasqueradeBit)
	rebind(o.kp.Conntrack.MaxPerCore, &cfg.Conntrack.MaxPerCore)
	rebind(o.kp.Conntrack.Min, &cfg.Conntrack.Min)
	rebind(o.kp.Conntrack.TCPEstablishedTimeout, &cfg.Conntrack.TCPEstablishedTimeout)
	rebind(o.kp.Conntrack.TCPCloseWaitTimeout, &cfg.Conntrack.TCPCloseWaitTimeout)
	*o.kp = cfg.KubeProxyConfiguration
	o.own = cfg.IPVSPlane
	for _, g := range set {
		if sv, ok := g.flag.Value.(pflag.SliceValue); ok {
			err = sv.Replace(g.slice)
		} else {
			err = g.flag.Value.Set(g.value)
		}
		if err != nil {
			return notes, fmt.Errorf("--%s: %w", g.flag.Name, err)
		}
	}
	o.applyDeprecatedPorts(fs)
	return notes, o.validate()
}

// rebind stores the value *fromFile points to in flagTarget, which a flag
// points to, and points *fromFile there.
func rebind[T any](flagTarget *T, fromFile **T) {
	*flagTarget = **fromFile
	*fromFile = flagTarget
}

// applyDeprecatedPorts completes the bind addresses as kube-proxy does
// with --healthz-port and --metrics-port (10256 and 10249 unless given): 0
// turns the server off, another port is appended to an address that is a
// bare IP, and an address with a port keeps it.
func (o *options) applyDeprecatedPorts(fs *pflag.FlagSet) {
	for _, p := range []struct {
		flag string
		port int32
		addr *string
	}{{"healthz-port", o.healthzPort, &o.kp.HealthzBindAddress}, {"metrics-port", o.metricsPort, &o.kp.MetricsBindAddress}} {
		if fs.Changed(p.flag) && p.port == 0 {
			*p.addr = ""
			continue
		}
		*p.addr = config.AppendPortIfNeeded(*p.addr, int(p.port))
	}
}

func (o *options) validate() error {
	switch o.source {
	case sourceKubernetes:
	case sourceFiles:
		if o.manifests == "" {
			return fmt.Errorf("--source=files needs --manifests DIR")
		}
	default:
		return fmt.Errorf("--source: want kubernetes or files, got %q", o.source)
	}
	if _, err := parseBinding(o.own.ServiceAddressBinding); err != nil {
		return err
	}
	if d := o.own.DrainTimeout.Duration; d <= 0 {
		return fmt.Errorf("--drain-timeout (or ipvsplane.drainTimeout in --config) must be positive, got %v", d)
	}
	if err := config.Validate(o.kp); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	// A reading is a dump of every virtual server: not many a second.
	if o.own.ServiceTrafficMetricsInterval.Duration < time.Second {
		return fmt.Errorf("--service-traffic-metrics-interval must be at least 1s, got %v", o.own.ServiceTrafficMetricsInterval.Duration)
	}
	return nil
}

// parseBinding reads --service-address-binding.
func parseBinding(s string) (dummy.Binding, error) {
	for _, b := range []dummy.Binding{dummy.BindAddresses, dummy.BindLocalRoutes} {
		if s == b.String() {
			return b, nil
		}
	}
	return 0, fmt.Errorf("--service-address-binding (or ipvsplane.serviceAddressBinding in --config): want %s or %s, got %q", dummy.BindAddresses, dummy.BindLocalRoutes, s)
}

// binding is the validated --service-address-binding.
func (o *options) binding() dummy.Binding {
	b, _ := parseBinding(o.own.ServiceAddressBinding)
	return b
}
