package mapping

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Trace is one trace context, whichever header carried it: an AWS X-Ray
// AWSTraceHeader, a W3C traceparent/tracestate pair, or a Service Bus
// Diagnostic-Id. They are the same trace: the X-Ray root
// 1-<8 hex epoch>-<24 hex> is the 32-hex W3C trace id with a dash in it, the
// X-Ray Parent is the W3C parent id, Sampled=1 is the sampled trace flag.
type Trace struct {
	TraceID [16]byte
	SpanID  [8]byte // the parent span: X-Ray Parent, W3C parent-id
	Flags   byte    // W3C trace-flags; bit 0 is "sampled"
	State   string  // W3C tracestate, verbatim

	// XRaySampled keeps an X-Ray Sampled field that the flags cannot say:
	// '?' (sampling deferred) or '-' (the field was absent). 0 means the
	// field follows Flags. An X-Ray header thus survives byte for byte.
	XRaySampled byte
	// XRayExtra holds any further X-Ray fields (e.g. "Lineage=..."),
	// ';'-joined and in their original order.
	XRayExtra string
}

// IsZero reports whether there is no trace context.
func (t Trace) IsZero() bool { return t.TraceID == [16]byte{} }

// Sampled reports the sampled flag.
func (t Trace) Sampled() bool { return t.Flags&1 == 1 }

var errTraceFormat = errors.New("malformed trace header")

// ParseXRay parses an AWSTraceHeader such as
// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".
func ParseXRay(h string) (Trace, error) {
	var t Trace
	var extra []string
	seenRoot := false
	t.XRaySampled = '-'
	for _, field := range strings.Split(h, ";") {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			return Trace{}, fmt.Errorf("x-ray header %q: field %q is not key=value: %w", h, field, errTraceFormat)
		}
		switch k {
		case "Root":
			// 1-8hex-24hex
			if len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
				return Trace{}, fmt.Errorf("x-ray header %q: Root must be 1-<8 hex>-<24 hex>: %w", h, errTraceFormat)
			}
			if err := decodeLowerHex(t.TraceID[:4], v[2:10]); err != nil {
				return Trace{}, fmt.Errorf("x-ray header %q: Root: %w", h, err)
			}
			if err := decodeLowerHex(t.TraceID[4:], v[11:]); err != nil {
				return Trace{}, fmt.Errorf("x-ray header %q: Root: %w", h, err)
			}
			seenRoot = true
		case "Parent":
			if err := decodeLowerHex(t.SpanID[:], v); err != nil || len(v) != 16 {
				return Trace{}, fmt.Errorf("x-ray header %q: Parent must be 16 hex digits: %w", h, errTraceFormat)
			}
		case "Sampled":
			switch v {
			case "0", "1":
				t.XRaySampled = 0
				if v == "1" {
					t.Flags = 1
				}
			case "?":
				t.XRaySampled = '?'
			default:
				return Trace{}, fmt.Errorf("x-ray header %q: Sampled must be 0, 1 or ?: %w", h, errTraceFormat)
			}
		default:
			extra = append(extra, field)
		}
	}
	if !seenRoot || t.IsZero() {
		return Trace{}, fmt.Errorf("x-ray header %q: no Root: %w", h, errTraceFormat)
	}
	t.XRayExtra = strings.Join(extra, ";")
	return t, nil
}

// XRay renders the trace as an AWSTraceHeader.
func (t Trace) XRay() string {
	var b strings.Builder
	b.Grow(96)
	b.WriteString("Root=1-")
	b.WriteString(hex.EncodeToString(t.TraceID[:4]))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(t.TraceID[4:]))
	if t.SpanID != [8]byte{} {
		b.WriteString(";Parent=")
		b.WriteString(hex.EncodeToString(t.SpanID[:]))
	}
	if s := t.xraySampled(); s != 0 {
		b.WriteString(";Sampled=")
		b.WriteByte(s)
	}
	if t.XRayExtra != "" {
		b.WriteByte(';')
		b.WriteString(t.XRayExtra)
	}
	return b.String()
}

