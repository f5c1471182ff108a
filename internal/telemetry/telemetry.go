// Package telemetry gives each message that crosses a pipeline its own
// OpenTelemetry spans, following the messaging semantic conventions
// (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/):
// a "process" span from receipt to settlement at the source, and a "send"
// span per attempt at the sink. The process span's parent is the trace
// context the message carried in, its creation context
// (mapping.Message.Trace: X-Ray, traceparent or Diagnostic-Id, whichever
// the source had); the send span is the process span's child and links to
// the creation context, and the message leaves with that context
// unchanged, as the conventions ask of an intermediary. So qbridge's spans
// join the producer's trace, and the consumer in the other cloud sees what
// the producer wrote. A message without a creation context leaves with the
// send span's.
//
// The engine is not changed: Wrap decorates a pipeline's source and sink
// openers. With tracing off (no OTEL_* exporter configured) nothing is
// wrapped, so it costs nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
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
//
// The SDK's own errors (an export the collector refused or did not
// answer) go to log, at most one line per 30 s with the number of those
// left out: by default the SDK writes them to stderr as plain text, among
// the daemon's JSON lines.
func FromEnv(ctx context.Context, version string, log *slog.Logger) (*Tracing, func(context.Context) error, error) {
	if err := checkExporter(); err != nil {
		return nil, nil, err
	}
	if !Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	// The signal's own variable wins over the general one (the OTLP
	// exporter specification).
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, nil, fmt.Errorf("telemetry: %s=%q: this build exports http/protobuf only", v, p)
			}
			break
		}
	}
	if err := checkOTLPVariables(); err != nil {
		return nil, nil, err
	}
	otel.SetErrorHandler(errorLog(log))
	// The SDK's own log lines (a variable it cannot read) went to stderr
	// through the standard logger, as plain text among the JSON lines.
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
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
func errorLog(log *slog.Logger) otel.ErrorHandler {
	pace := logpace.New(1, 30*time.Second)
	return otel.ErrorHandlerFunc(func(err error) {
		pace.Do(func(leftOut int64) {
			log.Warn("tracing: the OpenTelemetry SDK failed (spans may be lost)", "error", err, logpace.LeftOutKey, leftOut)
		})
	})
}

// checkOTLPVariables refuses the header and endpoint variables the
// exporter cannot read, naming the variable but not its value, which may
// hold a token or a password. The SDK skipped such a header (so the
// collector refused every export for want of it) or endpoint (so spans went
// to localhost), and logged the value, credentials included.
func checkOTLPVariables() error {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for i, entry := range strings.Split(os.Getenv(v), ",") {
			if strings.TrimSpace(entry) == "" {
				continue
			}
			key, value, ok := strings.Cut(entry, "=")
			switch {
			case !ok:
				return fmt.Errorf("telemetry: %s: entry %d has no '=' (want key=value,...; the value is not shown, it may hold a secret)", v, i+1)
			case !validHeaderKey(strings.TrimSpace(key)):
				return fmt.Errorf("telemetry: %s: entry %d: the key is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", v, i+1)
			}
			if _, err := url.PathUnescape(value); err != nil {
				return fmt.Errorf("telemetry: %s: the value of %q is not percent-encoded correctly (a %% must be followed by two hex digits: write %%25 for %%, %%20 for a space)", v, strings.TrimSpace(key))
			}
		}
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if e := os.Getenv(v); e != "" {
			u, err := url.Parse(e)
			if err != nil {
				return fmt.Errorf("telemetry: %s is not a valid URL (a user or password with any of : / ? # [ ] @ %% must be percent-encoded; the value is not shown, it may hold one)", v)
			}
			if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				// "collector:4318" parses, as scheme "collector": the
				// exporter then posted every span to https:///v1/traces.
				return fmt.Errorf("telemetry: %s is not an http(s) URL with a host, such as http://otel-collector:4318 (the value is not shown, it may hold a secret)", v)
			}
		}
	}
	return nil
}

