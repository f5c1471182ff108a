package mapping_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// BenchmarkEnvelopeJSON weighs the carry envelope's hand-written JSON
// writer and parser (envelopejson.go) against encoding/json, in the same
// run, on the envelopes two codecs really write: NATS (attribute types,
// dedup id, content type, trace) and SQS (a message from another broker:
// id, correlation id, content type). For each:
//
//   - marshal/hand is Envelope.Marshal (the fast path); marshal/encoding-json
//     is json.Marshal of the same envelope, which is Marshal's general path
//     and writes the same bytes, without Marshal's UTF-8 check (so the
//     difference is if anything understated);
//   - parse/hand is ParseEnvelope; parse/encoding-json is ParseEnvelope of the
//     same text after one space, which the fast parser refuses, so it goes
//     through json.Unmarshal and gives the same envelope;
//   - encode and decode are the whole codec on the message, decode/
//     encoding-json with the envelope text after one space (the codec's
//     decode end to end on encoding/json).
//
// Each reports cpu-ns/op (the process's CPU time, getrusage) beside ns/op.
//
// docs/benchmarks.md ("JSON: hand-written or encoding/json") has the
// figures and the decision.
func BenchmarkEnvelopeJSON(b *testing.B) {
	type codec struct {
		name       string
		envelope   string
		encode     func() error
		decode     func(envelope string) error
		encodeText func() (string, error)
	}
	natsMsg := benchNATSMessage()
	sqsMsg := benchSQSMessage()
	natsEnv := func() (string, error) {
		out, err := natsmap.Encode(natsMsg, "orders.new", natsmap.EncodeOptions{})
		if err != nil {
			return "", err
		}
		return out.Header.Get(mapping.EnvelopeName), nil
	}
	sqsEnv := func() (string, error) {
		out, err := sqsmap.Encode(sqsMsg, sqsmap.EncodeOptions{})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.Attributes[mapping.EnvelopeName].StringValue), nil
	}
	codecs := []codec{
		{
			name:       "nats",
			encodeText: natsEnv,
			encode: func() error {
				_, err := natsmap.Encode(natsMsg, "orders.new", natsmap.EncodeOptions{})
				return err
			},
			decode: func() func(string) error {
				out, err := natsmap.Encode(natsMsg, "orders.new", natsmap.EncodeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				return func(env string) error {
					out.Header.Set(mapping.EnvelopeName, env)
					_, err := natsmap.Decode(out, natsmap.DecodeOptions{})
					return err
				}
			}(),
		},
		{
			name:       "sqs",
			encodeText: sqsEnv,
			encode: func() error {
				_, err := sqsmap.Encode(sqsMsg, sqsmap.EncodeOptions{})
				return err
			},
			decode: func() func(string) error {
				out, err := sqsmap.Encode(sqsMsg, sqsmap.EncodeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				// One delivered message per envelope text, built once: the
				// MD5 of the attributes covers the envelope.
				delivered := map[string]types.Message{}
				return func(env string) error {
					msg, ok := delivered[env]
					if !ok {
						av := out.Attributes[mapping.EnvelopeName]
						av.StringValue = aws.String(env)
						out.Attributes[mapping.EnvelopeName] = av
						msg = sqsmap.Deliver(out, "id", "rh", time.Unix(1700000000, 0))
						delivered[env] = msg
					}
					_, err := sqsmap.Decode(msg, sqsmap.DecodeOptions{})
					return err
				}
			}(),
		},
	}
	for _, c := range codecs {
		text, err := c.encodeText()
		if err != nil || text == "" {
			b.Fatalf("%s: no envelope (%v)", c.name, err)
		}
		env, err := mapping.ParseEnvelope(text)
		if err != nil {
			b.Fatal(err)
		}
		// The two paths agree, or the comparison means nothing.
		if viaJSON, err := json.Marshal(env); err != nil || string(viaJSON) != text {
			b.Fatalf("%s: json.Marshal gives %s, Marshal %s (%v)", c.name, viaJSON, text, err)
		}
		if slow, err := mapping.ParseEnvelope(" " + text); err != nil || !reflect.DeepEqual(slow, env) {
			b.Fatalf("%s: general parse %+v, fast %+v (%v)", c.name, slow, env, err)
		}
		run := func(name string, fn func() error) {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime(b)
				for b.Loop() {
					if err := fn(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
		run("marshal/hand", func() error { _, err := env.Marshal(); return err })
		run("marshal/encoding-json", func() error { _, err := json.Marshal(env); return err })
		run("parse/hand", func() error { _, err := mapping.ParseEnvelope(text); return err })
		run("parse/encoding-json", func() error { _, err := mapping.ParseEnvelope(" " + text); return err })
		run("encode/hand", c.encode)
		run("decode/hand", func() error { return c.decode(text) })
		run("decode/encoding-json", func() error { return c.decode(" " + text) })
	}
}

// cpuTime is the CPU time this process has used so far (getrusage): on a
// shared machine it moves less than the wall clock with other work.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchNATSMessage is natsmap's benchmark message: a 1 KiB body and 10
// attributes of common kinds, whose types ride in the envelope.
func benchNATSMessage() *mapping.Message {
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	return &mapping.Message{
		Body:        []byte(strings.Repeat("x", 1024)),
		DedupID:     "31907572164743c38741631acd554d6f",
		ContentType: "application/json",
		GroupKey:    "customer-42",
		Trace:       tr,
		Attributes: []mapping.Attribute{
			{Name: "product", Value: mapping.String("Windows 7 Ultimate")},
			{Name: "price", Value: mapping.Float64(299.98)},
			{Name: "quantity", Value: mapping.Int64(3)},
			{Name: "gift", Value: mapping.Bool(false)},
			{Name: "order-time", Value: mapping.Timestamp(time.Unix(1299228577, 0))},
			{Name: "region", Value: mapping.String("emea")},
			{Name: "line", Value: mapping.Int32(7)},
			{Name: "customer-id", Value: mapping.UUID([16]byte{1, 2, 3})},
			{Name: "tags", Value: mapping.Strings("new", "promo")},
			{Name: "channel", Value: mapping.String("web")},
		},
	}
}

// benchSQSMessage is sqsmap's envelope benchmark message: a 1 KiB body,
// 9 attributes and fields from another broker that ride in the envelope.
func benchSQSMessage() *mapping.Message {
	return &mapping.Message{
		Body:          []byte(strings.Repeat(`{"k":"Grüße, value"},`, 1024/22+1)[:1024]),
		ID:            "id-1",
		CorrelationID: "c-1",
		ContentType:   "application/json",
		Attributes: []mapping.Attribute{
			{Name: "a_str", Value: mapping.String("some text value")},
			{Name: "b_int", Value: mapping.Int32(42)},
			{Name: "c_long", Value: mapping.Int64(1 << 40)},
			{Name: "d_double", Value: mapping.Float64(3.25)},
			{Name: "e_uuid", Value: mapping.UUID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})},
			{Name: "f_bin", Value: mapping.Binary([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}).WithLabel("png")},
			{Name: "g_bool", Value: mapping.Bool(true)},
			{Name: "h_ts", Value: mapping.TimestampMillis(1700000000000)},
			{Name: "i_num", Value: mapping.Number("12345.678")},
		},
		Source: mapping.Source{Protocol: "amqp"},
	}
}
