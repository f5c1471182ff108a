package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// A sink, or dead-letter sink, that provably writes into the pipeline's
// source is refused at its block, naming both addresses.
func TestSinkFeedingItsSourceIsRefused(t *testing.T) {
	const sbConn = `connection_string = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s"`
	tests := []struct {
		name      string
		src       string
		line, col int      // the sink block's start
		detail    []string // substrings of the detail
	}{
		{"embedded NATS, core subject", `pipeline "loop" {
  source "nats" {
    embedded  = true
    store_dir = "qbridge-feeds-test"
    subject   = "l.in"
  }
  sink "nats" {
    embedded  = true
    store_dir = "qbridge-feeds-test"
    subject   = "l.in"
  }
}
`, 7, 3, []string{`This sink publishes to subject "l.in" on the embedded server (store_dir `, `which the source's subscription to "l.in" on the same server receives`, "circulate at full speed"}},

		{"NATS wildcard subscription, JetStream publish", `pipeline "loop" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "orders.>"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "orders.copy"
    jetstream { stream = "COPY" }
  }
}
`, 6, 3, []string{`"orders.copy" on 127.0.0.1:4222`, `subscription to "orders.>"`}},

		{"JetStream stream the source creates", `pipeline "loop" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "demo.in"
    jetstream {
      stream        = "DEMO_IN"
      durable       = "demo"
      create_stream = true
    }
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "demo.in"
  }
}
`, 11, 3, []string{`stream "DEMO_IN" (subjects ["demo.in"])`, `consumer "demo"`}},

		{"dead-letter sink into the source", `pipeline "loop" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.out"
  }
  dead_letter {
    sink "nats" {
      url     = "nats://127.0.0.1:4222"
      subject = "l.in"
    }
  }
}
`, 11, 5, []string{`This dead-letter sink publishes to subject "l.in"`, "dead-lettered again"}},

		{"SQS queue_url", `pipeline "loop" {
  source "sqs" { queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders" }
  sink "sqs" { queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders" }
}
`, 3, 3, []string{"sends to queue https://sqs.eu-west-1.amazonaws.com/123456789012/orders, the queue the source receives from"}},

		{"SQS queue_name", `pipeline "loop" {
  source "sqs" {
    queue_name = "orders"
    region     = "eu-west-1"
  }
  sink "sqs" {
    queue_name = "orders"
    region     = "eu-west-1"
  }
}
`, 6, 3, []string{`sends to queue "orders" (region eu-west-1)`}},

		{"AMQP address", `pipeline "loop" {
  source "amqp" {
    url     = "amqp://guest:guest@127.0.0.1:5672"
    address = "/queue/orders"
  }
  sink "amqp" {
    url     = "amqp://127.0.0.1"
    address = "/queue/orders"
  }
}
`, 6, 3, []string{`sends to address "/queue/orders" on 127.0.0.1:5672`}},

		{"Service Bus queue", `pipeline "loop" {
  source "servicebus" {
    ` + sbConn + `
    queue = "orders"
  }
  sink "servicebus" {
    ` + sbConn + `
    queue = "orders"
  }
}
`, 6, 3, []string{`sends to queue "orders" in namespace myns.servicebus.windows.net`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src)
			d := feedsDiag(t, diags)
			if d.Subject == nil || d.Subject.Filename != "t.hcl" || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
				t.Errorf("at %v, want t.hcl:%d:%d", d.Subject, tt.line, tt.col)
			}
			for _, w := range tt.detail {
				if !strings.Contains(d.Detail, w) {
					t.Errorf("detail lacks %q:\n%s", w, d.Detail)
				}
			}
			if strings.Contains(d.Detail, "guest") || strings.Contains(d.Detail, "SharedAccessKey") {
				t.Errorf("detail shows credentials:\n%s", d.Detail)
			}
		})
	}
}

// feedsDiag returns the one "Sink feeds its own source" error of diags.
func feedsDiag(t *testing.T, diags hcl.Diagnostics) *hcl.Diagnostic {
	t.Helper()
	var found []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Summary == feedsSummary {
			found = append(found, d)
		}
	}
	if len(found) != 1 || len(diags.Errs()) != 1 {
		t.Fatalf("want exactly one %q error; got:\n%s", feedsSummary, diagList(diags))
	}
	return found[0]
}