// validHeaderKey is the exporter's test of a header name: an HTTP token.
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

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
	// Template is a destination rendered per message ("orders.{group}"):
	// messaging.destination.template, and the span name, in place of a
	// name that varies.
	Template string
	// Subscription is a Service Bus topic subscription
	// (messaging.destination.subscription.name).
	Subscription string
}

// EndpointOf reads the destination from an adapter's configuration: its
// Queue, QueueURL (the queue name, its last path segment), QueueName,
// Subject, Topic or Address field, the first one set, else a JetStream
// block's Stream; and a Subscription.
func EndpointOf(kind string, cfg any) Endpoint {
	e := Endpoint{Kind: kind}
	v := structOf(reflect.ValueOf(cfg))
	if !v.IsValid() {
		return e
	}
	e.Subscription = stringField(v, "Subscription")
	for _, name := range []string{"Queue", "QueueURL", "QueueName", "Subject", "Topic", "Address"} {
		d := stringField(v, name)
		if d == "" {
			continue
		}
		if name == "QueueURL" {
			d = d[strings.LastIndexByte(d, '/')+1:]
		}
		if strings.Contains(d, "{") {
			e.Template = d
		} else {
			e.Destination = d
		}
		return e
	}
	if js := structOf(v.FieldByName("JetStream")); js.IsValid() {
		e.Destination = stringField(js, "Stream")
	}
	return e
}

// structOf is the struct v holds, through pointers; invalid if none.
func structOf(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v
}

func stringField(v reflect.Value, name string) string {
	if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// appendDestination adds the endpoint's destination attributes.
func appendDestination(attrs []attribute.KeyValue, ep Endpoint) []attribute.KeyValue {
	switch {
	case ep.Template != "":
		attrs = append(attrs, semconv.MessagingDestinationTemplate(ep.Template))
	case ep.Destination != "":
		attrs = append(attrs, semconv.MessagingDestinationName(ep.Destination))
	}
	if ep.Subscription != "" {
		attrs = append(attrs, semconv.MessagingDestinationSubscriptionName(ep.Subscription))
	}
	return attrs
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
	// The deliveries whose process span is open, by span: a sink finds a
	// message's process span (its parent) and creation context there, and
	// the dead-letter sink marks the process span of a message it took.
	o := newOpenSpans()
	if cfg.DeadLetter.Sink != nil {
		openDL := cfg.DeadLetter.Sink
		cfg.DeadLetter.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
			s, err := openDL(ctx, onDrop)
			if err != nil {
				return nil, err
			}
			return &deadLetterSink{sink: wrapSink(t, s, dlq, o).(*sink)}, nil
		}
	}
	openSrc := cfg.Source
	cfg.Source = func(ctx context.Context) (driver.Source, error) {
		s, err := openSrc(ctx)
		if err != nil {
			return nil, err
		}
		return wrapSource(t, s, src, o), nil
	}
	openSink := cfg.Sink
	cfg.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		s, err := openSink(ctx, onDrop)
		if err != nil {
			return nil, err
		}
		return wrapSink(t, s, dst, o), nil
	}
	return cfg
}

// openSpans holds a pipeline's deliveries whose process span is open.
type openSpans struct {
	mu sync.Mutex
	m  map[trace.SpanID]*delivery
}

func newOpenSpans() *openSpans { return &openSpans{m: map[trace.SpanID]*delivery{}} }

// of is the delivery whose process span tr names (the engine's message
// carries it: process), or nil.
func (o *openSpans) of(tr mapping.Trace) *delivery {
	if tr.IsZero() {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[trace.SpanID(tr.SpanID)]
}

// parentContext is ctx with tr, the trace context a message came with, as
// its remote parent; ctx itself when there is none (a root span).
func parentContext(ctx context.Context, tr mapping.Trace) context.Context {
	if tr.IsZero() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, spanContext(tr))
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
// sampled flag; the X-Ray extras and tracestate kept. Inside qbridge the
// message names its process span so (process); it leaves so only when it
// came without a creation context of its own (sink.Send).
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
	t    *Tracing
	ep   Endpoint
	open *openSpans
}

