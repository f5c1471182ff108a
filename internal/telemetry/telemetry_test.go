package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbmap"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// fakeSource hands out the given deliveries once, then waits.
type fakeSource struct {
	mu sync.Mutex
	ds []driver.Delivery
}

func (s *fakeSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	s.mu.Lock()
	ds := s.ds
	s.ds = nil
	s.mu.Unlock()
	if len(ds) > 0 {
		return ds, nil
	}
	<-ctx.Done()
	return nil, nil
}
func (s *fakeSource) Close(context.Context) error { return nil }

type fakeDelivery struct {
	m     *mapping.Message
	acked chan struct{}
}

func (d *fakeDelivery) Message() *mapping.Message                   { return d.m }
func (d *fakeDelivery) Ack(context.Context) error                   { close(d.acked); return nil }
func (d *fakeDelivery) Nack(context.Context, time.Duration) error   { return nil }
func (d *fakeDelivery) Extend(context.Context, time.Duration) error { return nil }

// sbSink encodes as the Service Bus sink does and keeps the wire messages.
type sbSink struct {
	mu   sync.Mutex
	sent []map[string]any // application properties
}

func (s *sbSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range msgs {
		am, err := sbmap.Encode(m, mapping.Options{})
		if err != nil {
			errs[i] = err
			continue
		}
		s.sent = append(s.sent, am.ApplicationProperties)
	}
	return errs
}
func (s *sbSink) Close(context.Context) error { return nil }

