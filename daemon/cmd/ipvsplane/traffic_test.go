package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
)

// Off by default: no flag, no collector, no series.
func TestServiceTrafficOffByDefault(t *testing.T) {
	o := newOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.load(fs); err != nil {
		t.Fatal(err)
	}
	if o.own.ServiceTrafficMetrics || o.own.ServiceTrafficMetricsInterval.Duration != traffic.DefaultInterval {
		t.Errorf("defaults: %+v", o.own)
	}
	if n, err := testutil.GatherAndCount(metrics.New().Registry(), "ipvsplane_service_connections_total", "ipvsplane_service_packets_total", "ipvsplane_service_bytes_total"); err != nil || n != 0 {
		t.Errorf("%d series, %v", n, err)
	}
}
