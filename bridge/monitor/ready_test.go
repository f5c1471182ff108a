package monitor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReadyCollector: qbridge_pipeline_ready is what /readyz says of each
// pipeline, an ignored readiness included (the gauge is per pipeline; what
// counts for the process is the probe's business), and nothing while the
// process is still starting.
func TestReadyCollector(t *testing.T) {
	down := errors.New("nats: connection RECONNECTING: EOF")
	for _, tc := range []struct {
		name  string
		state Readiness
		want  string
	}{
		{"ready and not", Readiness{Pipelines: []PipelineReadiness{{Name: "a"}, {Name: "b", Err: down}, {Name: "c", Err: down, Ignored: true}}},
			"qbridge_pipeline_ready{pipeline=\"a\"} 1\nqbridge_pipeline_ready{pipeline=\"b\"} 0\nqbridge_pipeline_ready{pipeline=\"c\"} 0\n"},
		{"starting", Readiness{Err: errors.New("starting")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deadline bool
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewReadyCollector(func(ctx context.Context) Readiness {
				_, deadline = ctx.Deadline()
				return tc.state
			}))
			want := ""
			if tc.want != "" {
				want = "# HELP qbridge_pipeline_ready 1 while the pipeline runs and its adapters say they are connected (what /readyz reports for it), else 0.\n# TYPE qbridge_pipeline_ready gauge\n" + tc.want
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qbridge_pipeline_ready"); err != nil {
				t.Error(err)
			}
			if !deadline {
				t.Error("the checks ran without a deadline")
			}
		})
	}
}