// An SQS message with an X-Ray header crosses a pipeline to Service Bus:
// qbridge's process span continues the X-Ray trace under its Parent, the
// send span is its child (a local parent) and links to the message's
// creation context, and the Diagnostic-Id written is the creation context
// unchanged, as the messaging conventions ask of an intermediary (it named
// qbridge's send span, so the trace a consumer saw depended on whether
// qbridge traced). An unsampled header records nothing and carries its
// trace on.
func TestSQSXRayToServiceBus(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		sampled bool
	}{
		{"sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true},
		{"not sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer tp.Shutdown(context.Background())

			m, err := sqsmap.Decode(types.Message{
				MessageId:  aws.String("0b5f9a1e-7c1f-4a44-9d55-6c2a9f7c2b11"),
				Body:       aws.String("hello"),
				Attributes: map[string]string{"AWSTraceHeader": tt.header},
			}, sqsmap.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d := &fakeDelivery{m: m, acked: make(chan struct{})}
			sink := &sbSink{}
			cfg := bridge.Config{
				Name:       "orders",
				SourceKind: "sqs",
				Source:     func(context.Context) (driver.Source, error) { return &fakeSource{ds: []driver.Delivery{d}}, nil },
				SinkKind:   "servicebus",
				Sink:       func(context.Context, func(string, string)) (driver.Sink, error) { return sink, nil },
				Options:    bridge.DefaultOptions(),
				Logger:     slog.New(slog.DiscardHandler),
			}
			cfg = New(tp).Wrap(cfg, Endpoint{Kind: "sqs", Destination: "orders"}, Endpoint{Kind: "servicebus", Destination: "orders-sb"}, Endpoint{})
			runUntilAcked(t, cfg, d)

			sink.mu.Lock()
			sent := sink.sent
			sink.mu.Unlock()
			if len(sent) != 1 {
				t.Fatalf("sink got %d messages", len(sent))
			}
			diag, _ := sent[0][sbmap.DiagnosticIDProperty].(string)
			out, err := mapping.ParseDiagnosticID(diag)
			if err != nil {
				t.Fatalf("Diagnostic-Id %q: %v", diag, err)
			}
			wantTrace := "5759e988bd862e3fe1be46a994272793"
			if got := hex.EncodeToString(out.TraceID[:]); got != wantTrace {
				t.Errorf("outgoing trace %s, want the X-Ray root %s", got, wantTrace)
			}
			if out.Sampled() != tt.sampled {
				t.Errorf("outgoing sampled = %v, want %v (%s)", out.Sampled(), tt.sampled, diag)
			}
			spans := exp.GetSpans()
			if !tt.sampled {
				if len(spans) != 0 {
					t.Errorf("%d spans recorded for an unsampled trace", len(spans))
				}
				if hex.EncodeToString(out.SpanID[:]) != "53995c3f42cd8ad8" {
					t.Errorf("the outgoing parent is not the incoming one: %s", diag)
				}
				return
			}
			var process, send tracetest.SpanStub
			for _, s := range spans {
				switch s.SpanKind {
				case trace.SpanKindConsumer:
					process = s
				case trace.SpanKindProducer:
					send = s
				}
			}
			if process.Name != "process orders" || send.Name != "send orders-sb" {
				t.Fatalf("spans %q and %q, want process orders and send orders-sb (all: %d)", process.Name, send.Name, len(spans))
			}
			if got := process.SpanContext.TraceID().String(); got != wantTrace {
				t.Errorf("process span trace %s, want the X-Ray root %s", got, wantTrace)
			}
			if got := process.Parent.SpanID().String(); got != "53995c3f42cd8ad8" || !process.Parent.IsRemote() {
				t.Errorf("process span's parent %s (remote %v), want the X-Ray Parent", got, process.Parent.IsRemote())
			}
			if send.Parent.SpanID() != process.SpanContext.SpanID() || send.SpanContext.TraceID() != process.SpanContext.TraceID() || send.Parent.IsRemote() {
				t.Errorf("send span's parent %s (remote %v), want the process span %s", send.Parent.SpanID(), send.Parent.IsRemote(), process.SpanContext.SpanID())
			}
			if len(send.Links) != 1 || send.Links[0].SpanContext.SpanID().String() != "53995c3f42cd8ad8" || send.Links[0].SpanContext.TraceID().String() != wantTrace {
				t.Errorf("send span's links %+v, want the creation context", send.Links)
			}
			if hex.EncodeToString(out.SpanID[:]) != "53995c3f42cd8ad8" {
				t.Errorf("Diagnostic-Id %s does not keep the incoming parent", diag)
			}
			for span, want := range map[*tracetest.SpanStub][]attribute.KeyValue{
				&process: {
					attribute.String("messaging.system", "aws_sqs"),
					attribute.String("messaging.operation.type", "process"),
					attribute.String("messaging.destination.name", "orders"),
					attribute.String("messaging.message.id", "0b5f9a1e-7c1f-4a44-9d55-6c2a9f7c2b11"),
					attribute.String("qbridge.settlement", "ack"),
				},
				&send: {
					attribute.String("messaging.system", "servicebus"),
					attribute.String("messaging.operation.type", "send"),
					attribute.String("messaging.destination.name", "orders-sb"),
				},
			} {
				have := map[attribute.Key]attribute.Value{}
				for _, a := range span.Attributes {
					have[a.Key] = a.Value
				}
				for _, w := range want {
					if have[w.Key] != w.Value {
						t.Errorf("span %s: %s = %v, want %v", span.Name, w.Key, have[w.Key].Emit(), w.Value.Emit())
					}
				}
			}
		})
	}
}

