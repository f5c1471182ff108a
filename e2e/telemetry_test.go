package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/mapping"
)

// otlpReceiver is an in-process OTLP/HTTP trace endpoint.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	got   chan struct{} // a value after each export
}

func startOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	r := &otlpReceiver{got: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		b, err := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &ex)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
		select {
		case r.got <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *otlpReceiver) byKind(kind tracepb.Span_SpanKind) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.GetStringValue()
		}
	}
	return ""
}

// TestTracesNATSToServiceBus: the daemon, configured only by OTEL_*
// variables, exports over OTLP/HTTP the spans of a message that crosses
// from JetStream (with a traceparent) to a Service Bus queue: the process
// span continues the incoming trace under its parent, the send span is its
// child and links to the message's creation context, and the Diagnostic-Id
// on Service Bus is that creation context, unchanged by the bridge. (SQS's
// X-Ray header takes the same path in internal/telemetry's test: fauxqs
// drops AWSTraceHeader, see e2e/brokers/README.md.)
func TestTracesNATSToServiceBus(t *testing.T) {
	srv := sbStartServer(t, `{"queues":[{"name":"traced"}]}`)
	c := sbClient(t, srv)
	ns := startNATS(t)
	recv, endpoint := startOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_SERVICE_NAME", "qbridge-e2e")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "traced" {
  source "nats" {
    url     = %q
    subject = "traced.in"
    jetstream {
      stream        = "TRACED"
      durable       = "qbridge"
      create_stream = true
    }
  }
  sink "servicebus" {
%s  }
}
`, ns.ClientURL(), sbConn(srv, `queue = "traced"`)))
	if logs := d.Logs(); !strings.Contains(logs, "tracing on") {
		t.Errorf("no \"tracing on\" line:\n%s", logs)
	}

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	_, js := e2etest.ConnectNATS(t, ns.ClientURL())
	msg := &nats.Msg{Subject: "traced.in", Data: []byte("traced"), Header: nats.Header{}}
	msg.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	msg.Header.Set(nats.MsgIdHdr, "trace-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	got := sbReceive(t, c, "traced", sbMain, 1, 20*time.Second)[0]
	diag, _ := got.ApplicationProperties["Diagnostic-Id"].(string)
	out, err := mapping.ParseDiagnosticID(diag)
	if err != nil {
		t.Fatalf("Diagnostic-Id %q: %v", diag, err)
	}
	if hex.EncodeToString(out.TraceID[:]) != traceID || !out.Sampled() {
		t.Errorf("Diagnostic-Id %q does not continue trace %s, sampled", diag, traceID)
	}

	// The batch exporter flushes at shutdown.
	if err := d.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	var process, send []*tracepb.Span
	for len(process) == 0 || len(send) == 0 {
		select {
		case <-recv.got:
		case <-time.After(20 * time.Second):
			t.Fatalf("spans received: %d process, %d send", len(process), len(send))
		}
		process, send = recv.byKind(tracepb.Span_SPAN_KIND_CONSUMER), recv.byKind(tracepb.Span_SPAN_KIND_PRODUCER)
	}
	p, s := process[0], send[0]
	if hex.EncodeToString(p.TraceId) != traceID || hex.EncodeToString(p.ParentSpanId) != parentID {
		t.Errorf("process span trace %x parent %x, want %s under %s", p.TraceId, p.ParentSpanId, traceID, parentID)
	}
	if string(s.ParentSpanId) != string(p.SpanId) || string(s.TraceId) != string(p.TraceId) {
		t.Errorf("send span parent %x, want the process span %x", s.ParentSpanId, p.SpanId)
	}
	if hex.EncodeToString(out.SpanID[:]) != parentID {
		t.Errorf("Diagnostic-Id %s names %x, want the producer's %s", diag, out.SpanID, parentID)
	}
	if len(s.Links) != 1 || hex.EncodeToString(s.Links[0].TraceId) != traceID || hex.EncodeToString(s.Links[0].SpanId) != parentID {
		t.Errorf("send span links %v, want the creation context %s-%s", s.Links, traceID, parentID)
	}
	for span, want := range map[*tracepb.Span]map[string]string{
		p: {"messaging.system": "nats", "messaging.operation.type": "process", "messaging.destination.name": "traced.in", "qbridge.settlement": "ack"},
		s: {"messaging.system": "servicebus", "messaging.operation.type": "send", "messaging.destination.name": "traced"},
	} {
		for k, v := range want {
			if got := spanAttr(span, k); got != v {
				t.Errorf("span %s: %s = %q, want %q", span.Name, k, got, v)
			}
		}
	}
}
