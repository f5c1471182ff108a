package natsmap

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
)

// jsonMsg is the JSON rendering of a NATS message.
type jsonMsg struct {
	Subject      string              `json:"subject"`
	Headers      map[string][]string `json:"headers,omitempty"`
	Data         string              `json:"data"`
	DataEncoding string              `json:"dataEncoding,omitempty"`
}

// ParseJSON parses the JSON rendering {subject, headers, data} and decodes
// it as a received message (default group header).
func ParseJSON(data []byte) (*mapping.Message, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j jsonMsg
	if err := dec.Decode(&j); err != nil {
		return nil, mapping.Rejectf(Wire, "json", "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, mapping.Rejectf(Wire, "json", "data after the JSON object")
	}
	msg := &nats.Msg{Subject: j.Subject, Header: nats.Header(j.Headers)}
	switch j.DataEncoding {
	case "":
		msg.Data = []byte(j.Data)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(j.Data)
		if err != nil {
			return nil, mapping.Rejectf(Wire, "data", "dataEncoding base64: %v", err)
		}
		msg.Data = b
	default:
		return nil, mapping.Rejectf(Wire, "dataEncoding", "%q: want base64 or nothing", j.DataEncoding)
	}
	return Decode(msg, DecodeOptions{})
}

// RenderJSON encodes m (default group header) and renders the NATS message
// as JSON. The subject is m.To (the model has no target subject; the sink's
// template decides it), and is not checked.
func RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	msg, err := encode(m, m.To, &EncodeOptions{Options: opt}, nil)
	if err != nil {
		return nil, err
	}
	b, err := WireJSON(msg)
	if err != nil {
		return nil, mapping.Rejectf(Wire, "json", "%v", err)
	}
	return b, nil
}

// WireJSON renders a NATS message as it is on the wire in the JSON form
// ParseJSON reads: subject, headers, data (base64 where it is not UTF-8).
func WireJSON(msg *nats.Msg) ([]byte, error) {
	j := jsonMsg{Subject: msg.Subject, Headers: msg.Header}
	if len(j.Headers) == 0 {
		j.Headers = nil
	}
	if utf8.Valid(msg.Data) {
		j.Data = string(msg.Data)
	} else {
		j.Data, j.DataEncoding = base64.StdEncoding.EncodeToString(msg.Data), "base64"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
