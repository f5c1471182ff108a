package monitor

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// readyCollector exports what /readyz reports, per pipeline, as
// qbridge_pipeline_ready: qbridge_pipeline_running says the pipeline's loop
// runs, and stays 1 while a client (NATS, AMQP) reconnects underneath it
// after the broker went away; readiness asks the adapters. Each scrape runs
// the same checks as a request to /readyz, under the same deadline.
type readyCollector struct {
	desc  *prometheus.Desc
	ready func(context.Context) Readiness
}

// NewReadyCollector returns the collector of qbridge_pipeline_ready; ready
// is the function /readyz reports.
func NewReadyCollector(ready func(context.Context) Readiness) prometheus.Collector {
	return &readyCollector{
		desc: prometheus.NewDesc("qbridge_pipeline_ready",
			"1 while the pipeline runs and its adapters say they are connected (what /readyz reports for it), else 0.",
			[]string{"pipeline"}, nil),
		ready: ready,
	}
}

func (c *readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *readyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for _, p := range c.ready(ctx).Pipelines {
		v := 1.0
		if p.Err != nil {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, p.Name)
	}
}
