package sbrest

import (
	"bufio"
	"bytes"
	"errors"
	"net/textproto"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// mustReject: a decoder's only error is a RejectError (contract rule 9).
func mustReject(t *testing.T, err error) {
	t.Helper()
	if err != nil && !mapping.IsReject(err) {
		t.Fatalf("error is not a RejectError: %v", err)
	}
}

func FuzzInferHeader(f *testing.F) {
	for _, s := range []string{`"Windows 7 Ultimate"`, "299.98", `"Fri, 04 Mar 2011 08:49:37 GMT"`, "true", "42",
		"-0.0", "1e400", "9223372036854775808", `"a"b"`, "NaN", `"Sunday, 06-Nov-94 08:49:37 GMT"`, " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := InferHeader(s)
		if err != nil {
			return
		}
		// Whatever the broker can infer, this package writes back so that it
		// infers (and rebuilds) the same value.
		h, dt, err := FormatHeader(v)
		if err != nil {
			return // e.g. non-ASCII text: policy
		}
		again, err := InferHeader(h)
		if err != nil {
			t.Fatalf("%q -> %#v -> %s: %v", s, v, h, err)
		}
		got, err := rebuild(again, dt, dt != "")
		if err != nil || !got.Equal(v) {
			t.Fatalf("%q -> %#v -> %s (%s) -> %#v %v", s, v, h, dt, got, err)
		}
	})
}

func FuzzDecodeBrokerProperties(f *testing.F) {
	for _, s := range []string{
		`{"SessionId":"{27729E1-B37B-4D29-AA0A-E367906C206E}","MessageId":"{701332E1-B37B-4D29-AA0A-E367906C206E}","TimeToLive":90,"SequenceNumber":12345,"DeliveryCount":2,"EnqueuedTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT"}`,
		`{"DeliveryCount":1,"EnqueuedSequenceNumber":0,"LockToken":"7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547","State":"Active","TimeToLive":10}`,
		`{"TimeToLiveTimeSpan":"0.00:00:40"}`, `{"TimeToLive":922337203685.47754}`, `[]`, `null`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := newMessage()
		_, err := decodeBrokerProperties(s, m)
		mustReject(t, err)
		if err == nil && m.TTL < 0 {
			t.Fatalf("negative TTL %v", m.TTL)
		}
	})
}

// stable: a decoded message renders, parses and renders again identically.
func stable(t *testing.T, m *mapping.Message) {
	t.Helper()
	out, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30})
	if err != nil {
		mustReject(t, err)
		return
	}
	back, err := ParseJSON(out)
	if err != nil {
		t.Fatalf("cannot parse own rendering %s: %v", out, err)
	}
	again, err := RenderJSON(back, mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30})
	if err != nil || !bytes.Equal(out, again) {
		t.Fatalf("unstable rendering:\n%s\n%s\n%v", out, again, err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(`[{"Body":"This is the first message","BrokerProperties":{"Label":"M1","TimeToLiveTimeSpan":"0.00:00:40"}},` +
		`{"Body":"second","BrokerProperties":{"Label":"M2"},"UserProperties":{"Priority":"Low","Price":299.98,"N":3,"T":"Fri, 04 Mar 2011 08:49:37 GMT"}}]`)
	f.Add(`[{"Body":"/w==","UserProperties":{"qbridge.envelope":"{\"v\":1,\"body\":\"base64\"}"}}]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		msgs, err := DecodeBatch([]byte(s))
		var be *BatchError
		if err != nil && errors.As(err, &be) {
			err = be.Err
		}
		mustReject(t, err)
		for _, m := range msgs {
			stable(t, m)
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	// Small seeds: the engine minimizes each new input, which is slow for
	// large ones.
	m := benchMessage()
	m.Body = []byte("small")
	out, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(out))
	f.Add(`{"Body":"/w==","BrokerProperties":{"TimeToLive":1.5},"UserProperties":{"qbridge.envelope":"{\"v\":1,\"body\":\"base64\",\"types\":{\"n\":\"Number.int\"}}","n":42}}`)
	f.Add(`{"Body":"x","BrokerProperties":{"MessageId":"m"},"UserProperties":{"Diagnostic-Id":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseJSON([]byte(s))
		mustReject(t, err)
		if err == nil {
			stable(t, m)
		}
	})
}

// FuzzDecode feeds HTTP header blocks as net/http would parse them.
func FuzzDecode(f *testing.F) {
	f.Add("Brokerproperties: {\"MessageId\":\"m\",\"TimeToLive\":10}\r\nPriority: \"High\"\r\nPrice: 299.98\r\nOrder-Time: \"Fri, 04 Mar 2011 08:49:37 GMT\"\r\n\r\n", "body")
	f.Add("Qbridge.envelope: \"{\"v\":1,\"types\":{\"n\":\"Number.int\"}}\"\r\nN: 42\r\nDiagnostic-Id: \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"\r\n\r\n", "")
	f.Fuzz(func(t *testing.T, headers, body string) {
		mh, err := textproto.NewReader(bufio.NewReader(strings.NewReader(headers))).ReadMIMEHeader()
		if err != nil && len(mh) == 0 {
			return
		}
		m, err := Decode(map[string][]string(mh), []byte(body))
		mustReject(t, err)
		if err != nil {
			return
		}
		r, err := Encode(m, mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30})
		if err != nil {
			mustReject(t, err)
			return
		}
		if _, err := Decode(r.Header, r.Body); err != nil {
			t.Fatalf("cannot decode own encoding %v: %v", r.Header, err)
		}
	})
}
