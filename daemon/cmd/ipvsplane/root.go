package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/conntracksettings"
	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/nodeaddrs"
	"github.com/ipvsplane/ipvsplane/daemon/internal/proxier"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// kernel is what the commands need of a *dataplane.Dataplane; tests open
// one on a dataplanetest node, and may wrap it.
type kernel interface {
	proxier.Dataplane
	DryRun(ctx context.Context, state *model.State) (*plan.Plan, []error, error)
	CheckScheduler(ctx context.Context, name string) error
	ReadAhead(ctx context.Context) error
	InitNode(ctx context.Context, node *model.Node) error
	Cleanup(ctx context.Context) error
	Handover(ctx context.Context) error
	Close() error
}

// app holds what the commands reach outside the process, so tests can
// replace it.
type app struct {
	stdout, stderr io.Writer
	newKernel      func(cfg *dataplane.Config) (kernel, error)
	now            func() time.Time
	// nodeAddrs lists the node's addresses (see nodeaddrs.Read).
	nodeAddrs func(ctx context.Context, device string) ([]netip.Addr, error)
	// kubeClient connects to the API server (see kubeClient).
	kubeClient func(o *options) (*watcher.Client, error)
	// eventSink records Events in the API server (see kubeEventSink).
	eventSink func(o *options) (events.Sink, error)
	// setConntrack writes the conntrack settings (see conntracksettings.Apply).
	setConntrack func(c *kubeproxy.KubeProxyConntrackConfiguration) (changed []string, skipped, err error)
	// build is what --version and `version` report (see readBuildInfo).
	build buildInfo
	// removeLegacy removes kube-proxy's iptables-legacy chains (see
	// legacyiptables.RemoveKubeProxy); nil leaves them.
	removeLegacy func(ctx context.Context) (legacyiptables.Report, error)
	// nodeIPsWait bounds how long a start from the API server waits for
	// its Node's IPs (defaultNodeIPsWait).
	nodeIPsWait time.Duration
	// kernelRelease is the running kernel's release (see unameRelease).
	kernelRelease func() (string, error)
}

func newApp() *app {
	return &app{
		stdout: os.Stdout, stderr: os.Stderr, now: time.Now, nodeIPsWait: defaultNodeIPsWait,
		newKernel: func(cfg *dataplane.Config) (kernel, error) { return dataplane.New(cfg) },
		nodeAddrs: nodeaddrs.Read, kubeClient: kubeClient, eventSink: kubeEventSink, build: readBuildInfo(),
		kernelRelease: unameRelease,
		setConntrack: func(c *kubeproxy.KubeProxyConntrackConfiguration) ([]string, error, error) {
			return conntracksettings.Apply(c, conntracksettings.OnlineCPUs(), conntracksettings.HostPaths())
		},
		removeLegacy: func(ctx context.Context) (legacyiptables.Report, error) {
			return legacyiptables.RemoveKubeProxy(ctx, "/proc/thread-self/net")
		},
	}
}

// execute runs the command line and returns the exit status.
func execute(a *app, args []string) int {
	cmd := a.rootCommand()
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if errors.Is(err, errVersionPrinted) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "ipvsplane: %v\n", err)
		return 1
	}
	return 0
}

func (a *app) rootCommand() *cobra.Command {
	lf := &logFlags{}
	root := a.newRootCommand(lf)
	run := a.runCommand(lf)
	// The root command is the run command too, with its own copy of the
	// flags.
	rootOpts := newOptions()
	rootOpts.addFlags(root.Flags())
	root.Args = noArgsSuggest
	root.SetFlagErrorFunc(flagError)
	root.RunE = a.withLogger(lf, a.run, rootOpts)
	root.AddCommand(run, a.applyCommand(lf), a.planCommand(lf), a.cleanupCommand(), a.statusCommand(), a.versionCommand())
	vf := &versionFlag{}
	vf.add(root.PersistentFlags())
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return vf.printVersion(a) }
	root.SetGlobalNormalizationFunc(wordSepNormalize)
	return root
}

// logFlags holds the values of the logging flags, which the commands
// that log (run, apply, plan) share.
type logFlags struct {
	level, format string
}

func (lf *logFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&lf.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&lf.format, "log-format", "console", "log format: json or console")
}

// commandWork is a command's work, run with its logger and options.
type commandWork func(context.Context, *zap.Logger, *options, *cobra.Command) error

