package config

import (
	"fmt"
	"strings"
	"testing"
)

// Sink identities name what a sink's count counts, in the same words as
// the source identities of the kind, so that qbridge migrate -parallel can
// tell which pipelines touch a common entity (equal identities, or one
// that begins the other: a server or namespace alone).
func TestSinkIdentity(t *testing.T) {
	const sb = `connection_string = "Endpoint=sb://MyNS.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s"`
	const sb2 = `connection_string = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=other;SharedAccessKey=t"`
	for _, tc := range []struct {
		name       string
		sink       string // the sink block's body
		want       string
		sameAs     string // another sink body with the same identity, if any
		sourceBody string // a source of the kind reading what the sink writes, if any
		source     string // its kind
	}{
		{
			name:       "sqs",
			sink:       `queue_url = "https://SQS.eu-west-1.amazonaws.com/123456789012/orders"`,
			want:       "sqs queue https://sqs.eu-west-1.amazonaws.com:443/123456789012/orders",
			sameAs:     `queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"` + "\n" + `senders = 2`,
			source:     "sqs",
			sourceBody: `queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"`,
		},
		{
			name:       "servicebus",
			sink:       sb + "\nqueue = \"orders\"",
			want:       "servicebus namespace myns.servicebus.windows.net entity orders",
			sameAs:     sb2 + "\nqueue = \"orders\"",
			source:     "servicebus",
			sourceBody: sb2 + "\nqueue = \"orders\"",
		},
		{
			name: "servicebus template",
			sink: sb + "\nqueue = \"orders-{attr.region}\"",
			want: "servicebus namespace myns.servicebus.windows.net",
		},
		{
			name:       "jetstream, stream named",
			sink:       "url = \"nats://127.0.0.1:4222\"\nsubject = \"out.x\"\njetstream {\n  stream = \"OUT\"\n}",
			want:       `nats server 127.0.0.1:4222 stream "OUT"`,
			source:     "nats",
			sourceBody: "url = \"nats://127.0.0.1:4222\"\nsubject = \"out.>\"\njetstream {\n  stream = \"OUT\"\n  durable = \"d\"\n}",
		},
		{
			name:       "jetstream, stream not named",
			sink:       "url = \"nats://127.0.0.1:4222\"\nsubject = \"out.x\"\njetstream {}",
			want:       "nats server 127.0.0.1:4222",
			sameAs:     "url = \"nats://127.0.0.1\"\nsubject = \"other\"\njetstream {}",
			source:     "nats",
			sourceBody: "url = \"nats://127.0.0.1:4222\"\nsubject = \"in.>\"\njetstream {\n  stream = \"IN\"\n  durable = \"d\"\n}",
		},
		{
			name:       "amqp",
			sink:       "url = \"amqp://guest:guest@Broker:5672\"\naddress = \"/queues/out\"",
			want:       `amqp brokers broker:5672 address "/queues/out"`,
			source:     "amqp",
			sourceBody: "url = \"amqp://other:pw@broker:5672\"\naddress = \"/queues/out\"",
		},
		{
			name: "amqp template",
			sink: "url = \"amqp://broker\"\naddress = \"/queues/{group}\"",
			want: "amqp brokers broker:5672",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind := strings.Fields(tc.want)[0]
			got := sinkIdentityOf(t, kind, tc.sink)
			if got != tc.want {
				t.Errorf("SinkIdentity = %q, want %q", got, tc.want)
			}
			if tc.sameAs != "" {
				if other := sinkIdentityOf(t, kind, tc.sameAs); other != got {
					t.Errorf("the same entity written with other settings: %q, want %q", other, got)
				}
			}
			if tc.source != "" {
				p := loadOne(t, fmt.Sprintf("pipeline \"p\" {\n  source %q {\n%s\n  }\n  sink \"nats\" {\n    url = \"nats://10.0.0.1\"\n    subject = \"s\"\n  }\n}\n", tc.source, tc.sourceBody))
				src := p.SourceIdentity()
				if src != got && !strings.HasPrefix(src, got+" ") {
					t.Errorf("a source reading the same entity is %q: it neither equals nor begins with the sink's %q", src, got)
				}
			}
		})
	}
}

func sinkIdentityOf(t *testing.T, kind, body string) string {
	t.Helper()
	return loadOne(t, fmt.Sprintf("pipeline \"p\" {\n  source \"nats\" {\n    url = \"nats://10.0.0.1\"\n    subject = \"s\"\n  }\n  sink %q {\n%s\n  }\n}\n", kind, body)).SinkIdentity()
}

func loadOne(t *testing.T, src string) *Pipeline {
	t.Helper()
	cfg, diags := NewLoader().LoadBytes("t.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", diags.Error(), src)
	}
	return cfg.Pipelines[0]
}

// A dead-letter queue's job writes to the dead-letter sink and dead-letters
// there too (WithDeadLetterSinkAsSink): its dead letters grow its sink.
func TestDeadLettersIntoSink(t *testing.T) {
	p := loadOne(t, `pipeline "p" {
  source "nats" {
    url     = "nats://10.0.0.1"
    subject = "s"
  }
  sink "nats" {
    url     = "nats://10.0.0.1"
    subject = "out"
  }
  dead_letter {
    sink "nats" {
      url     = "nats://10.0.0.1"
      subject = "dlq"
    }
  }
}
`)
	if p.DeadLettersIntoSink() {
		t.Error("a pipeline whose dead letters go to another subject: into its sink")
	}
	if !p.WithDeadLetterSinkAsSink().DeadLettersIntoSink() {
		t.Error("its dead-letter queue's job (writing to the dead-letter sink): not into its sink")
	}
	if loadOne(t, "pipeline \"p\" {\n  source \"nats\" {\n    url = \"nats://10.0.0.1\"\n    subject = \"s\"\n  }\n  sink \"nats\" {\n    url = \"nats://10.0.0.1\"\n    subject = \"out\"\n  }\n}\n").DeadLettersIntoSink() {
		t.Error("a pipeline without a dead-letter sink: into its sink")
	}
}
