package migrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The report's mapping line is what the sink received changed: what the
// dead-letter sink's encoder did (role dead_letter) is left out of it.
func TestReadCountsMappingIsTheSinks(t *testing.T) {
	reg := prometheus.NewRegistry()
	enc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qbridge_mapping_encoded_total"}, []string{"pipeline", "adapter", "role"})
	drop := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qbridge_mapping_dropped_total"}, []string{"pipeline", "adapter", "role"})
	reg.MustRegister(enc, drop)
	enc.WithLabelValues("p", "sqs", "sink").Add(2)
	enc.WithLabelValues("p", "nats", "dead_letter").Add(3)
	drop.WithLabelValues("p", "sqs", "sink").Add(1)
	drop.WithLabelValues("p", "nats", "dead_letter").Add(5)
	if c := readCounts(reg, "p"); c.Encoded != 2 || c.Dropped != 1 {
		t.Errorf("encoded %d, dropped %d; want the sink's 2 and 1", c.Encoded, c.Dropped)
	}
}

func TestCheckReportTarget(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"not there yet", filepath.Join(dir, "new.json"), true},
		{"empty", file("empty.json", ""), true},
		{"an earlier report", file("old.json", `{"version":1,"mode":"move","outcome":"complete","pipelines":[]}`), true},
		{"a configuration", file("p.hcl", "pipeline \"x\" {}\n"), false},
		{"a state file", file("s.json", `{"version":1,"checkpoints":{}}`), false},
	} {
		if err := CheckReportTarget(tc.path); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
