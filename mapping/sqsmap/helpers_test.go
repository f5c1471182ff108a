package sqsmap

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

var (
	t0  = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now = func() time.Time { return t0 }
)

func at(name string, v mapping.Value) mapping.Attribute {
	return mapping.Attribute{Name: name, Value: v}
}

// sqsMsg is a message as read from an SQS queue: its ID needs no carrying.
func sqsMsg(body string, attrs ...mapping.Attribute) *mapping.Message {
	return &mapping.Message{Body: []byte(body), Attributes: attrs, Source: mapping.Source{Protocol: "sqs"}}
}

// recorder collects what the Drop policy reports (fields), and what the
// Encode policy reports (encoded).
type recorder struct{ fields, encoded []string }

func (r *recorder) onDrop(field, reason string) {
	if reason == "" {
		panic("drop without a reason")
	}
	if how, ok := mapping.EncodedReport(reason); ok {
		if how == "" {
			panic("encoded without a reason")
		}
		r.encoded = append(r.encoded, field)
		return
	}
	r.fields = append(r.fields, field)
}

func opts(p mapping.Policy, r *recorder) EncodeOptions {
	o := EncodeOptions{Options: mapping.Options{Policy: p}, Now: now}
	if r != nil {
		o.OnDrop = r.onDrop
	}
	return o
}

var policies = []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode}

// wantReject checks that err is a *RejectError of the sqs wire form for field.
func wantReject(t *testing.T, err error, field string) {
	t.Helper()
	var r *mapping.RejectError
	if !errors.As(err, &r) {
		t.Fatalf("error %v (%T), want a *mapping.RejectError for %s", err, err, field)
	}
	if r.Wire != Wire || r.Field != field || r.Reason == "" {
		t.Fatalf("reject %+v, want wire sqs, field %s and a reason", r, field)
	}
}

// envelopeOf parses the envelope attribute of o, or returns nil.
func envelopeOf(t *testing.T, o *Outbound) *mapping.Envelope {
	t.Helper()
	a, ok := o.Attributes[mapping.EnvelopeName]
	if !ok {
		return nil
	}
	if deref(a.DataType) != mapping.EnvelopeDataType {
		t.Fatalf("envelope data type %q", deref(a.DataType))
	}
	env, err := mapping.ParseEnvelope(deref(a.StringValue))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func envAttrNames(env *mapping.Envelope) []string {
	if env == nil {
		return nil
	}
	var n []string
	for _, a := range env.Attrs {
		n = append(n, a.Name)
	}
	return n
}

// roundTrip sends m through Encode, Deliver and Decode.
func roundTrip(t testing.TB, m *mapping.Message, opt EncodeOptions) (*Outbound, *mapping.Message) {
	t.Helper()
	o, err := Encode(m, opt)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	msg := Deliver(o, deliveredID, "rh-1", t0)
	got, err := Decode(msg, DecodeOptions{Address: "https://sqs.example/q"})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if _, ok := got.Attr(mapping.EnvelopeName); ok && !hasUserEnvelopeAttr(m) {
		t.Fatalf("the envelope is exposed as an attribute")
	}
	return o, got
}

func hasUserEnvelopeAttr(m *mapping.Message) bool {
	_, ok := m.Attr(mapping.EnvelopeName)
	return ok
}

// deliveredID is the MessageId roundTrip delivers with.
const deliveredID = "0f4a6d52-8c1e-4c25-9d3f-1b2a3c4d5e6f"

// diffMessages compares everything but the source facts. The ID of a
// message whose ID is not carried (none, or from SQS) is the delivered one.
func diffMessages(want, got *mapping.Message) string {
	if want.ID == "" || want.Source.Protocol == "sqs" && want.ID == want.Source.MessageID {
		w := *want
		w.ID, w.IDKind = deliveredID, mapping.KindInvalid
		want = &w
	}
	return strings.Join(mappingtest.Diff(want, got), "\n")
}

func attrsEqual(a, b []mapping.Attribute) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

func wireAttrOf(t *testing.T, o *Outbound, name string) types.MessageAttributeValue {
	t.Helper()
	a, ok := o.Attributes[name]
	if !ok {
		t.Fatalf("no wire attribute %q in %v", name, keys(o.Attributes))
	}
	return a
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
