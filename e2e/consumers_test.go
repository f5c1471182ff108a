package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/sbtestserver"
	"github.com/qbridge/qbridge/mapping"
)

// What native consumers see (docs/what-consumers-see.md), checked with SDKs
// nobody here wrote: the official AWS SQS (@aws-sdk/client-sqs) and Azure
// Service Bus (@azure/service-bus) JavaScript SDKs, pinned in
// e2e/consumers/package.json, send on one side and receive on the other
// through a qbridge daemon (fauxqs for SQS, the project's Service Bus test
// server). Every name starts with "cns".

// cnsSQSAttr is one SQS message attribute as the JS SDK gives it.
type cnsSQSAttr struct {
	DataType    string
	StringValue string `json:",omitempty"`
	BinaryValue string `json:",omitempty"`
}

type cnsSQSMessage struct {
	Body              string
	MessageAttributes map[string]cnsSQSAttr
	Attributes        map[string]string
}

// cnsSBValue is an application property as a JS application holds it:
// typeof (or Date / Buffer) and its value.
type cnsSBValue struct {
	JS    string `json:"js"`
	Value any    `json:"value"`
}

type cnsSBMessage struct {
	Body                  string                `json:"body"`
	MessageID             string                `json:"messageId"`
	CorrelationID         string                `json:"correlationId"`
	Subject               string                `json:"subject"`
	ContentType           string                `json:"contentType"`
	ApplicationProperties map[string]cnsSBValue `json:"applicationProperties"`
}

// cnsNode runs one operation of e2e/consumers/consumers.mjs and decodes its
// output into out.
func cnsNode(t testing.TB, env []string, out any, op string, arg any) {
	t.Helper()
	b, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbtestserver.Node(), "consumers.mjs", op, string(b))
	cmd.Dir = filepath.Join(sbRepoRoot(), "e2e/consumers")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node consumers.mjs %s: %v\n%s", op, err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("node consumers.mjs %s: %v: %s", op, err, stdout)
	}
}

// cnsNeedSDKs skips (fails under QBRIDGE_E2E_REQUIRED) without the SDKs.
func cnsNeedSDKs(t testing.TB) {
	t.Helper()
	if msg := sbtestserver.Missing(sbRepoRoot(), "e2e/consumers/node_modules/@aws-sdk/client-sqs/package.json",
		"e2e/consumers/node_modules/@azure/service-bus/package.json"); msg != "" {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			t.Fatal(msg + " (bash e2e/sbserver/install.sh installs them)")
		}
		t.Skip(msg)
	}
}

// TestConsumersSeeCleanMessages: three pipelines through one daemon.
//
//   - SQS → Service Bus: typed SQS attributes reach a Service Bus
//     application in their natural JS types (Number.float "3.50" is the
//     number 3.5, not the string "3.50"); put back on Service Bus as
//     received and bridged to SQS, every attribute comes back exactly
//     (the exact texts rode in the envelope).
//   - Service Bus → SQS, defaults: ten int properties and a MessageId reach
//     the SQS application as ten Number.int attributes, no qbridge.envelope
//     (it carried only the ids and is shed, counted), nothing dead-lettered.
//   - Service Bus → SQS with envelope = "off" and set templates: the SQS
//     application sees CorrelationId and Subject as plain String
//     attributes, and no envelope.
func TestConsumersSeeCleanMessages(t *testing.T) {
	cnsNeedSDKs(t)
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"from-sqs"},{"name":"again"},{"name":"to-sqs"},{"name":"to-sqs-off"}]}`)
	qIn, qBack, qOut, qOff := e.createQueue(t, "in", false, nil), e.createQueue(t, "back", false, nil),
		e.createQueue(t, "out", false, nil), e.createQueue(t, "off", false, nil)
	sbSetAWSEnv(t)
	env := []string{"SQS_ENDPOINT=" + e.endpoint, "AWS_REGION=" + e.region, "SB_CONNECTION_STRING=" + srv.Conn}
	d := startDaemon(t, fmt.Sprintf(`
