// Package telemetry gives each message that crosses a pipeline its own
// OpenTelemetry spans, following the messaging semantic conventions
// (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/):
// a "process" span from receipt to settlement at the source, and a "send"
// span per attempt at the sink. The process span's parent is the trace
// context the message carried in (mapping.Message.Trace: X-Ray, traceparent
// or Diagnostic-Id, whichever the source had), and the message leaves with
// the send span as its parent, written by the sink in its own form. So one
// trace runs from the producer in one cloud, through qbridge, to the
// consumer in the other.
//
// The engine is not changed: Wrap decorates a pipeline's source and sink
// openers. With tracing off (no OTEL_* exporter configured) nothing is
// wrapped, so it costs nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// instrumentation is the tracer's name (the instrumentation scope).
const instrumentation = "github.com/qbridge/qbridge"

// Tracing makes the spans. A nil *Tracing is valid and traces nothing.
type Tracing struct {
	tracer trace.Tracer
}

// New traces with tp (tests pass an SDK provider with an in-memory
// exporter).
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{tracer: tp.Tracer(instrumentation)}
}

// Enabled reports whether the standard OpenTelemetry variables ask for
// traces: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp, and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch os.Getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns the tracing the OTEL_* variables configure (OTLP over
// HTTP; the exporter reads OTEL_EXPORTER_OTLP_*, the SDK OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES), and its shutdown, which
// flushes the spans. Without them it returns nil and a no-op shutdown.
// Sampling follows the incoming message's sampled flag unless
// OTEL_TRACES_SAMPLER says otherwise (the SDK's default, parentbased_always_on).
func FromEnv(ctx context.Context, version string) (*Tracing, func(context.Context) error, error) {
	if err := checkExporter(); err != nil {
		return nil, nil, err
	}
	if !Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%q: this build exports http/protobuf only", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(serviceName()), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return New(tp), tp.Shutdown, nil
}

// checkExporter refuses an OTEL_TRACES_EXPORTER this build cannot honour
// (zipkin, console...): left alone, it would turn tracing off, or be
// ignored for OTLP when an endpoint is set, without a word.
func checkExporter() error {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil
	}
	v := os.Getenv("OTEL_TRACES_EXPORTER")
	for _, e := range strings.Split(v, ",") {
		switch strings.TrimSpace(e) {
		case "", "otlp", "none":
		default:
			return fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: this build exports otlp (over http/protobuf) only; set otlp, or none to turn traces off", v)
		}
	}
	return nil
}

func serviceName() string {
	if n := os.Getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "qbridge"
}

// Endpoint names a pipeline's source or sink for the spans.
type Endpoint struct {
	Kind        string // adapter kind: sqs, servicebus, amqp, nats
	Destination string // queue, subject or address (messaging.destination.name)
}

// EndpointOf reads the destination from an adapter's configuration: its
// Queue, QueueURL (the queue name, its last path segment), Subject, Topic
// or Address field, the first one set.
func EndpointOf(kind string, cfg any) Endpoint {
	e := Endpoint{Kind: kind}
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return e
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return e
	}
	for _, name := range []string{"Queue", "QueueURL", "Subject", "Topic", "Address"} {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.String || f.String() == "" {
			continue
		}
		d := f.String()
		if name == "QueueURL" {
			d = d[strings.LastIndexByte(d, '/')+1:]
		}
		e.Destination = d
		return e
	}
	return e
}

// system is messaging.system for an adapter kind.
func system(kind string) attribute.KeyValue {
	switch kind {
	case "sqs":
		return semconv.MessagingSystemAWSSQS
	case "servicebus":
		return semconv.MessagingSystemServiceBus
	case "nats":
		return semconv.MessagingSystemKey.String("nats")
	case "amqp":
		return semconv.MessagingSystemKey.String("amqp")
	}
	return semconv.MessagingSystemKey.String(kind)
}

// Wrap returns cfg with its source, sink and dead-letter sink traced (dlq
// is the dead-letter sink's endpoint, unused without one). A nil t returns
// cfg unchanged.
func (t *Tracing) Wrap(cfg bridge.Config, src, dst, dlq Endpoint) bridge.Config {
	if t == nil {
		return cfg
	}
	// With a dead-letter sink, the process span of a message sent there
	// must say so: the engine then acks the message at the source, which
	// alone would read as delivered.
	var open map[trace.SpanID]*delivery
	var openMu *sync.Mutex
	if cfg.DeadLetter.Sink != nil {
		open, openMu = map[trace.SpanID]*delivery{}, &sync.Mutex{}
		openDL := cfg.DeadLetter.Sink
		cfg.DeadLetter.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
			s, err := openDL(ctx, onDrop)
			if err != nil {
				return nil, err
			}
			return &deadLetterSink{sink: wrapSink(t, s, dlq).(*sink), open: open, mu: openMu}, nil
		}
	}
	openSrc := cfg.Source
	cfg.Source = func(ctx context.Context) (driver.Source, error) {
		s, err := openSrc(ctx)
		if err != nil {
			return nil, err
		}
		w := wrapSource(t, s, src)
		if open != nil {
			ws := sourceOf(w)
			ws.open, ws.openMu = open, openMu
		}
		return w, nil
	}
	openSink := cfg.Sink
	cfg.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		s, err := openSink(ctx, onDrop)
		if err != nil {
			return nil, err
		}
		return wrapSink(t, s, dst), nil
	}
	return cfg
}

