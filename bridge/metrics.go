package bridge

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qbridge/qbridge/mapping"
)

// Metrics holds the Prometheus metrics of every pipeline of a process. Label
// values are pipeline names, adapter kinds, dead-letter reason codes and
// operation names: all bounded, never per message or per group.
type Metrics struct {
	received     *prometheus.CounterVec
	sent         *prometheus.CounterVec
	acked        *prometheus.CounterVec
	nacked       *prometheus.CounterVec
	retried      *prometheus.CounterVec
	throttled    *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	encoded      *prometheus.CounterVec
	errors       *prometheus.CounterVec
	restarts     *prometheus.CounterVec
	sinkLatency  *prometheus.HistogramVec
	e2eLatency   *prometheus.HistogramVec

	// Gauges are read from the pipelines at scrape time.
	inFlightDesc, backloggedDesc, backlogMaxDesc, runningDesc, oldestDesc, lostDesc *prometheus.Desc

	mu        sync.Mutex
	pipelines map[string]*Pipeline
}

// Stats is a pipeline's instantaneous state.
type Stats struct {
	Running          bool
	InFlight         int // received, not yet settled
	GroupsBacklogged int // groups with messages waiting behind their in-flight ones
	MaxGroupBacklog  int // the longest such wait
	// OldestUnsettled is when the oldest message still in flight was
	// received; zero when none is.
	OldestUnsettled time.Time
	// SourceLost counts messages an at-most-once source dropped before the
	// pipeline took them (driver.LossCounter: a core NATS slow consumer),
	// over every source this pipeline opened.
	SourceLost uint64
}

// envelopeShed counts the carry envelope's members left out because the
// envelope did not fit on the target or is off (mapping.ShedOrder names
// them: a bounded set). Package-level because the report travels through
// a sink's drop callback, which internal/config routes here
// (CountEnvelopeShed); every registry NewMetrics is given exports it.
var envelopeShed = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "qbridge", Name: "mapping_envelope_shed_total",
	Help: "Members of the carry envelope (qbridge.envelope) left out because it did not fit on the target (attribute count, property or message size) or mapping envelope = off, by member.",
}, []string{"pipeline", "field"})

// CountEnvelopeShed counts the envelope members one message went without.
func CountEnvelopeShed(pipeline string, fields []string) {
	for _, f := range fields {
		envelopeShed.WithLabelValues(pipeline, f).Inc()
	}
}

// latencyBuckets span a fast local hop to messages that sat in a queue for an
// hour (end-to-end latency includes the time in the source queue).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// sendBuckets span one sink call: a core NATS publish and flush of a batch
// on the same host takes well under a millisecond, a cloud call up to the
// send timeouts (30 s).
var sendBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewMetrics creates the metrics and registers them with reg; a nil reg
// keeps them unexported (tests, embedding).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "qbridge", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		received:     counter("messages_received_total", "Messages received from the source.", "pipeline", "adapter"),
		sent:         counter("messages_sent_total", "Messages the sink confirmed.", "pipeline", "adapter"),
		acked:        counter("messages_acked_total", "Messages acknowledged at the source.", "pipeline", "adapter"),
		nacked:       counter("messages_nacked_total", "Messages handed back to the source for redelivery.", "pipeline", "adapter"),
		retried:      counter("messages_retried_total", "Sink attempts retried after a transient error.", "pipeline", "adapter"),
		throttled:    counter("sink_throttled_total", "Sink attempts the broker answered with a request to slow down (retried with backoff).", "pipeline", "adapter"),
		deadLettered: counter("messages_dead_lettered_total", "Messages dead-lettered, by reason.", "pipeline", "reason"),
		dropped:      counter("mapping_dropped_total", "Items (attributes, fields) left out under the drop mapping policy, by the sink or the dead-letter sink (role).", "pipeline", "adapter", "role"),
		encoded:      counter("mapping_encoded_total", "Items (attributes, fields, bodies) the encode mapping policy changed to fit the sink or the dead-letter sink (role): moved into the carry envelope, sent base64, a schedule sent now.", "pipeline", "adapter", "role"),
		errors:       counter("errors_total", "Failed operations (ack, nack, extend, dead_letter, receive, open, close).", "pipeline", "op"),
		restarts:     counter("source_restarts_total", "Source restarts after a receive error.", "pipeline", "adapter"),
		sinkLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "qbridge", Name: "sink_send_seconds", Help: "Duration of sink Send calls.", Buckets: sendBuckets,
		}, []string{"pipeline", "adapter"}),
		e2eLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "qbridge", Name: "end_to_end_latency_seconds",
			Help:    "Time from the source's enqueue time to the sink's confirmation, where the source knows the enqueue time.",
			Buckets: latencyBuckets,
		}, []string{"pipeline"}),
		inFlightDesc:   prometheus.NewDesc("qbridge_in_flight", "Messages received and not yet settled.", []string{"pipeline"}, nil),
		backloggedDesc: prometheus.NewDesc("qbridge_groups_backlogged", "Groups with messages waiting behind their in-flight ones.", []string{"pipeline"}, nil),
		backlogMaxDesc: prometheus.NewDesc("qbridge_group_backlog_max", "Messages waiting in the most backlogged group.", []string{"pipeline"}, nil),
		runningDesc:    prometheus.NewDesc("qbridge_pipeline_running", "1 while the pipeline's adapters are open and it is receiving.", []string{"pipeline"}, nil),
		lostDesc:       prometheus.NewDesc("qbridge_source_lost_total", "Messages an at-most-once source dropped before the pipeline took them (a core NATS slow consumer: the client's buffer_size/buffer_bytes were reached).", []string{"pipeline"}, nil),
		oldestDesc:     prometheus.NewDesc("qbridge_oldest_unsettled_age_seconds", "Age of the oldest message received and not yet settled (0 when none is): a stuck group or sink shows here before anywhere else.", []string{"pipeline"}, nil),
		pipelines:      map[string]*Pipeline{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{
			m.received, m.sent, m.acked, m.nacked, m.retried, m.throttled, m.deadLettered, m.dropped, m.encoded,
			m.errors, m.restarts, m.sinkLatency, m.e2eLatency, m,
		} {
			reg.MustRegister(c)
		}
		if err := reg.Register(envelopeShed); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			panic(err)
		}
	}
	return m
}

