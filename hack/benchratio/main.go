// Command benchratio reads `go test -bench` output on standard input, copies
// it to standard output, and then prints each benchmark group's results as
// ratios to its first sub-benchmark, the baseline by the project's
// convention (BenchmarkLoad/ipset-restore first, then our implementations).
// Metrics reported beside ns/op (peak-MiB, change-ms, ...) get their ratio
// too, as value over baseline: for those, 0.5x is half the baseline's.
//
//	go test -run '^$' -bench . ./daemon/compare/ipset/ | go run ./hack/benchratio
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

type result struct {
	name    string
	nsPerOp float64
	extra   []string // the other "value unit" pairs, as printed
	units   []string // their units, in order
	values  []float64
}

type group struct {
	name    string
	results []result
}

func main() {
	var groups []*group
	byName := map[string]*group{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		r, groupName, ok := parse(line)
		if !ok {
			continue
		}
		g := byName[groupName]
		if g == nil {
			g = &group{name: groupName}
			byName[groupName] = g
			groups = append(groups, g)
		}
		g.results = append(g.results, r)
	}
	if len(groups) == 0 {
		return
	}
	fmt.Println("\nRatios to each group's first (baseline) sub-benchmark; >1x means faster than the baseline;")
	fmt.Println("other metrics show value/baseline in parentheses (0.50x: half the baseline's):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, g := range groups {
		if len(g.results) < 2 {
			continue
		}
		base := g.results[0]
		fmt.Fprintf(w, "%s\t\t\t\t\n", g.name)
		for _, r := range g.results {
			fmt.Fprintf(w, "  %s\t%s\t%.2fx\t%s\t\n", r.name, seconds(r.nsPerOp), base.nsPerOp/r.nsPerOp, extras(r, base))
		}
	}
	w.Flush()
}

// parse reads a benchmark line such as
// "BenchmarkLoad/20000/bulk-2  1  151234 ns/op  12 msgs/op".
func parse(line string) (result, string, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return result{}, "", false
	}
	name := fields[0]
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	slash := strings.LastIndex(name, "/")
	if slash < 0 {
		return result{}, "", false
	}
	r := result{name: name[slash+1:]}
	for i := 2; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return result{}, "", false
		}
		if fields[i+1] == "ns/op" {
			r.nsPerOp = v
		} else {
			r.extra = append(r.extra, fields[i]+" "+fields[i+1])
			r.units = append(r.units, fields[i+1])
			r.values = append(r.values, v)
		}
	}
	if r.nsPerOp == 0 {
		return result{}, "", false
	}
	return r, name[:slash], true
}

// extras prints r's other metrics, each with its ratio to the baseline's
// value of the same unit when the baseline has one.
func extras(r, base result) string {
	out := make([]string, len(r.extra))
	for i, e := range r.extra {
		out[i] = e
		j := slices.Index(base.units, r.units[i])
		if j >= 0 && base.values[j] != 0 && r.name != base.name {
			out[i] += " (" + ratio(r.values[i]/base.values[j]) + ")"
		}
	}
	return strings.Join(out, "  ")
}

// ratio prints x with two decimals, or two significant digits when it is
// smaller than that shows.
func ratio(x float64) string {
	if x < 0.1 {
		return fmt.Sprintf("%.2gx", x)
	}
	return fmt.Sprintf("%.2fx", x)
}

func seconds(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3fs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2fms", ns/1e6)
	default:
		return fmt.Sprintf("%.1fµs", ns/1e3)
	}
}