pipeline "sqs-to-sb" {
  source "sqs" {
%s  }
  sink "servicebus" {
%s  }
}
pipeline "sb-again-to-sqs" {
  source "servicebus" {
%s  }
  sink "sqs" {
%s  }
}
pipeline "sb-to-sqs" {
  source "servicebus" {
%s  }
  sink "sqs" {
%s  }
}
pipeline "sb-to-sqs-off" {
  source "servicebus" {
%s  }
  sink "sqs" {
%s  }
  mapping {
    envelope = "off"
    set "CorrelationId" {
      type     = "String"
      template = "{correlation_id}"
    }
    set "Subject" {
      type     = "String"
      template = "{subject}"
    }
  }
}
`, e.conn(qIn, `wait_time = "1s"`), sbConn(srv, `queue = "from-sqs"`),
		sbConn(srv, `queue = "again"`), e.conn(qBack),
		sbConn(srv, `queue = "to-sqs"`), e.conn(qOut),
		sbConn(srv, `queue = "to-sqs-off"`), e.conn(qOff)))

	t.Run("sqs to service bus: natural types", func(t *testing.T) {
		sent := map[string]cnsSQSAttr{
			"price":  {DataType: "Number.float", StringValue: "3.5"},
			"total":  {DataType: "Number.float", StringValue: "3.50"},
			"qty":    {DataType: "Number.int", StringValue: "42"},
			"big":    {DataType: "Number", StringValue: "12345678901234567890123456789012345678"},
			"name":   {DataType: "String", StringValue: "Grüße"},
			"ok":     {DataType: "String.bool", StringValue: "true"},
			"tenant": {DataType: "String.tenant-id", StringValue: "acme"},
			"logo":   {DataType: "Binary.png", BinaryValue: "iVBORw=="},
		}
		var id struct{ MessageId string }
		cnsNode(t, env, &id, "sqs-send", map[string]any{"queueUrl": qIn, "body": "typed", "attributes": sent})
		var got []cnsSBMessage
		cnsNode(t, env, &got, "sb-resend", map[string]any{"from": "from-sqs", "to": "again", "count": 1, "waitMs": 30000})
		if len(got) != 1 {
			t.Fatalf("%d Service Bus messages, want 1", len(got))
		}
		want := map[string]cnsSBValue{
			"price": {"number", 3.5}, "total": {"number", 3.5}, "qty": {"number", float64(42)},
			"big": {"string", "12345678901234567890123456789012345678"}, "name": {"string", "Grüße"},
			"ok": {"boolean", true}, "tenant": {"string", "acme"},
		}
		for name, w := range want {
			if g := got[0].ApplicationProperties[name]; g != w {
				t.Errorf("Service Bus application sees %s = %+v, want %+v", name, g, w)
			}
		}
		// A binary property reaches the application as an object of bytes
		// by index (what @azure/service-bus 7.9.5 hands over here).
		if g := got[0].ApplicationProperties["logo"]; g.JS != "object" || fmt.Sprint(g.Value) != "map[0:137 1:80 2:78 3:71]" {
			t.Errorf("Service Bus application sees logo = %+v", g)
		}
		if got[0].Body != "typed" {
			t.Errorf("body %q", got[0].Body)
		}
		// And back: the Service Bus message as received, to SQS.
		var back []cnsSQSMessage
		cnsNode(t, env, &back, "sqs-receive", map[string]any{"queueUrl": qBack, "count": 1, "waitSeconds": 30})
		if len(back) != 1 {
			t.Fatalf("%d SQS messages back, want 1", len(back))
		}
		// What the application sent on as it received it comes back exactly
		// where a JS value can say it: the exact texts (Number.float
		// "3.50", the 38 digits) rode in the envelope. A JS number has no
		// int/uint, so the SDK sends 42 back as a uint; the binary went on
		// as the object the SDK made of it (a map).
		for _, name := range []string{"price", "total", "big", "name", "ok", "tenant"} {
			if g := back[0].MessageAttributes[name]; g != sent[name] {
				t.Errorf("back on SQS, %s = %+v, want %+v", name, g, sent[name])
			}
		}
		for name, want := range map[string]string{"qty": "Number.uint", "logo": "String.map"} {
			if g := back[0].MessageAttributes[name]; g.DataType != want {
				t.Errorf("back on SQS, %s = %+v, want a %s (what the SDK sent on)", name, g, want)
			}
		}
	})

	t.Run("service bus to sqs: ten int properties", func(t *testing.T) {
		props := map[string]any{}
		for i := range 10 {
			props[fmt.Sprint("p", i)] = i * 1000
		}
		var ok any
		cnsNode(t, env, &ok, "sb-send", map[string]any{"queue": "to-sqs", "message": map[string]any{
			"body": "ten", "messageId": "sb-ten-1", "correlationId": "corr-1", "applicationProperties": props,
		}})
		var got []cnsSQSMessage
		cnsNode(t, env, &got, "sqs-receive", map[string]any{"queueUrl": qOut, "count": 1, "waitSeconds": 30})
		if len(got) != 1 {
			t.Fatalf("%d SQS messages, want 1 (dead-lettered: %v)", len(got), d.metric("qbridge_messages_dead_lettered_total", "pipeline=sb-to-sqs"))
		}
		attrs := got[0].MessageAttributes
		if len(attrs) != 10 {
			t.Errorf("SQS application sees %d attributes, want the 10: %v", len(attrs), slices.Sorted(maps.Keys(attrs)))
		}
		// The JS SDK (rhea) sends a positive integer as an AMQP uint, 0
		// and negatives as int: the natural SQS types of what it sent.
		for i := range 10 {
			dt := "Number.uint"
			if i == 0 {
				dt = "Number.int"
			}
			if a := attrs[fmt.Sprint("p", i)]; a.DataType != dt || a.StringValue != fmt.Sprint(i*1000) {
				t.Errorf("p%d = %+v, want %s %d", i, a, dt, i*1000)
			}
		}
		for _, f := range []string{"id", "correlationId"} {
			if n := d.metric("qbridge_mapping_envelope_shed_total", "pipeline=sb-to-sqs", "field="+f); n != 1 {
				t.Errorf("qbridge_mapping_envelope_shed_total{field=%q} = %v, want 1", f, n)
			}
		}
	})

	t.Run("service bus to sqs: envelope off, fields as attributes", func(t *testing.T) {
		var ok any
		cnsNode(t, env, &ok, "sb-send", map[string]any{"queue": "to-sqs-off", "message": map[string]any{
			"body": "{}", "messageId": "sb-off-1", "correlationId": "c-7", "subject": "orders.new",
			"contentType": "application/json", "applicationProperties": map[string]any{"qty": 3, "unit": "kg"},
		}})
		var got []cnsSQSMessage
		cnsNode(t, env, &got, "sqs-receive", map[string]any{"queueUrl": qOff, "count": 1, "waitSeconds": 30})
		if len(got) != 1 {
			t.Fatalf("%d SQS messages, want 1", len(got))
		}
		want := map[string]cnsSQSAttr{
			"qty": {DataType: "Number.uint", StringValue: "3"}, "unit": {DataType: "String", StringValue: "kg"},
			"CorrelationId": {DataType: "String", StringValue: "c-7"}, "Subject": {DataType: "String", StringValue: "orders.new"},
		}
		if !maps.Equal(got[0].MessageAttributes, want) {
			t.Errorf("SQS application sees %v\nwant %v", got[0].MessageAttributes, want)
		}
		if _, ok := got[0].MessageAttributes[mapping.EnvelopeName]; ok {
			t.Error("envelope written with envelope = off")
		}
		for _, f := range []string{"id", "contentType"} {
			if n := d.metric("qbridge_mapping_envelope_shed_total", "pipeline=sb-to-sqs-off", "field="+f); n != 1 {
				t.Errorf("qbridge_mapping_envelope_shed_total{field=%q} = %v, want 1", f, n)
			}
		}
	})
	if n := d.metric("qbridge_messages_dead_lettered_total"); n != 0 {
		t.Errorf("%v messages dead-lettered", n)
	}
}
