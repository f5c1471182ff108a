package sbrest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// eachMemberStd is eachMember written on encoding/json alone (a Decoder's
// tokens, each value as a json.RawMessage), the alternative the benchmark
// below weighs jsonscan.go against. It gives fn the same keys and values
// (compact input: the raw texts are byte-identical).
func eachMemberStd(s string, fn func(key, raw string) error) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return errNotObject
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if err := fn(t.(string), string(raw)); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}

func TestEachMemberStdAgrees(t *testing.T) {
	out, err := RenderJSON(benchMessage(), mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type kv struct{ k, v string }
	collect := func(each func(string, func(string, string) error) error, s string) (got []kv) {
		if err := each(s, func(k, v string) error { got = append(got, kv{k, v}); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	var texts []string
	for _, m := range collect(eachMember, string(out)) {
		texts = append(texts, m.v)
	}
	for _, s := range append(texts[1:], string(out)) { // the element and its two objects
		if a, b := collect(eachMember, s), collect(eachMemberStd, s); len(a) == 0 || !equalKV(a, b) {
			t.Errorf("%s: scanner %q, encoding/json %q", s, a, b)
		}
	}
}

func equalKV[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BenchmarkJSON weighs the hand-written JSON of this package (jsontext.go's
// writer, jsonscan.go's reader) against encoding/json in the same run, on
// benchMessage, per message:
//
//   - brokerprops-write: the BrokerProperties header, appendBrokerProperties
//     against json.Marshal of the same properties (baselineBrokerProps) made
//     header-safe by asciiJSON;
//   - brokerprops-read: decodeBrokerProperties against the same per-member
//     decoding driven by eachMemberStd;
//   - element-write: a batch element's JSON (RenderJSON's appendElement)
//     against json.Marshal of {Body, BrokerProperties, UserProperties}
//     (a map: the properties are sorted by name, as json.Marshal sorts);
//   - element-scan: reading the element and its two objects member by
//     member, as ParseJSON does, with eachMember against eachMemberStd;
//   - codec/encode, codec/decode, codec/render and codec/parse: the whole
//     codec on the message (Encode, Decode, RenderJSON, ParseJSON).
//
// Each reports cpu-ns/op (the process's CPU time, getrusage) beside ns/op.
// docs/benchmarks.md ("JSON: hand-written or encoding/json") has the
// figures and the decision.
func BenchmarkJSON(b *testing.B) {
	m := benchMessage()
	opt := mapping.Options{}
	hdr, err := encodeMessage(m, &opt, formHeader)
	if err != nil {
		b.Fatal(err)
	}
	batch, err := encodeMessage(m, &opt, formBatch)
	if err != nil {
		b.Fatal(err)
	}
	bpText := string(hdr.bpJSON)
	var bp baselineBrokerProps
	if err := json.Unmarshal(hdr.bpJSON, &bp); err != nil {
		b.Fatal(err)
	}
	if got, _ := json.Marshal(&bp); string(got) != bpText {
		b.Fatalf("encoding/json writes %s, the writer %s", got, bpText)
	}
	element := appendElement(nil, batch)
	up := make(map[string]any, len(batch.props))
	for _, p := range batch.props {
		if p.v.quoted {
			up[p.name] = p.v.text
		} else {
			up[p.name] = json.RawMessage(p.v.text)
		}
	}
	type elementJSON struct {
		Body             string
		BrokerProperties json.RawMessage
		UserProperties   map[string]any `json:",omitempty"`
	}
	elem := elementJSON{Body: batch.bodyText, BrokerProperties: batch.bpJSON, UserProperties: up}
	if got, _ := json.Marshal(&elem); !bytes.Equal(got, element) {
		b.Fatalf("encoding/json writes %s, the writer %s", got, element)
	}
	scan := func(each func(string, func(string, string) error) error) func() error {
		return func() error {
			return each(string(element), func(k, raw string) error {
				if k == "Body" {
					_, err := unquoteJSON(raw)
					return err
				}
				return each(raw, func(string, string) error { return nil })
			})
		}
	}
	readBP := func(each func(string, func(string, string) error) error) func() error {
		return func() error {
			m := newMessage()
			var info bpInfo
			var ttlSet bool
			return each(bpText, func(k, v string) error { return decodeBrokerProperty(k, v, m, &info, &ttlSet) })
		}
	}
	req, err := Encode(m, opt)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"brokerprops-write/hand", func() error { buf = appendBrokerProperties(buf[:0], &hdr.bp); return nil }},
		{"brokerprops-write/encoding-json", func() error {
			out, err := json.Marshal(&bp)
			_ = asciiJSON(string(out))
			return err
		}},
		{"brokerprops-read/hand", readBP(eachMember)},
		{"brokerprops-read/encoding-json", readBP(eachMemberStd)},
		{"element-write/hand", func() error { buf = appendElement(buf[:0], batch); return nil }},
		{"element-write/encoding-json", func() error { _, err := json.Marshal(&elem); return err }},
		{"element-scan/hand", scan(eachMember)},
		{"element-scan/encoding-json", scan(eachMemberStd)},
		{"codec/encode", func() error { _, err := Encode(m, opt); return err }},
		{"codec/decode", func() error { _, err := Decode(req.Header, req.Body); return err }},
		{"codec/render", func() error { _, err := RenderJSON(m, opt); return err }},
		{"codec/parse", func() error { _, err := ParseJSON(element); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
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