// withLogger loads a command's options, then runs its work with the
// logger that the logging flags, over the --config file's logging
// section, ask for.
func (a *app) withLogger(lf *logFlags, w commandWork, o *options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		notes, loadErr := o.load(cmd.Flags())
		level, format := lf.level, lf.format
		if loadErr == nil {
			level, format = lf.withFile(cmd.Flags(), o)
		}
		log, err := newLogger(level, format, a.stderr)
		if err != nil {
			return err
		}
		defer log.Sync()
		logNotes(log, o, notes)
		if loadErr != nil {
			return loadErr
		}
		return w(cmd.Context(), log, o, cmd)
	}
}

// withFile returns the log level and format: the flags given, else
// kube-proxy's --v or the --config file's logging.verbosity and
// logging.format, else the flags' defaults. klog's verbosity 4 and above
// (kube-proxy's debug detail) is debug, lower is info; format text is
// console, json is json.
func (lf *logFlags) withFile(fs *pflag.FlagSet, o *options) (level, format string) {
	level, format = lf.level, lf.format
	l := o.kp.Logging
	if !fs.Changed("log-level") && l.Verbosity >= 4 {
		level = "debug"
	}
	if !fs.Changed("log-format") {
		switch l.Format {
		case "text":
			format = "console"
		case "json":
			format = "json"
		}
	}
	return level, format
}

// logNotes logs, once, what loading the options found to report.
func logNotes(log *zap.Logger, o *options, notes config.Notes) {
	if notes.Lenient != nil {
		log.Warn("using lenient decoding as strict decoding failed", zap.String("config", o.configFile), zap.Error(notes.Lenient))
	}
	for _, n := range notes.Info {
		log.Info(n, zap.String("config", o.configFile))
	}
	for _, f := range notes.Ignored {
		log.Warn("configuration field does not apply to ipvsplane; ignored", zap.String("field", f))
	}
	for _, f := range o.ignoredFlagsGiven() {
		log.Warn("kube-proxy flag does not apply to ipvsplane; ignored", zap.String("flag", f))
	}
}

// newRootCommand makes the root command with its logging flags, before
// its run flags and subcommands are added.
func (a *app) newRootCommand(lf *logFlags) *cobra.Command {
	root := &cobra.Command{
		Use:   "ipvsplane",
		Short: "Program a node's IPVS load balancer from Kubernetes Services, as kube-proxy's IPVS mode does",
		Long: `ipvsplane programs a node's IPVS load balancer from Kubernetes Services and
EndpointSlices, as kube-proxy does in IPVS mode, and can take its place: it
reads kube-proxy's configuration file and flags. Without a command it runs
the daemon (ipvsplane run).

It needs CAP_NET_ADMIN, Linux 4.18 or later with IPVS (the ip_vs module
and its schedulers) and a writable /proc/sys/net.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	lf.add(root.Flags())
	return root
}

// runCommand makes "ipvsplane run", the daemon.
func (a *app) runCommand(lf *logFlags) *cobra.Command {
	o := newOptions()
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: follow Services and EndpointSlices and keep the kernel in line (the default)",
		Args:  cobra.NoArgs,
		RunE:  a.withLogger(lf, a.run, o),
	}
	o.addFlags(run.Flags())
	lf.add(run.Flags())
	return run
}

// applyCommand makes "ipvsplane apply --once", a single sync.
func (a *app) applyCommand(lf *logFlags) *cobra.Command {
	o := newOptions()
	once := true
	apply := &cobra.Command{
		Use:   "apply --once",
		Short: "Sync the kernel once with the source's Services and EndpointSlices, and exit; non-zero if anything failed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !once {
				return errors.New("apply syncs once; to keep syncing, use ipvsplane run")
			}
			return a.withLogger(lf, a.apply, o)(cmd, args)
		},
	}
	o.addSyncFlags(apply.Flags())
	lf.add(apply.Flags())
	apply.Flags().BoolVar(&once, "once", true, "sync once and exit (the only mode of apply)")
	return apply
}

// planCommand makes "ipvsplane plan", a dry run.
func (a *app) planCommand(lf *logFlags) *cobra.Command {
	o := newOptions()
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Print the operations a sync would carry out against the kernel as it is (or, with --offline, an empty one); change nothing",
		Args:  cobra.NoArgs,
		RunE:  a.withLogger(lf, a.plan, o),
	}
	o.addPlanFlags(plan.Flags())
	lf.add(plan.Flags())
	plan.Flags().BoolVar(&o.offline, "offline", false, "plan against an empty kernel without reading it (no privileges, no IPVS needed): what the manifests and configuration would program on a fresh node")
	plan.Flags().StringSliceVar(&o.nodeAddresses, "node-addresses", nil, "with --offline, the node's addresses (node ports are served on them); without it, the InternalIP and ExternalIP addresses of the Node manifest")
	return plan
}

// cleanupCommand makes "ipvsplane cleanup".
func (a *app) cleanupCommand() *cobra.Command {
	stateFile := defaultStateFile
	handover := false
	cleanup := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove everything ipvsplane made in the kernel (its virtual servers, kube-ipvs0, its sets and rules), and nothing else",
		Long: `Remove everything ipvsplane made in the kernel (its virtual servers, kube-ipvs0,
its sets and rules), and nothing else.

With --handover, remove only ipvsplane's own nftables tables and ownership
sets, and leave the virtual servers, kube-ipvs0 and the KUBE-* sets for
kube-proxy (IPVS mode) to adopt with their open connections: stop ipvsplane,
start kube-proxy, wait for its first sync, then run this.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.cleanup(cmd.Context(), stateFile, handover)
		},
	}
	cleanup.Flags().StringVar(&stateFile, "state-file", stateFile, "the daemon's state file, removed too")
	cleanup.Flags().BoolVar(&handover, "handover", false, "hand the node back to kube-proxy: remove only ipvsplane's rules and ownership sets")
	return cleanup
}