// spanContext is the message's trace context as a remote parent.
func spanContext(tr mapping.Trace) trace.SpanContext {
	if tr.IsZero() {
		return trace.SpanContext{}
	}
	cfg := trace.SpanContextConfig{TraceID: tr.TraceID, SpanID: tr.SpanID, Remote: true}
	if tr.Sampled() {
		cfg.TraceFlags = trace.FlagsSampled
	}
	if ts, err := trace.ParseTraceState(tr.State); err == nil {
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg)
}

// withSpan returns tr naming sc as the parent: same trace, sc's span id and
// sampled flag; the X-Ray extras and tracestate kept.
func withSpan(tr mapping.Trace, sc trace.SpanContext) mapping.Trace {
	tr.TraceID = sc.TraceID()
	tr.SpanID = sc.SpanID()
	tr.Flags = byte(sc.TraceFlags())
	tr.XRaySampled = 0 // decided now: the X-Ray field follows the flag
	return tr
}

// source starts a process span per delivery. It embeds driver.PassSource,
// so the engine finds what the source can do (order, losses, warnings,
// readiness) as without tracing; batchSource passes BatchAcker on.
type source struct {
	driver.PassSource
	t  *Tracing
	ep Endpoint
	// open, with a dead-letter sink: the deliveries whose process span
	// is open, by span, for deadLetterSink.
	open   map[trace.SpanID]*delivery
	openMu *sync.Mutex
}

// sourceOf is the *source inside wrapSource's result.
func sourceOf(s driver.Source) *source {
	if b, ok := s.(*batchSource); ok {
		return b.source
	}
	return s.(*source)
}

func wrapSource(t *Tracing, s driver.Source, ep Endpoint) driver.Source {
	ts := &source{PassSource: driver.PassSource{Source: s}, t: t, ep: ep}
	if ba, ok := s.(driver.BatchAcker); ok {
		return &batchSource{source: ts, ba: ba}
	}
	return ts
}

// batchSource is a source whose adapter settles batches (driver.BatchAcker:
// JetStream pipelines its acks, SQS deletes ten at a time).
type batchSource struct {
	*source
	ba driver.BatchAcker
}

// AckBatch hands the adapter its own deliveries and ends their spans.
func (s *batchSource) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	inner := make([]driver.Delivery, len(ds))
	for i, d := range ds {
		inner[i] = d
		if td, ok := d.(tracedDelivery); ok {
			inner[i] = td.traced().Delivery
		}
	}
	errs := s.ba.AckBatch(ctx, inner)
	for i, d := range ds {
		if td, ok := d.(tracedDelivery); ok && i < len(errs) {
			td.traced().end("ack", errs[i])
		}
	}
	return errs
}

func (s *source) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	ds, err := s.Source.Receive(ctx, max)
	now := time.Now()
	for i, d := range ds {
		ds[i] = s.t.process(d, s.ep, now)
		if s.open != nil {
			if td, ok := ds[i].(tracedDelivery); ok {
				td.traced().track(s.open, s.openMu)
			}
		}
	}
	return ds, err
}

// process starts the delivery's span, parented on the trace the message
// carried, and makes the message carry the span onward.
func (t *Tracing) process(d driver.Delivery, ep Endpoint, at time.Time) driver.Delivery {
	m := d.Message()
	if m == nil {
		return d
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), spanContext(m.Trace))
	attrs := []attribute.KeyValue{
		system(ep.Kind),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
	}
	if ep.Destination != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(ep.Destination))
	}
	if m.ID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(m.ID))
	}
	_, span := t.tracer.Start(ctx, spanName("process", ep), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	m.Trace = withSpan(m.Trace, span.SpanContext())
	base := &delivery{PassDelivery: driver.PassDelivery{Delivery: d}, span: span}
	if dl, ok := d.(driver.DeadLetterer); ok {
		return &struct {
			*delivery
			deadLetterer
		}{base, deadLetterer{base, dl}}
	}
	return base
}

func spanName(op string, ep Endpoint) string {
	if ep.Destination == "" {
		return op
	}
	return op + " " + ep.Destination
}

