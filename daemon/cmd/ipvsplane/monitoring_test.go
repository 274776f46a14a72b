//go:build !vmtest

// The VM has only the package's testdata/, not deploy/.

package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

const monitoringDir = "../../../deploy/monitoring/"

// Every metric deploy/monitoring's dashboard and alert rules name is one
// the daemon serves: its registry's metrics (a histogram's _bucket, _sum
// and _count series included), with --service-traffic-metrics' too.
func TestMonitoringMetricNames(t *testing.T) {
	served := servedMetricNames(t)
	// Prometheus' own series of each target: the alerts on the target.
	served["up"] = true
	exprs := map[string][]string{}
	exprs["ipvsplane-dashboard.json"] = dashboardExprs(t, monitoringDir+"ipvsplane-dashboard.json")
	exprs["ipvsplane-rules.yaml"] = ruleExprs(t, monitoringDir+"ipvsplane-rules.yaml")
	for file, list := range exprs {
		if len(list) == 0 {
			t.Errorf("%s: no expressions", file)
		}
		for _, e := range list {
			names := promqlMetricNames(e)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", file, e)
			}
			for _, n := range names {
				if !served[n] {
					t.Errorf("%s: %q names %s, which the daemon does not serve", file, e, n)
				}
			}
		}
	}
}

// servedMetricNames lists the series names the daemon can serve: every
// metric its registry describes, and the _bucket, _sum and _count series
// of its histograms.
func servedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New().SetBuild(metrics.Build(readBuildInfo()))
	m.Registry().MustRegister(traffic.New(nil, nil))
	descs := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(descs)
		close(descs)
	}()
	// A Desc tells its name only in its String form.
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("no name in %s", d)
		}
		names[match[1]] = true
	}
	// The histograms, observed so that Gather tells their type.
	for _, full := range []bool{true, false} {
		m.ObserveSync(metrics.Sync{
			Result: &dataplane.Result{Full: full, Plan: &plan.Plan{}, Flows: dataplane.FlowCleanup{Ran: inet.PerFamily[bool]{true, true}}},
			End:    time.Unix(2, 0), TriggerTimes: inet.PerFamily[[]time.Time]{{time.Unix(1, 0)}, {time.Unix(1, 0)}},
		})
	}
	m.ClientGoMetrics().RequestLatency.Observe(context.Background(), "GET", url.URL{Host: "api:6443"}, time.Second)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	for _, want := range []string{"ipvsplane_build_info", "ipvsplane_service_bytes_total", "kubeproxy_network_programming_duration_seconds_bucket", "ipvsplane_conntrack_entries",
		"rest_client_requests_total", "rest_client_request_duration_seconds_bucket", "ipvsplane_sync_period_seconds"} {
		if !names[want] {
			t.Fatalf("the registry does not describe %s: %v", want, names)
		}
	}
	return names
}

// dashboardExprs returns the PromQL of a Grafana dashboard's panels
// (rows' panels too) and the metrics its variables' label_values read.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q has a target without an expression", path, p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable query %q is not label_values(metric, label)", path, v.Definition)
			continue
		}
		exprs = append(exprs, m[1])
	}
	return exprs
}

// ruleExprs returns the expressions of a Prometheus rule file.
func ruleExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	// Only the expressions are read: promtool checks the file's shape.
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

var (
	// What in PromQL is not a metric name: strings, label matchers,
	// ranges and offsets' brackets, grouping label lists, Grafana's
	// variables.
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVars    = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan", "atan2"}
)

// promqlMetricNames returns the metric names an expression reads: the
// identifiers left once strings, matchers, grouping lists and variables
// are taken out that are neither functions (followed by a parenthesis)
// nor keywords.
func promqlMetricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, " ")
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = grafanaVars.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(e, -1) {
		// A number's exponent or a duration's unit is part of a number.
		if m[0] > 0 && (e[m[0]-1] >= '0' && e[m[0]-1] <= '9' || e[m[0]-1] == '.') {
			continue
		}
		if m[2] >= 0 {
			continue // a function
		}
		id := e[m[0]:m[1]]
		if slices.Contains(promqlKeywords, strings.ToLower(id)) {
			continue
		}
		names = append(names, id)
	}
	return names
}

// The metric-name extraction finds the names and only them.
func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket{instance=~"$instance",le!="1e3"}[$__rate_interval])))`: {"a_bucket"},
		`time() - max without (ip_family) (b) > 2 * 30`:                                                                       {"b"},
		`c / on (instance) group_left (version) d{x="y"} offset 5m > 0.9 and bool e`:                                          {"c", "d", "e"},
		`topk(10, sum by (namespace, name) (rate(f[1m])))`:                                                                    {"f"},
		`vector(1)`: nil,
	} {
		if got := promqlMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}

// The chart's copies of the rules and the dashboard (Helm reads only files
// inside the chart) are deploy/monitoring's.
func TestChartMonitoringFiles(t *testing.T) {
	for _, name := range []string{"ipvsplane-rules.yaml", "ipvsplane-dashboard.json"} {
		want, err := os.ReadFile(monitoringDir + name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile("../../../charts/ipvsplane/files/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("charts/ipvsplane/files/%s differs from deploy/monitoring's: cp deploy/monitoring/%s charts/ipvsplane/files/", name, name)
		}
	}
}

// The dashboard picks nodes by name: its variable reads the node label the
// chart's PodMonitor sets from the pod's node, and every panel narrows to
// it. No panel reads one IP family alone (a node without IPv4 would show
// nothing), and some tell the families apart.
func TestDashboardNodesAndFamilies(t *testing.T) {
	data, err := os.ReadFile(monitoringDir + "ipvsplane-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name+"="+v.Definition)
	}
	if !slices.Contains(vars, "node=label_values(ipvsplane_build_info, node)") {
		t.Errorf("variables %v, want node from ipvsplane_build_info's node label", vars)
	}
	perFamily := 0
	for _, e := range dashboardExprs(t, monitoringDir+"ipvsplane-dashboard.json") {
		// The variable's own query is a bare metric name.
		if promqlIdent.FindString(e) != e && !strings.Contains(e, `node=~"$node"`) {
			t.Errorf("%q is not narrowed to the chosen nodes", e)
		}
		if strings.Contains(e, `ip_family="`) {
			t.Errorf("%q reads one family alone", e)
		}
		if strings.Contains(e, "ip_family") {
			perFamily++
		}
	}
	// The programming latency's two, the family row's by ip_family.
	if perFamily < 4 {
		t.Errorf("%d expressions group by family, want 4 or more", perFamily)
	}
}

// Every alert links its section of docs/runbook.md, which exists.
func TestAlertRunbooks(t *testing.T) {
	const prefix = "https://github.com/ipvsplane/ipvsplane/blob/main/docs/runbook.md#"
	runbook, err := os.ReadFile("../../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(runbook), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	data, err := os.ReadFile(monitoringDir + "ipvsplane-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			alerts++
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], prefix)
			if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q, want %s%s and a section \"## %s\" in docs/runbook.md", r.Alert, r.Annotations["runbook_url"], prefix, strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
	if alerts < 7 {
		t.Errorf("%d alerts", alerts)
	}
}