func TestEndpointOf(t *testing.T) {
	type js struct{ Stream string }
	tests := []struct {
		cfg  any
		want Endpoint
	}{
		{struct{ QueueURL string }{"https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"}, Endpoint{Destination: "orders.fifo"}},
		{struct{ QueueURL, QueueName string }{"", "orders"}, Endpoint{Destination: "orders"}},
		{&struct{ Queue, Subject string }{"q", "s"}, Endpoint{Destination: "q"}},
		{struct{ Subject string }{"demo.in"}, Endpoint{Destination: "demo.in"}},
		// A destination rendered per message is a template, not a name.
		{struct{ Subject string }{"orders.{group}"}, Endpoint{Template: "orders.{group}"}},
		{struct{ Queue, Topic, Subscription string }{"", "t", "sub-a"}, Endpoint{Destination: "t", Subscription: "sub-a"}},
		{struct {
			Subject   string
			JetStream *js
		}{"", &js{"ORDERS"}}, Endpoint{Destination: "ORDERS"}},
		{struct{ Other string }{"x"}, Endpoint{}},
		{nil, Endpoint{}},
	}
	for _, tt := range tests {
		tt.want.Kind = "k"
		if got := EndpointOf("k", tt.cfg); got != tt.want {
			t.Errorf("EndpointOf(%+v) = %+v, want %+v", tt.cfg, got, tt.want)
		}
	}
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
	}
	for _, tt := range tests {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(k, tt.env[k])
		}
		if got := Enabled(); got != tt.want {
			t.Errorf("Enabled() with %v = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// TestFromEnvRefusesOtherExporters: an exporter this build lacks is refused
// at start, not silently replaced by OTLP or by no tracing at all.
func TestFromEnvRefusesOtherExporters(t *testing.T) {
	for _, tt := range []struct {
		exporter, endpoint string
		refused            bool
	}{
		{"zipkin", "", true},
		{"console", "http://127.0.0.1:4318", true},
		{"otlp,console", "", true},
		{"none", "", false},
		{"", "", false},
	} {
		t.Setenv("OTEL_SDK_DISABLED", "")
		t.Setenv("OTEL_TRACES_EXPORTER", tt.exporter)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tt.endpoint)
		_, stop, err := FromEnv(context.Background(), "test", slog.Default())
		if (err != nil) != tt.refused {
			t.Errorf("OTEL_TRACES_EXPORTER=%q: err %v, want refused %v", tt.exporter, err, tt.refused)
		}
		if err == nil {
			_ = stop(context.Background())
		}
	}
}

// The traces' own protocol variable wins over the general one: grpc there
// was accepted, and the HTTP exporter then sent to a gRPC port.
func TestFromEnvChecksTheTracesProtocol(t *testing.T) {
	for _, tt := range []struct {
		traces, general string
		refused         bool
	}{
		{"grpc", "", true},
		{"grpc", "http/protobuf", true},
		{"http/protobuf", "grpc", false},
		{"", "grpc", true},
		{"", "", false},
	} {
		t.Setenv("OTEL_SDK_DISABLED", "")
		t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tt.traces)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tt.general)
		_, stop, err := FromEnv(context.Background(), "test", slog.Default())
		if (err != nil) != tt.refused {
			t.Errorf("traces %q, general %q: err %v, want refused %v", tt.traces, tt.general, err, tt.refused)
		}
		if err == nil {
			_ = stop(context.Background())
		}
	}
}

