package natsmap

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// FuzzDecode feeds header blocks as nats.go parses them off the wire.
// fuzzScratch persists across the inputs of a fuzzing process, so what one
// input's encoding left in it meets the next.
var fuzzScratch Scratch

func FuzzDecode(f *testing.F) {
	f.Add("NATS/1.0\r\nNats-Msg-Id: x\r\nTags: a\r\nTags: b\r\nqbridge.envelope: {\"v\":1,\"types\":{\"n\":\"Number.int\"}}\r\nn: 42\r\n\r\n", "data", "")
	f.Add("NATS/1.0\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\ntracestate: a=1\r\n\r\n", "", "$JS.ACK.S.c.1.2.3.4.5")
	f.Add("NATS/1.0 503\r\n\r\n", "", "_INBOX.x")
	f.Fuzz(func(t *testing.T, block, data, reply string) {
		h, err := nats.DecodeHeadersMsg([]byte(block))
		if err != nil {
			return
		}
		m, err := Decode(&nats.Msg{Subject: "s", Reply: reply, Header: h, Data: []byte(data)}, DecodeOptions{})
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		// What decodes re-encodes (Encode policy) and decodes to the same.
		msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30}})
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		// The same into the scratch the earlier inputs were encoded into.
		again, err := EncodeScratch(&fuzzScratch, m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30}})
		if err != nil {
			t.Fatalf("Encode took it, EncodeScratch did not: %v", err)
		}
		if d := mappingtest.DiffHeaders(msg.Header, again.Header); d != "" {
			t.Fatalf("EncodeScratch wrote other headers: %s", d)
		}
		back, err := Decode(msg, DecodeOptions{})
		if err != nil {
			t.Fatalf("cannot decode own encoding %v: %v", msg.Header, err)
		}
		m.Source, back.Source = mapping.Source{}, mapping.Source{}
		if d := mappingtest.Diff(m, back, mappingtest.WithSource()); len(d) > 0 {
			t.Fatalf("%s\nheaders %v", d, msg.Header)
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	// Small seeds: the engine minimizes each new input, which is slow for
	// large ones.
	m := &mapping.Message{Body: []byte{0xff}, ID: "i", GroupKey: "g", Attributes: []mapping.Attribute{
		{Name: "n", Value: mapping.Int32(1)}, {Name: "t", Value: mapping.Strings("a", "b")}}}
	out, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(out))
	f.Add(`{"subject":"a.b","headers":{"X":["1","2"],"Content-Type":["text/plain"]},"data":"hi"}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseJSON([]byte(s))
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		out, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30})
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("cannot parse own rendering %s: %v", out, err)
		}
		again, err := RenderJSON(back, mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30})
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("unstable:\n%s\n%s\n%v", out, again, err)
		}
	})
}