// Near misses: nothing proves these loop, so they load.
func TestSinkNotFeedingItsSourceLoads(t *testing.T) {
	tests := []struct{ name, src string }{
		{"NATS other subject", `pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.out"
  }
  dead_letter {
    sink "nats" {
      url     = "nats://127.0.0.1:4222"
      subject = "l.dlq"
    }
  }
}
`},
		{"NATS other server", `pipeline "p" {
  source "nats" {
    url     = "nats://10.0.0.1:4222"
    subject = "l.in"
  }
  sink "nats" {
    url     = "nats://10.0.0.2:4222"
    subject = "l.in"
  }
}
`},
		{"NATS wildcard that does not match", `pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.*"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in.copy"
  }
}
`},
		{"NATS templated sink subject", `pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.>"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.{group}"
  }
}
`},
		{"JetStream stream of unknown subjects", `pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in"
    jetstream {
      stream  = "EXISTING"
      durable = "d"
    }
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in"
  }
}
`},
		{"SQS other region", `pipeline "p" {
  source "sqs" {
    queue_name = "orders"
    region     = "eu-west-1"
  }
  sink "sqs" {
    queue_name = "orders"
    region     = "us-east-1"
  }
}
`},
		{"different kinds never compare", `pipeline "p" {
  source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "orders"
  }
  sink "servicebus" {
    connection_string = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"
    queue             = "orders"
  }
}
`},
		{"Service Bus subscription of the sink's topic", `pipeline "p" {
  source "servicebus" {
    connection_string = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s"
    topic             = "events"
    subscription      = "enrich"
  }
  sink "servicebus" {
    connection_string = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s"
    topic             = "events"
  }
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, diags := load(t, tt.src); diags.HasErrors() {
				t.Errorf("refused:\n%s", diagList(diags))
			}
		})
	}
}

// qbridge migrate and run load files with Loader.Load: a migration whose
// target is its source is refused the same way.
func TestSinkFeedingItsSourceRefusedFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "migrate.hcl")
	src := `pipeline "move" {
  source "sqs" { queue_url = "http://127.0.0.1:4566/000000000000/orders" }
  sink "sqs" { queue_url = "http://127.0.0.1:4566/000000000000/orders" }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, diags := NewLoader().Load(path)
	if cfg != nil {
		t.Error("a configuration was returned")
	}
	if d := feedsDiag(t, diags); d.Subject.Filename != path || d.Subject.Start.Line != 3 {
		t.Errorf("at %s", d.Subject)
	}
}

// validate without -strict: a sink whose address is an unset variable is
// unknown, and not compared.
func TestSinkFeedsSourceUnknownValues(t *testing.T) {
	os.Unsetenv("QB_FEEDS_UNSET_SUBJECT")
	l := NewLoader()
	l.AllowUnsetEnv()
	_, diags := l.LoadBytes("t.hcl", []byte(`pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "l.in"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = env("QB_FEEDS_UNSET_SUBJECT")
  }
}
`))
	if diags.HasErrors() {
		t.Errorf("refused:\n%s", diagList(diags))
	}
}

// The shipped examples load, with the values their headers export: none
// feeds its own source (an error), and none warns: a user's first try
// should not open on a warning (the local migration example warned that its
// lock heartbeat was close to its ack_wait, on every run).
func TestExampleConfigsLoadCleanly(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	t.Setenv("HOME", t.TempDir()) // the embedded examples' store_dir
	export := regexp.MustCompile(`(?m)^#\s+export ([A-Z0-9_]+)=(.*)$`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range export.FindAllStringSubmatch(string(b), -1) {
				t.Setenv(m[1], strings.Trim(m[2], `'"`))
			}
			cfg, diags := NewLoader().Load(f)
			if diags.HasErrors() || cfg == nil || len(cfg.Pipelines) == 0 {
				t.Errorf("does not load:\n%s", diagList(diags))
			}
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning {
					t.Errorf("warns: %s", DiagnosticString(d))
				}
			}
		})
	}
}
