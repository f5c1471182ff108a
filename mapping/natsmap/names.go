package natsmap

import (
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
)

const (
	// DefaultGroupHeader carries GroupKey unless the options name another.
	DefaultGroupHeader = "Qbridge-Group"
	hdrContentType     = "Content-Type"
	hdrTraceparent     = "traceparent"
	hdrTracestate      = "tracestate"
	natsPrefix         = "Nats-"
	// hdrPinID is the pin nats-server puts on each message a consumer with
	// the pinned-client policy delivers (server/consumer.go,
	// JSPullRequestNatsPinId): it belongs to the delivery, not the message.
	hdrPinID = "Nats-Pin-Id"
)

// ValidHeaderName reports whether name can be a header name for nats.go:
// printable ASCII without ':' and the separators "()/,;<=>?@[\]{} (a
// stricter set than ADR-4's, which nats.go enforces on publish). The
// encoder, the adapter's configuration and qbridge send all apply it.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !nameChar[name[i]] {
			return false
		}
	}
	return true
}

var nameChar = func() (t [256]bool) {
	for c := 33; c <= 126; c++ {
		t[c] = !strings.ContainsRune(`"()/,:;<=>?@[\]{}`, rune(c))
	}
	return t
}()

// reservedReason says why an attribute cannot have this header name, or "".
// Names match without case: NATS servers and clients of other languages
// treat some of them so.
func reservedReason(name, groupHeader string) string {
	switch {
	case len(name) >= len(natsPrefix) && strings.EqualFold(name[:len(natsPrefix)], natsPrefix):
		return "reserved header name (Nats-*: NATS and JetStream control headers)"
	case strings.EqualFold(name, hdrContentType):
		return "reserved header name (the message ContentType)"
	case strings.EqualFold(name, hdrTraceparent), strings.EqualFold(name, hdrTracestate):
		return "reserved header name (the message trace)"
	case strings.EqualFold(name, groupHeader):
		return "reserved header name (the group header)"
	case strings.EqualFold(name, mapping.EnvelopeName):
		return "reserved header name (the qbridge carry envelope)"
	case strings.EqualFold(name, "Status"):
		// nats.go puts a server status line here, and its JetStream
		// consumers take a message without data that has a Status header
		// for a status message (404, 408, ...), not a user message.
		return "reserved header name (nats.go's status header)"
	}
	return ""
}

// valueProblem says why s cannot be a header value that arrives unchanged,
// or "". nats.go trims surrounding white space and turns CR and LF into
// spaces; JSON (the envelope, the JSON rendering) needs valid UTF-8.
func valueProblem(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	return lineProblem(s)
}

// lineProblem is valueProblem without the UTF-8 rule: what a header value
// needs to arrive unchanged when no JSON holds it (a plain string
// attribute: NATS headers are bytes, and natsmap decodes them as they are).
func lineProblem(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return "control character (a NATS header value is one line)"
		}
	}
	if s != "" && (s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		return "leading or trailing white space (NATS trims it)"
	}
	return ""
}

// headerSize is the size of the header block nats.go sends.
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