// Describe implements prometheus.Collector for the scrape-time gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.inFlightDesc
	ch <- m.backloggedDesc
	ch <- m.backlogMaxDesc
	ch <- m.runningDesc
	ch <- m.oldestDesc
	ch <- m.lostDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ps := make([]*Pipeline, 0, len(m.pipelines))
	for _, p := range m.pipelines {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	for _, p := range ps {
		s := p.Stats()
		running := 0.0
		if s.Running {
			running = 1
		}
		ch <- prometheus.MustNewConstMetric(m.inFlightDesc, prometheus.GaugeValue, float64(s.InFlight), p.name)
		ch <- prometheus.MustNewConstMetric(m.backloggedDesc, prometheus.GaugeValue, float64(s.GroupsBacklogged), p.name)
		ch <- prometheus.MustNewConstMetric(m.backlogMaxDesc, prometheus.GaugeValue, float64(s.MaxGroupBacklog), p.name)
		ch <- prometheus.MustNewConstMetric(m.runningDesc, prometheus.GaugeValue, running, p.name)
		age := 0.0
		if !s.OldestUnsettled.IsZero() {
			age = time.Since(s.OldestUnsettled).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(m.oldestDesc, prometheus.GaugeValue, age, p.name)
		ch <- prometheus.MustNewConstMetric(m.lostDesc, prometheus.CounterValue, float64(s.SourceLost), p.name)
	}
}

func (m *Metrics) track(p *Pipeline) {
	m.mu.Lock()
	m.pipelines[p.name] = p
	m.mu.Unlock()
}

func (m *Metrics) untrack(p *Pipeline) {
	m.mu.Lock()
	// A restarted pipeline of the same name may already have replaced p.
	if m.pipelines[p.name] == p {
		delete(m.pipelines, p.name)
	}
	m.mu.Unlock()
}

// families are every metric family with a pipeline label.
func (m *Metrics) families() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{
		m.received.MetricVec, m.sent.MetricVec, m.acked.MetricVec, m.nacked.MetricVec, m.retried.MetricVec,
		m.throttled.MetricVec, m.deadLettered.MetricVec, m.dropped.MetricVec, m.encoded.MetricVec,
		m.errors.MetricVec, m.restarts.MetricVec, m.sinkLatency.MetricVec, m.e2eLatency.MetricVec,
		envelopeShed.MetricVec,
	}
}

// Forget deletes every series of a pipeline that no longer exists, so a
// reload that removes pipelines does not leave their series behind.
func (m *Metrics) Forget(pipeline string) {
	l := prometheus.Labels{"pipeline": pipeline}
	for _, v := range m.families() {
		v.DeletePartialMatch(l)
	}
}

