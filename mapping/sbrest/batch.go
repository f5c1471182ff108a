package sbrest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/qbridge/qbridge/mapping"
)

// ErrBatchTooLarge: the batch body is larger than the message size limit;
// split it (each message fits on its own, or EncodeBatch says which does not).
var ErrBatchTooLarge = errors.New("servicebus-https: batch larger than the message size limit")

// BatchError says which message of a batch failed. It unwraps to the
// message's error (a *mapping.RejectError for a message that cannot be sent).
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("batch message %d: %v", e.Index, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }

// EncodeBatch renders a batch send body (POST {entity}/messages with
// Content-Type BatchContentType).
func EncodeBatch(msgs []*mapping.Message, opt mapping.Options) ([]byte, error) {
	limit := maxSize(&opt)
	held := opt.HoldAll() // for a batch that is sent whole: shed members too
	dst := make([]byte, 1, 512*len(msgs)+2)
	dst[0] = '['
	for i, m := range msgs {
		e, err := encodeMessage(m, &opt, formBatch)
		if err != nil {
			return nil, &BatchError{Index: i, Err: err}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		start := len(dst)
		dst = appendElement(dst, e)
		if n := len(dst) - start; n > limit {
			return nil, &BatchError{Index: i, Err: mapping.TooLargef(Wire, "message", "%d bytes, more than the limit of %d", n, limit)}
		}
	}
	dst = append(dst, ']')
	if len(dst) > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(dst), limit)
	}
	held.Flush()
	return dst, nil
}

// RenderJSON renders m as one batch element {Body, BrokerProperties,
// UserProperties}: the JSON rendering of this wire form.
func RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	held := opt.HoldAll() // the element's size is judged after its encode
	e, err := encodeMessage(m, &opt, formBatch)
	if err != nil {
		return nil, err
	}
	out := appendElement(make([]byte, 0, len(e.bodyText)+e.headerBytes+64), e)
	if limit := maxSize(&opt); len(out) > limit {
		return nil, mapping.TooLargef(Wire, "message", "%d bytes, more than the limit of %d", len(out), limit)
	}
	held.Flush()
	return out, nil
}

func maxSize(opt *mapping.Options) int {
	if opt.MaxMessageSize > 0 {
		return opt.MaxMessageSize
	}
	return DefaultMaxMessageSize
}

func appendElement(dst []byte, e *encoded) []byte {
	dst = append(dst, `{"Body":`...)
	dst = appendJSONString(dst, e.bodyText, false)
	dst = append(dst, `,"BrokerProperties":`...)
	dst = append(dst, e.bpJSON...)
	if len(e.props) > 0 {
		dst = append(dst, `,"UserProperties":{`...)
		for i, p := range e.props {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, p.name, false)
			dst = append(dst, ':')
			if p.v.quoted {
				dst = appendJSONString(dst, p.v.text, false)
			} else {
				dst = append(dst, p.v.text...) // a JSON number or true/false
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// DecodeBatch parses a batch body into its messages.
func DecodeBatch(data []byte) ([]*mapping.Message, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, mapping.Rejectf(Wire, "batch", "not a JSON array: %v", err)
	}
	msgs := make([]*mapping.Message, len(elems))
	for i, raw := range elems {
		m, err := decodeElement(raw)
		if err != nil {
			return nil, &BatchError{Index: i, Err: err}
		}
		msgs[i] = m
	}
	return msgs, nil
}

// ParseJSON parses one batch element (see RenderJSON).
func ParseJSON(data []byte) (*mapping.Message, error) { return decodeElement(data) }

func decodeElement(data []byte) (*mapping.Message, error) {
	m := newMessage()
	var bp, up string
	err := eachMember(string(data), func(k, raw string) error {
		switch k {
		case "Body":
			if raw == "null" {
				return nil
			}
			b, err := unquoteJSON(raw)
			if err != nil {
				return fmt.Errorf("Body: %w", err)
			}
			m.Body = []byte(b)
		case "BrokerProperties":
			bp = raw
		case "UserProperties":
			up = raw
		default:
			return fmt.Errorf("unknown member %q (want Body, BrokerProperties, UserProperties)", k)
		}
		return nil
	})
	if err != nil {
		return nil, mapping.Rejectf(Wire, "batch element", "%v", err)
	}
	if bp == "null" {
		bp = ""
	}
	info, err := decodeBrokerProperties(bp, m)
	if err != nil {
		return nil, err
	}
	m.ContentType = info.contentType
	var entries []entry
	if up != "" && up != "null" {
		var bad string
		err := eachMember(up, func(k, raw string) error {
			v, err := inferJSON(raw)
			if err != nil {
				bad = k
				return err
			}
			entries = append(entries, entry{name: k, canon: textproto.CanonicalMIMEHeaderKey(k), v: v})
			return nil
		})
		if err != nil {
			if bad != "" {
				return nil, mapping.Rejectf(Wire, fmt.Sprintf("property %q", bad), "%v", err)
			}
			return nil, mapping.Rejectf(Wire, "UserProperties", "%v", err)
		}
	}
	if err := finishDecode(m, entries); err != nil {
		return nil, err
	}
	return m, nil
}

// inferJSON infers a UserProperties value the way InferHeader infers a
// header: a JSON string is a quoted header (a date inside makes a
// timestamp), a number without fraction or exponent that fits is an Int64,
// any other number a Double, true/false a Boolean.
func inferJSON(raw string) (mapping.Value, error) {
	if raw == "" {
		return mapping.Value{}, errors.New("empty value")
	}
	switch c := raw[0]; {
	case c == '"':
		s, err := unquoteJSON(raw)
		if err != nil {
			return mapping.Value{}, err
		}
		return inferString(s), nil
	case raw == "true":
		return mapping.Bool(true), nil
	case raw == "false":
		return mapping.Bool(false), nil
	case c == '-' || c >= '0' && c <= '9':
		if !strings.ContainsAny(raw, ".eE") {
			if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
				return mapping.Int64(n), nil
			}
		}
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return mapping.Value{}, fmt.Errorf("%s: float out of range", raw)
		}
		return mapping.Float64(f), nil
	}
	return mapping.Value{}, fmt.Errorf("%s: want a string, number or boolean", clip(raw))
}
