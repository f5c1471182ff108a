package migrate

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// readCounts reads a job's counts from its pipeline's own metrics registry:
// the engine counts every outcome exactly, so the migration uses the same
// figures an operator sees on /metrics.
//
// The carry envelope's shed members are counted in a series shared by
// every registry (bridge.CountEnvelopeShed), by pipeline: only pipeline's
// are read.
func readCounts(reg *prometheus.Registry, pipeline string) Counts {
	var c Counts
	mfs, err := reg.Gather()
	if err != nil {
		return c
	}
	for _, mf := range mfs {
		var dst *int64
		switch mf.GetName() {
		case "qbridge_messages_received_total":
			dst = &c.Read
		case "qbridge_messages_sent_total":
			dst = &c.Written
		case "qbridge_messages_acked_total":
			dst = &c.Acknowledged
		case "qbridge_messages_nacked_total":
			dst = &c.HandedBack
		case "qbridge_messages_retried_total":
			dst = &c.Retried
		case "qbridge_sink_throttled_total":
			dst = &c.Throttled
		case "qbridge_mapping_dropped_total", "qbridge_mapping_encoded_total":
			// The sink's only: the report's mapping line says what the
			// sink received changed, not the dead letters.
			dst := &c.Dropped
			if mf.GetName() == "qbridge_mapping_encoded_total" {
				dst = &c.Encoded
			}
			for _, m := range mf.GetMetric() {
				if label(m, "role") != "dead_letter" {
					*dst += int64(m.GetCounter().GetValue())
				}
			}
			continue
		case "qbridge_mapping_envelope_shed_total":
			for _, m := range mf.GetMetric() {
				n := int64(m.GetCounter().GetValue())
				if n == 0 || label(m, "pipeline") != pipeline {
					continue
				}
				if c.EnvelopeShed == nil {
					c.EnvelopeShed = map[string]int64{}
				}
				c.EnvelopeShed[label(m, "field")] += n
			}
			continue
		case "qbridge_errors_total":
			for _, m := range mf.GetMetric() {
				if label(m, "op") == "ack" {
					c.AckFailed += int64(m.GetCounter().GetValue())
				}
			}
			continue
		case "qbridge_messages_dead_lettered_total":
			for _, m := range mf.GetMetric() {
				n := int64(m.GetCounter().GetValue())
				if n == 0 {
					continue
				}
				if c.DeadLettered == nil {
					c.DeadLettered = map[string]int64{}
				}
				c.DeadLettered[label(m, "reason")] += n
				c.DeadLetteredTotal += n
			}
			continue
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			*dst += int64(m.GetCounter().GetValue())
		}
	}
	return c
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
