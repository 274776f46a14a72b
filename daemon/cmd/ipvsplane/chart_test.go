//go:build !vmtest

// The VM has only the package's testdata/, not charts/.

package main

import (
	"encoding/json"
	"io"
	"os"
	"testing"
)

const chartDir = "../../../charts/ipvsplane"

// The chart's schema offers exactly the log formats the binary accepts:
// each of its choices makes a logger, and the binary refuses a format
// the schema does not list.
func TestChartSchemaLogFormats(t *testing.T) {
	data, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			LogFormat struct {
				Enum []string `json:"enum"`
			} `json:"logFormat"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	formats := schema.Properties.LogFormat.Enum
	if len(formats) == 0 {
		t.Fatal("values.schema.json lists no logFormat")
	}
	for _, f := range formats {
		if _, err := newLogger("info", f, io.Discard); err != nil {
			t.Errorf("the schema allows logFormat %q, the binary refuses it: %v", f, err)
		}
	}
	if _, err := newLogger("info", "text", io.Discard); err == nil {
		t.Error("the binary accepts log format text, which the schema refuses")
	}
}