// delivery ends its span when the message is settled. It embeds
// driver.PassDelivery (DecodeErrorer, Releaser as the adapter's);
// DeadLetterer is added where the adapter's delivery has it (process).
type delivery struct {
	driver.PassDelivery
	span trace.Span
	// With a dead-letter sink: where the delivery is listed while its
	// span is open, and the reason once the dead-letter sink took it.
	open     map[trace.SpanID]*delivery
	openMu   *sync.Mutex
	dlReason string
}

func (d *delivery) track(open map[trace.SpanID]*delivery, mu *sync.Mutex) {
	d.open, d.openMu = open, mu
	mu.Lock()
	open[d.span.SpanContext().SpanID()] = d
	mu.Unlock()
}

// tracedDelivery finds the delivery inside process's combinations.
type tracedDelivery interface{ traced() *delivery }

func (d *delivery) traced() *delivery { return d }

// Release ends the span too: a shutdown hands back what was never sent.
func (d *delivery) Release(ctx context.Context) error {
	err := d.PassDelivery.Release(ctx)
	d.end("release", err)
	return err
}

func (d *delivery) Ack(ctx context.Context) error {
	err := d.Delivery.Ack(ctx)
	d.end("ack", err)
	return err
}

func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	err := d.Delivery.Nack(ctx, delay)
	d.end("nack", err)
	return err
}

func (d *delivery) end(settlement string, err error) {
	if d.open != nil {
		d.openMu.Lock()
		delete(d.open, d.span.SpanContext().SpanID())
		reason := d.dlReason
		d.openMu.Unlock()
		if reason != "" && settlement == "ack" {
			// Acked at the source after the dead-letter sink took it.
			settlement = "dead_letter"
			d.span.SetAttributes(attribute.String("qbridge.dead_letter_reason", reason))
		}
	}
	d.span.SetAttributes(attribute.String("qbridge.settlement", settlement))
	if err != nil {
		d.span.RecordError(err)
		d.span.SetStatus(codes.Error, err.Error())
	} else if settlement != "ack" {
		d.span.SetStatus(codes.Error, settlement)
	}
	d.span.End()
}

type deadLetterer struct {
	d  *delivery
	dl driver.DeadLetterer
}

func (x deadLetterer) DeadLetter(ctx context.Context, reason, description string) error {
	err := x.dl.DeadLetter(ctx, reason, description)
	x.d.span.SetAttributes(attribute.String("qbridge.dead_letter_reason", reason))
	x.d.end("dead_letter", err)
	return err
}

// sink makes a send span per message and attempt. It embeds
// driver.PassSink, so the engine finds what the sink can do (KeepsOrder:
// pipelining and ungrouped order) as without tracing.
type sink struct {
	driver.PassSink
	t  *Tracing
	ep Endpoint
}

func wrapSink(t *Tracing, s driver.Sink, ep Endpoint) driver.Sink {
	return &sink{PassSink: driver.PassSink{Sink: s}, t: t, ep: ep}
}

func (s *sink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	out := make([]*mapping.Message, len(msgs))
	spans := make([]trace.Span, len(msgs))
	for i, m := range msgs {
		pctx := ctx
		if !m.Trace.IsZero() {
			pctx = trace.ContextWithSpanContext(ctx, spanContext(m.Trace))
		}
		attrs := []attribute.KeyValue{
			system(s.ep.Kind),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
		}
		if s.ep.Destination != "" {
			attrs = append(attrs, semconv.MessagingDestinationName(s.ep.Destination))
		}
		if m.ID != "" {
			attrs = append(attrs, semconv.MessagingMessageID(m.ID))
		}
		_, spans[i] = s.t.tracer.Start(pctx, spanName("send", s.ep), trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		// A copy: a retry must start again from the process span, and the
		// engine's message stays as it was.
		c := *m
		c.Trace = withSpan(m.Trace, spans[i].SpanContext())
		out[i] = &c
	}
	errs := s.Sink.Send(ctx, out)
	for i, sp := range spans {
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
			if errors.Is(err, context.Canceled) {
				sp.SetAttributes(attribute.Bool("qbridge.cancelled", true))
			}
		}
		sp.End()
	}
	return errs
}

// deadLetterSink traces the dead-letter sink's sends (a send span, child of
// the message's process span) and marks the process span of each message
// it took, by the span the message names as its parent.
type deadLetterSink struct {
	*sink
	open map[trace.SpanID]*delivery
	mu   *sync.Mutex
}

func (s *deadLetterSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := s.sink.Send(ctx, msgs)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range msgs {
		if i >= len(errs) || errs[i] != nil {
			continue
		}
		if d := s.open[trace.SpanID(m.Trace.SpanID)]; d != nil {
			reason, _ := m.Attr(bridge.AttrDeadLetterReason)
			d.dlReason = reason.Str()
		}
	}
	return errs
}