func wrapSource(t *Tracing, s driver.Source, ep Endpoint, open *openSpans) driver.Source {
	ts := &source{PassSource: driver.PassSource{Source: s}, t: t, ep: ep, open: open}
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
		ds[i] = s.t.process(d, s.ep, now, s.open)
	}
	return ds, err
}

// process starts the delivery's span, parented on the message's creation
// context (the trace it came with), and makes the message name the span
// while it is inside qbridge, so that the sink's span is the process
// span's child (sink.Send).
func (t *Tracing) process(d driver.Delivery, ep Endpoint, at time.Time, open *openSpans) driver.Delivery {
	m := d.Message()
	if m == nil {
		return d
	}
	attrs := []attribute.KeyValue{
		system(ep.Kind),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
	}
	attrs = appendDestination(attrs, ep)
	if id := messageID(m); id != "" {
		attrs = append(attrs, semconv.MessagingMessageID(id))
	}
	_, span := t.tracer.Start(parentContext(context.Background(), m.Trace), spanName("process", ep), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	base := &delivery{PassDelivery: driver.PassDelivery{Delivery: d}, span: span, creation: m.Trace, open: open}
	m.Trace = withSpan(m.Trace, span.SpanContext())
	open.mu.Lock()
	open.m[span.SpanContext().SpanID()] = base
	open.mu.Unlock()
	if dl, ok := d.(driver.DeadLetterer); ok {
		return &struct {
			*delivery
			deadLetterer
		}{base, deadLetterer{base, dl}}
	}
	return base
}

func spanName(op string, ep Endpoint) string {
	switch {
	case ep.Template != "":
		return op + " " + ep.Template
	case ep.Destination != "":
		return op + " " + ep.Destination
	}
	return op
}

// messageID is messaging.message.id: the message's id, or its dedup id
// where that is all it has (a NATS message's Nats-Msg-Id).
func messageID(m *mapping.Message) string {
	if m.ID != "" {
		return m.ID
	}
	return m.DedupID
}

// delivery ends its span when the message is settled. It embeds
// driver.PassDelivery (DecodeErrorer, Releaser as the adapter's);
// DeadLetterer is added where the adapter's delivery has it (process).
type delivery struct {
	driver.PassDelivery
	span trace.Span
	// creation is the message's creation context: the trace it came
	// with, zero for none. It leaves with it unchanged (sink.Send).
	creation mapping.Trace
	open     *openSpans // where it is listed while its span is open
	dlReason string     // once the dead-letter sink took it (guarded by open.mu)
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
	d.open.mu.Lock()
	delete(d.open.m, d.span.SpanContext().SpanID())
	reason := d.dlReason
	d.open.mu.Unlock()
	if reason != "" && settlement == "ack" {
		// Acked at the source after the dead-letter sink took it.
		settlement = "dead_letter"
		d.span.SetAttributes(attribute.String("qbridge.dead_letter_reason", reason))
	}
	d.span.SetAttributes(attribute.String("qbridge.settlement", settlement))
	switch {
	case err != nil:
		d.span.RecordError(err)
		d.span.SetAttributes(semconv.ErrorTypeKey.String(settlement + "_failed"))
		d.span.SetStatus(codes.Error, err.Error())
	case settlement == "dead_letter":
		// Not processed: error.type is the reason (bridge.Reason*).
		d.span.SetAttributes(semconv.ErrorTypeKey.String(reason))
		d.span.SetStatus(codes.Error, settlement)
	case settlement == "nack":
		// Handed back after the sink failed, or left unsent by a drain.
		d.span.SetAttributes(semconv.ErrorTypeKey.String(settlement))
		d.span.SetStatus(codes.Error, settlement)
	}
	// A release (a shutdown hands back what was never sent) is no failure.
	d.span.End()
}

type deadLetterer struct {
	d  *delivery
	dl driver.DeadLetterer
}

func (x deadLetterer) DeadLetter(ctx context.Context, reason, description string) error {
	err := x.dl.DeadLetter(ctx, reason, description)
	x.d.span.SetAttributes(attribute.String("qbridge.dead_letter_reason", reason))
	x.d.open.mu.Lock()
	x.d.dlReason = reason
	x.d.open.mu.Unlock()
	x.d.end("dead_letter", err)
	return err
}

// sink makes a send span per message and attempt. It embeds
// driver.PassSink, so the engine finds what the sink can do (KeepsOrder:
// pipelining and ungrouped order) as without tracing.
type sink struct {
	driver.PassSink
	t    *Tracing
	ep   Endpoint
	open *openSpans
}

func wrapSink(t *Tracing, s driver.Sink, ep Endpoint, open *openSpans) driver.Sink {
	return &sink{PassSink: driver.PassSink{Sink: s}, t: t, ep: ep, open: open}
}

// Send makes each message's send span, a child of its process span that
// links to its creation context, and sends the message with that context
// unchanged, as the messaging conventions ask of an intermediary
// (https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/#context-propagation:
// the creation context "SHOULD be attached in such a way that it cannot
// be changed by intermediaries"): what a consumer at the target sees is
// what the producer wrote, tracing on or off, an X-Ray Sampled=? included.
// A message that came without one leaves with the send span's context, so
// that its consumers join qbridge's trace.
func (s *sink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	out := make([]*mapping.Message, len(msgs))
	spans := make([]trace.Span, len(msgs))
	for i, m := range msgs {
		var pctx context.Context
		creation := m.Trace
		var opts []trace.SpanStartOption
		if d := s.open.of(m.Trace); d != nil {
			pctx, creation = trace.ContextWithSpan(ctx, d.span), d.creation
			if !creation.IsZero() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: spanContext(creation)}))
			}
		} else {
			// No process span of this pipeline (a sink used alone): the
			// message's trace is the parent.
			pctx = parentContext(ctx, m.Trace)
		}
		attrs := []attribute.KeyValue{
			system(s.ep.Kind),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
		}
		attrs = appendDestination(attrs, s.ep)
		if id := messageID(m); id != "" {
			attrs = append(attrs, semconv.MessagingMessageID(id))
		}
		opts = append(opts, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		_, spans[i] = s.t.tracer.Start(pctx, spanName("send", s.ep), opts...)
		// A copy: the engine's message stays as it was (a retry finds its
		// process span again).
		c := *m
		if !creation.IsZero() {
			c.Trace = creation
		} else {
			c.Trace = withSpan(m.Trace, spans[i].SpanContext())
		}
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
			sp.SetAttributes(semconv.ErrorTypeKey.String(sendErrorType(err)))
			sp.SetStatus(codes.Error, err.Error())
			if errors.Is(err, context.Canceled) {
				sp.SetAttributes(attribute.Bool("qbridge.cancelled", true))
			}
		}
		sp.End()
	}
	return errs
}

// sendErrorType is error.type for a failed send: a dead-letter reason for
// a permanent failure (bridge.SinkReason), else whether the broker
// throttled, the call was cancelled, or neither ("_OTHER", as the
// conventions name an unknown type).
func sendErrorType(err error) string {
	switch {
	case driver.IsPermanent(err):
		return bridge.SinkReason(err)
	case driver.IsThrottled(err):
		return "throttled"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER"
}

// deadLetterSink traces the dead-letter sink's sends (a send span, child of
// the message's process span) and marks the process span of each message
// it took.
type deadLetterSink struct {
	*sink
}

func (s *deadLetterSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := s.sink.Send(ctx, msgs)
	for i, m := range msgs {
		if i >= len(errs) || errs[i] != nil {
			continue
		}
		if d := s.open.of(m.Trace); d != nil {
			reason, _ := m.Attr(bridge.AttrDeadLetterReason)
			s.open.mu.Lock()
			d.dlReason = reason.Str()
			s.open.mu.Unlock()
		}
	}
	return errs
}