// The SDK's errors go to the daemon's log, paced, with the number left
// out; they went to stderr as plain text among the JSON lines.
func TestSDKErrorsGoToTheLog(t *testing.T) {
	var buf bytes.Buffer
	h := errorLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	for range 5 {
		h.Handle(errors.New("traces export: connection refused"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"WARN"`) || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// capableSource has every optional interface a source can have, with
// values that differ from an absent one's.
type capableSource struct{ fakeSource }

func (*capableSource) Ready(context.Context) error { return errNotReady }
func (*capableSource) Unordered() bool             { return true }
func (*capableSource) Lost() uint64                { return 7 }
func (*capableSource) Warnings() []string          { return []string{"w"} }
func (*capableSource) AckBatch(_ context.Context, ds []driver.Delivery) []error {
	errs := make([]error, len(ds))
	for i, d := range ds {
		if _, ok := d.(*capableDelivery); !ok {
			errs[i] = errNotMine // the adapter's own deliveries only
		}
	}
	return errs
}

type capableDelivery struct{ fakeDelivery }

func (*capableDelivery) Release(context.Context) error                    { return nil }
func (*capableDelivery) DeadLetter(context.Context, string, string) error { return nil }
func (*capableDelivery) DecodeError() error                               { return errNotMine }

type capableSink struct{ sbSink }

func (*capableSink) Ready(context.Context) error { return errNotReady }
func (*capableSink) KeepsOrder() bool            { return true }
func (*capableSink) Warnings() []string          { return []string{"w"} }
func (*capableSink) Duplicates() int64           { return 3 }

var (
	errNotReady = errors.New("not ready")
	errNotMine  = errors.New("not this adapter's delivery")
)

// Traced, an adapter answers the engine's type assertions as it does
// untraced: the wrappers embedded only Source and Sink and passed only
// ReadyChecker on, so with tracing on ungrouped JetStream messages were
// reordered (OrderedSender hidden) and a core NATS loss went unseen
// (LossCounter hidden), and acks lost their batches (BatchAcker).
func TestTracedAdaptersKeepWhatTheyCanDo(t *testing.T) {
	tr := New(sdktrace.NewTracerProvider())
	ctx := context.Background()
	src := wrapSource(tr, &capableSource{}, Endpoint{Kind: "nats", Destination: "in"}, newOpenSpans())
	if rc, ok := src.(driver.ReadyChecker); !ok || rc.Ready(ctx) != errNotReady {
		t.Error("ReadyChecker not passed on")
	}
	if u, ok := src.(driver.Unordered); !ok || !u.Unordered() {
		t.Error("Unordered not passed on")
	}
	if lc, ok := src.(driver.LossCounter); !ok || lc.Lost() != 7 {
		t.Error("LossCounter not passed on")
	}
	if w, ok := src.(driver.Warner); !ok || len(w.Warnings()) != 1 {
		t.Error("Warner not passed on")
	}
	ba, ok := src.(driver.BatchAcker)
	if !ok {
		t.Fatal("BatchAcker not passed on")
	}
	d := tr.process(&capableDelivery{fakeDelivery{m: &mapping.Message{ID: "1"}, acked: make(chan struct{})}}, Endpoint{Kind: "nats"}, time.Now(), newOpenSpans())
	if errs := ba.AckBatch(ctx, []driver.Delivery{d}); len(errs) != 1 || errs[0] != nil {
		t.Errorf("AckBatch of a traced delivery: %v; the adapter must get its own delivery", errs)
	}
	if _, ok := d.(driver.Releaser); !ok {
		t.Error("Releaser not passed on")
	}
	if _, ok := d.(driver.DeadLetterer); !ok {
		t.Error("DeadLetterer not passed on")
	}
	if de, ok := d.(driver.DecodeErrorer); !ok || de.DecodeError() != errNotMine {
		t.Error("DecodeErrorer not passed on")
	}

	snk := wrapSink(tr, &capableSink{}, Endpoint{Kind: "nats", Destination: "out"}, newOpenSpans())
	if rc, ok := snk.(driver.ReadyChecker); !ok || rc.Ready(ctx) != errNotReady {
		t.Error("sink ReadyChecker not passed on")
	}
	if o, ok := snk.(driver.OrderedSender); !ok || !o.KeepsOrder() {
		t.Error("OrderedSender not passed on")
	}
	if w, ok := snk.(driver.Warner); !ok || len(w.Warnings()) != 1 {
		t.Error("sink Warner not passed on")
	}
	if dr, ok := snk.(driver.DuplicateReporter); !ok || dr.Duplicates() != 3 {
		t.Error("DuplicateReporter not passed on")
	}

	// And what a plain adapter lacks stays absent where its absence
	// changes what the engine does.
	plain := wrapSource(tr, &fakeSource{}, Endpoint{Kind: "nats"}, newOpenSpans())
	if _, ok := plain.(driver.BatchAcker); ok {
		t.Error("a source without BatchAcker got one")
	}
	pd := tr.process(&fakeDelivery{m: &mapping.Message{ID: "2"}, acked: make(chan struct{})}, Endpoint{Kind: "nats"}, time.Now(), newOpenSpans())
	if _, ok := pd.(driver.DeadLetterer); ok {
		t.Error("a delivery without DeadLetterer got one")
	}
}

// refusingSink refuses every message for good (too large, say).
type refusingSink struct{}

func (refusingSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = driver.Permanent(errors.New("too large for the target"))
	}
	return errs
}
func (refusingSink) Close(context.Context) error { return nil }

// A message the sink refuses and a dead-letter sink takes: its process
// span said settlement "ack", status ok, no reason, and the dead-letter
// send had no span, so in a trace UI the message looked delivered. Now
// the process span says dead_letter with the reason and an error status,
// and the dead-letter send is its child span.
func TestDeadLetterSinkInTheTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	d := &fakeDelivery{m: &mapping.Message{ID: "m1", Body: []byte("x")}, acked: make(chan struct{})}
	dlq := &sbSink{}
	cfg := bridge.Config{
		Name: "orders", SourceKind: "nats", SinkKind: "sqs",
		Source: func(context.Context) (driver.Source, error) { return &fakeSource{ds: []driver.Delivery{d}}, nil },
		Sink:   func(context.Context, func(string, string)) (driver.Sink, error) { return refusingSink{}, nil },
		DeadLetter: bridge.DeadLetter{SinkKind: "servicebus",
			Sink: func(context.Context, func(string, string)) (driver.Sink, error) { return dlq, nil }},
		Options: bridge.DefaultOptions(),
		Logger:  slog.New(slog.DiscardHandler),
	}
	cfg = New(tp).Wrap(cfg, Endpoint{Kind: "nats", Destination: "in"}, Endpoint{Kind: "sqs", Destination: "q1"}, Endpoint{Kind: "servicebus", Destination: "dlq"})
	runUntilAcked(t, cfg, d)
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	process, send, dl := byName["process in"], byName["send q1"], byName["send dlq"]
	if process.Name == "" || send.Name == "" || dl.Name == "" {
		t.Fatalf("spans: %v; want process in, send q1, send dlq", keys(byName))
	}
	attrs := map[attribute.Key]string{}
	for _, a := range process.Attributes {
		attrs[a.Key] = a.Value.Emit()
	}
	if attrs["qbridge.settlement"] != "dead_letter" || attrs["qbridge.dead_letter_reason"] == "" || process.Status.Code != codes.Error {
		t.Errorf("process span: settlement %q, reason %q, status %v", attrs["qbridge.settlement"], attrs["qbridge.dead_letter_reason"], process.Status)
	}
	if dl.Parent.SpanID() != process.SpanContext.SpanID() {
		t.Errorf("the dead-letter send's parent is %s, want the process span %s", dl.Parent.SpanID(), process.SpanContext.SpanID())
	}
	// error.type, which the conventions require on a failed operation:
	// the dead-letter reason on both.
	sendAttrs := map[attribute.Key]string{}
	for _, a := range send.Attributes {
		sendAttrs[a.Key] = a.Value.Emit()
	}
	if attrs["error.type"] != attrs["qbridge.dead_letter_reason"] || sendAttrs["error.type"] != bridge.ReasonPermanent || send.Status.Code != codes.Error {
		t.Errorf("error.type: process %q (reason %q), send %q (status %v)", attrs["error.type"], attrs["qbridge.dead_letter_reason"], sendAttrs["error.type"], send.Status)
	}
}

// capturingSink keeps the messages it is given.
type capturingSink struct {
	mu   sync.Mutex
	msgs []mapping.Message
}

func (s *capturingSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.msgs = append(s.msgs, *m)
	}
	return make([]error, len(msgs))
}
func (s *capturingSink) Close(context.Context) error { return nil }

// The trace context a message came with (its creation context) reaches the
// sink unchanged whatever it says: an X-Ray header's deferred or missing
// Sampled field and its extra fields too (with tracing on they came out
// as Sampled=0, and downstream X-Ray consumers stopped sampling). A
// message without one leaves with qbridge's send span, so that its
// consumers join qbridge's trace; its root span has no parent.
func TestCreationContextTravelsUnchanged(t *testing.T) {
	for _, h := range []string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a87bd80c:1|68fd508a:5",
		"",
	} {
		t.Run(h, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer tp.Shutdown(context.Background())
			var in mapping.Trace
			if h != "" {
				var err error
				if in, err = mapping.ParseXRay(h); err != nil {
					t.Fatal(err)
				}
			}
			d := &fakeDelivery{m: &mapping.Message{ID: "m1", Body: []byte("x"), Trace: in}, acked: make(chan struct{})}
			sink := &capturingSink{}
			cfg := bridge.Config{
				Name: "orders", SourceKind: "sqs", SinkKind: "sqs",
				Source:  func(context.Context) (driver.Source, error) { return &fakeSource{ds: []driver.Delivery{d}}, nil },
				Sink:    func(context.Context, func(string, string)) (driver.Sink, error) { return sink, nil },
				Options: bridge.DefaultOptions(),
				Logger:  slog.New(slog.DiscardHandler),
			}
			cfg = New(tp).Wrap(cfg, Endpoint{Kind: "sqs", Destination: "a"}, Endpoint{Kind: "sqs", Destination: "b"}, Endpoint{})
			runUntilAcked(t, cfg, d)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if len(sink.msgs) != 1 {
				t.Fatalf("sink got %d messages", len(sink.msgs))
			}
			out := sink.msgs[0].Trace
			if h != "" {
				if out != in || out.XRay() != h {
					t.Errorf("the sink got %q, want %q unchanged", out.XRay(), h)
				}
				return
			}
			var send, process tracetest.SpanStub
			for _, s := range exp.GetSpans() {
				switch s.SpanKind {
				case trace.SpanKindProducer:
					send = s
				case trace.SpanKindConsumer:
					process = s
				}
			}
			if out.IsZero() || out.SpanID != [8]byte(send.SpanContext.SpanID()) || out.TraceID != [16]byte(send.SpanContext.TraceID()) {
				t.Errorf("a message without a trace left with %+v, want the send span %s", out, send.SpanContext.SpanID())
			}
			if process.Parent.IsValid() || process.Parent.IsRemote() || len(send.Links) != 0 {
				t.Errorf("root process span's parent %+v (remote %v), send links %v", process.Parent, process.Parent.IsRemote(), send.Links)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// runUntilAcked runs the pipeline of cfg until d is acked, then stops it.
func runUntilAcked(t *testing.T, cfg bridge.Config, d *fakeDelivery) {
	t.Helper()
	p, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-d.acked:
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not acked")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A malformed OTLP header or endpoint variable is refused at start, naming
// the variable but not its value: the SDK skipped such a header (the
// collector then refused every export) and wrote the header, token
// included, to stderr as plain text.
func TestFromEnvRefusesMalformedHeadersAndEndpoints(t *testing.T) {
	const secret = "TOPSECRET"
	for _, tt := range []struct {
		name, variable, value string
		refused               bool
	}{
		{"good headers", "OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20" + secret + ",x-tenant=a", false},
		{"trailing comma", "OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20" + secret + ",", false},
		{"no equals sign", "OTEL_EXPORTER_OTLP_HEADERS", "authorization Bearer " + secret, true},
		{"bad key", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "Bearer " + secret + "=x", true},
		{"bad escape", "OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%zz" + secret, true},
		{"endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:" + secret + "%zz@127.0.0.1:4318", true},
		{"traces endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://u:" + secret + "%zz@127.0.0.1:4318/v1/traces", true},
		// Parsed as a URL of scheme "otel-collector" (and "not-a-url" as a
		// path): every span went to https:///v1/traces and was lost.
		{"no scheme", "OTEL_EXPORTER_OTLP_ENDPOINT", "otel-collector:4318", true},
		{"no scheme, traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "otel-collector:4318/v1/traces", true},
		{"not a url", "OTEL_EXPORTER_OTLP_ENDPOINT", "not-a-url", true},
		{"other scheme", "OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://127.0.0.1:4317", true},
		{"https", "OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_SDK_DISABLED", "")
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(tt.variable, tt.value)
			var buf bytes.Buffer
			_, stop, err := FromEnv(context.Background(), "test", slog.New(slog.NewJSONHandler(&buf, nil)))
			if (err != nil) != tt.refused {
				t.Fatalf("%s=%q: err %v, want refused %v", tt.variable, tt.value, err, tt.refused)
			}
			if err == nil {
				_ = stop(context.Background())
				return
			}
			if msg := err.Error(); !strings.Contains(msg, tt.variable) || strings.Contains(msg, secret) {
				t.Errorf("error %q: want the variable named and the value left out", msg)
			}
			if strings.Contains(buf.String(), secret) {
				t.Errorf("the log shows the secret:\n%s", buf.String())
			}
		})
	}
}

// What the SDK logs itself (a variable it cannot read) goes to the
// daemon's log, in its format, not to stderr as plain text.
func TestSDKLogLinesGoToTheLog(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")
	var buf bytes.Buffer
	_, stop, err := FromEnv(context.Background(), "test", slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_ = stop(context.Background())
	if !strings.Contains(buf.String(), `"level":"ERROR"`) || !strings.Contains(buf.String(), "parse duration") {
		t.Errorf("the SDK's complaint about OTEL_EXPORTER_OTLP_TIMEOUT is not in the log:\n%s", buf.String())
	}
}
