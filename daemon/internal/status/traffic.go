package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Traffic is the file of rates the daemon writes beside the state file
// after each reading of the service traffic counters, for `ipvsplane
// status`.
type Traffic struct {
	// At is the time of the latest reading; Seconds, the time since the
	// one before, which the rates are over.
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
	// Ports holds the ports that had traffic, most bytes per second (in
	// and out) first: idle ports are left out, so the file follows the
	// busy ports, not the cluster's size.
	Ports []PortRate `json:"ports,omitempty"`
}

// PortRate is one service port's traffic per second.
type PortRate struct {
	Service       string  `json:"service"`
	Protocol      string  `json:"protocol"`
	ConnectionsPS float64 `json:"connectionsPerSecond"`
	PacketsInPS   float64 `json:"packetsInPerSecond"`
	PacketsOutPS  float64 `json:"packetsOutPerSecond"`
	BytesInPS     float64 `json:"bytesInPerSecond"`
	BytesOutPS    float64 `json:"bytesOutPerSecond"`
}

// trafficFile is where the rates go, beside the state file.
func trafficFile(stateFile string) string {
	return strings.TrimSuffix(stateFile, ".json") + "-traffic.json"
}

// WriteTraffic replaces the rates beside stateFile in one rename. The
// first reading may come before the first sync wrote the state file, and
// its directory.
func WriteTraffic(stateFile string, r *Traffic) error {
	path := trafficFile(stateFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeJSON(path, r)
}

// ReadTraffic reads the rates the daemon writes with
// --service-traffic-metrics; a missing file is fs.ErrNotExist.
func ReadTraffic(stateFile string) (*Traffic, error) {
	path := trafficFile(stateFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Traffic
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// PrintTraffic writes the rates of the busiest service ports by bytes per
// second, top of them (0 for all), from the daemon's last two readings.
// Without --service-traffic-metrics there is no file, and nothing is
// written.
func PrintTraffic(w io.Writer, r *Traffic, err error, top int, now time.Time) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		_, err = fmt.Fprintf(w, "\ntraffic: %v\n", err)
		return err
	}
	fmt.Fprintln(w)
	ago := now.Sub(r.At).Round(time.Second)
	if r.Seconds == 0 {
		_, err = fmt.Fprintf(w, "traffic: one reading so far (%s ago); rates need two\n", ago)
		return err
	}
	fmt.Fprintf(w, "traffic over the %s to %s (%s ago), busiest first:\n", time.Duration(r.Seconds*float64(time.Second)).Round(time.Millisecond), r.At.Format(time.RFC3339), ago)
	if len(r.Ports) == 0 {
		_, err = fmt.Fprintln(w, "(no service port had traffic)")
		return err
	}
	shown := r.Ports
	if top > 0 && len(shown) > top {
		shown = shown[:top]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tPROTOCOL\tCONN/S\tPKT/S IN\tPKT/S OUT\tBYTES/S IN\tBYTES/S OUT")
	for _, p := range shown {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\n", p.Service, p.Protocol, p.ConnectionsPS, p.PacketsInPS, p.PacketsOutPS, p.BytesInPS, p.BytesOutPS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(shown) < len(r.Ports) {
		_, err = fmt.Fprintf(w, "(%d more service ports had traffic; --top 0 shows all)\n", len(r.Ports)-len(shown))
	}
	return err
}