// series is one series a pipeline instance counts in: its family and
// label values.
type series struct {
	vec *prometheus.MetricVec
	lvs string // the label values, joined by seriesSep
}

// seriesSep is no UTF-8, as label values are.
const seriesSep = "\xff"

// retire deletes the series of old, a stopped pipeline instance, that
// next (the same pipeline restarted by a reload; nil when it was removed)
// does not count in: a sink changed from nats to sqs must not leave
// adapter="nats" series behind, while the series both share keep their
// values.
func (m *Metrics) retire(old, next *pipelineMetrics) {
	if next == nil {
		m.Forget(old.name)
		return
	}
	keep := make(map[series]bool, len(next.series))
	for _, s := range next.series {
		keep[s] = true
	}
	for _, s := range old.series {
		if !keep[s] {
			s.vec.DeleteLabelValues(strings.Split(s.lvs, seriesSep)...)
		}
	}
}

// pipelineMetrics are one pipeline's metrics, curried once so the hot path
// does no label lookups.
type pipelineMetrics struct {
	m                                         *Metrics
	name                                      string
	received, acked, nacked, restarts         prometheus.Counter
	sent, retried, throttled, dropped         prometheus.Counter
	encoded, dlDropped, dlEncoded             prometheus.Counter // dl: by the dead-letter sink
	sinkLatency, e2eLatency                   prometheus.Observer
	errAck, errNack, errExtend, errDeadLetter prometheus.Counter
	errReceive, errOpen, errClose             prometheus.Counter
	// series are the ones curried above, for retire.
	series []series
}

// forPipeline curries the metrics of one pipeline. Dead-letter sends are
// counted by messages_dead_lettered_total only, not as sent.
func (m *Metrics) forPipeline(name, source, sink, deadLetterSink string) *pipelineMetrics {
	pm := &pipelineMetrics{m: m, name: name}
	// with records each curried series, so that retire knows them.
	with := func(v *prometheus.MetricVec, lvs ...string) prometheus.Metric {
		pm.series = append(pm.series, series{v, strings.Join(lvs, seriesSep)})
		c, err := v.GetMetricWithLabelValues(lvs...)
		if err != nil {
			panic(err) // a label count that does not match is a bug here
		}
		return c
	}
	counter := func(v *prometheus.CounterVec, lvs ...string) prometheus.Counter {
		return with(v.MetricVec, lvs...).(prometheus.Counter)
	}
	e := func(op string) prometheus.Counter { return counter(m.errors, name, op) }
	pm.received = counter(m.received, name, source)
	pm.acked = counter(m.acked, name, source)
	pm.nacked = counter(m.nacked, name, source)
	pm.restarts = counter(m.restarts, name, source)
	pm.sent = counter(m.sent, name, sink)
	pm.retried = counter(m.retried, name, sink)
	pm.throttled = counter(m.throttled, name, sink)
	pm.dropped = counter(m.dropped, name, sink, roleSink)
	pm.encoded = counter(m.encoded, name, sink, roleSink)
	pm.sinkLatency = with(m.sinkLatency.MetricVec, name, sink).(prometheus.Observer)
	pm.e2eLatency = with(m.e2eLatency.MetricVec, name).(prometheus.Observer)
	pm.errAck, pm.errNack, pm.errExtend, pm.errDeadLetter = e("ack"), e("nack"), e("extend"), e("dead_letter")
	pm.errReceive, pm.errOpen, pm.errClose = e("receive"), e("open"), e("close")
	if deadLetterSink != "" {
		pm.dlDropped = counter(m.dropped, name, deadLetterSink, roleDeadLetter)
		pm.dlEncoded = counter(m.encoded, name, deadLetterSink, roleDeadLetter)
	}
	// Every reason's series exists from the start at 0, so rate() and
	// increase() alerts see the first dead letter (a series that appears
	// at 1 has no increase).
	for _, r := range reasons {
		m.deadLettered.WithLabelValues(name, r)
	}
	// So does each envelope member's shed count (a bounded set).
	for _, f := range mapping.ShedOrder {
		envelopeShed.WithLabelValues(name, f)
	}
	return pm
}

// The role label of the mapping counters: the dead-letter sink's
// encoder is counted apart, so that what the sink received changed is not
// mixed with what went to the dead letters changed (an audit saw a migration
// report items "encoded to fit the sink" that only the dead-letter sink had
// encoded).
const (
	roleSink       = "sink"
	roleDeadLetter = "dead_letter"
)

func (pm *pipelineMetrics) deadLettered(reason string) {
	pm.m.deadLettered.WithLabelValues(pm.name, reason).Inc()
}