// statusCommand makes "ipvsplane status".
func (a *app) statusCommand() *cobra.Command {
	stateFile := defaultStateFile
	top := defaultStatusTop
	format := "text"
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the services, their virtual and real servers with weights and connections, the sets, and the last sync",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--output %q: want text or json", format)
			}
			return a.status(cmd.Context(), stateFile, top, format)
		},
	}
	status.Flags().StringVar(&stateFile, "state-file", stateFile, "the daemon's state file")
	status.Flags().IntVar(&top, "top", top, "with the daemon's --service-traffic-metrics, the service ports shown with their rates, busiest by bytes/s first; 0 shows all")
	status.Flags().StringVarP(&format, "output", "o", format, "output format: text, or json for scripts (docs/status-json.md)")
	return status
}

// dial opens the kernel, and explains a kernel without IPVS.
func (a *app) dial(cfg *dataplane.Config) (kernel, error) {
	k, err := a.newKernel(cfg)
	if errors.Is(err, ipvs.ErrNotSupported) {
		return nil, fmt.Errorf("the kernel has no IPVS: load the ip_vs module (and the scheduler's, such as ip_vs_rr) or use a kernel built with CONFIG_IP_VS: %w", err)
	}
	return k, err
}

func (a *app) cleanup(ctx context.Context, stateFile string, handover bool) error {
	k, err := a.dial(&dataplane.Config{})
	if err != nil {
		return err
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	work := k.Cleanup
	if handover {
		work = k.Handover
	}
	if err := work(ctx); err != nil {
		return err
	}
	// As kube-proxy's --cleanup, in iptables-legacy's tables too.
	if !handover && a.removeLegacy != nil {
		r, err := a.removeLegacy(ctx)
		if len(r.Unreadable) > 0 {
			fmt.Fprintf(a.stderr, "ipvsplane: the node's iptables-legacy tables are in use, and %s is missing: kube-proxy's chains there, if any, are left\n", strings.Join(r.Unreadable, ", "))
		}
		if err != nil {
			return err
		}
	}
	if stateFile != "" {
		if err := os.Remove(stateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// defaultStatusTop is how many service ports `status` shows the traffic
// of.
const defaultStatusTop = 20

func (a *app) status(ctx context.Context, stateFile string, top int, format string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	view, err := status.ReadKernel(ctx, dataplane.DefaultDevice)
	if errors.Is(err, ipvs.ErrNotSupported) {
		return fmt.Errorf("the kernel has no IPVS (the ip_vs module): %w", err)
	}
	if err != nil {
		return err
	}
	rec, recErr := status.ReadRecord(stateFile)
	if format == "json" {
		traffic, trafficErr := status.ReadTraffic(stateFile)
		return status.PrintJSON(a.stdout, rec, recErr, view, traffic, trafficErr, top, a.now())
	}
	if err := status.Print(a.stdout, rec, recErr, view, a.now()); err != nil {
		return err
	}
	traffic, err := status.ReadTraffic(stateFile)
	return status.PrintTraffic(a.stdout, traffic, err, top, a.now())
}