// xraySampled returns the Sampled character to write, or 0 for none.
func (t Trace) xraySampled() byte {
	switch {
	case t.Sampled():
		return '1'
	case t.XRaySampled == '?':
		return '?'
	case t.XRaySampled == '-':
		return 0
	}
	return '0'
}

// ParseTraceparent parses a W3C traceparent "00-<32 hex>-<16 hex>-<2 hex>".
// Future versions are accepted as the spec asks: the first four fields are
// read and anything after them is ignored.
func ParseTraceparent(h string) (Trace, error) {
	var t Trace
	if len(h) < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return t, fmt.Errorf("traceparent %q: want 00-<32 hex>-<16 hex>-<2 hex>: %w", h, errTraceFormat)
	}
	var ver [1]byte
	if err := decodeLowerHex(ver[:], h[0:2]); err != nil || ver[0] == 0xff {
		return t, fmt.Errorf("traceparent %q: bad version: %w", h, errTraceFormat)
	}
	if ver[0] == 0 && len(h) != 55 {
		return t, fmt.Errorf("traceparent %q: version 00 has exactly 55 characters: %w", h, errTraceFormat)
	}
	if ver[0] != 0 && len(h) > 55 && h[55] != '-' {
		return t, fmt.Errorf("traceparent %q: %w", h, errTraceFormat)
	}
	if err := decodeLowerHex(t.TraceID[:], h[3:35]); err != nil {
		return Trace{}, fmt.Errorf("traceparent %q: trace-id: %w", h, err)
	}
	if err := decodeLowerHex(t.SpanID[:], h[36:52]); err != nil {
		return Trace{}, fmt.Errorf("traceparent %q: parent-id: %w", h, err)
	}
	var fl [1]byte
	if err := decodeLowerHex(fl[:], h[53:55]); err != nil {
		return Trace{}, fmt.Errorf("traceparent %q: flags: %w", h, err)
	}
	t.Flags = fl[0]
	if t.IsZero() || t.SpanID == [8]byte{} {
		return Trace{}, fmt.Errorf("traceparent %q: all-zero trace-id or parent-id is invalid: %w", h, errTraceFormat)
	}
	return t, nil
}

// Traceparent renders the W3C traceparent, or "" when the trace cannot have
// one (no trace, or no parent span, which W3C forbids).
func (t Trace) Traceparent() string {
	if t.IsZero() || t.SpanID == [8]byte{} {
		return ""
	}
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], t.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], t.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{t.Flags})
	return string(b[:])
}

// ParseDiagnosticID parses a Service Bus Diagnostic-Id application property.
// Current SDKs write a W3C traceparent; older ones wrote a hierarchical
// Request-Id "|<32 hex trace id>.<16 hex span id>." which is accepted too.
func ParseDiagnosticID(h string) (Trace, error) {
	if strings.HasPrefix(h, "|") {
		body := strings.TrimSuffix(strings.TrimPrefix(h, "|"), ".")
		tid, sid, ok := strings.Cut(body, ".")
		if ok && len(tid) == 32 && len(sid) == 16 {
			var t Trace
			if decodeLowerHex(t.TraceID[:], tid) == nil && decodeLowerHex(t.SpanID[:], sid) == nil && !t.IsZero() {
				return t, nil
			}
		}
		return Trace{}, fmt.Errorf("diagnostic-id %q: not a W3C traceparent or |trace.span. request id: %w", h, errTraceFormat)
	}
	return ParseTraceparent(h)
}

// decodeLowerHex decodes exactly len(dst)*2 lowercase hex digits; W3C
// requires lowercase and X-Ray ids are lowercase.
func decodeLowerHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("want %d hex digits, got %d: %w", 2*len(dst), len(s), errTraceFormat)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%q is not lowercase hex: %w", s, errTraceFormat)
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}
