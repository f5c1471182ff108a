package sbrest

import (
	"net/textproto"
	"strings"
)

// Header names this codec reads or writes itself (canonical MIME form, as
// net/http presents received headers).
const (
	hdrContentType    = "Content-Type"
	hdrBrokerProps    = "Brokerproperties"
	hdrLocation       = "Location"
	hdrDate           = "Date"
	hdrDiagnosticID   = "Diagnostic-Id"
	hdrTraceState     = "Tracestate"
	hdrEnvelope       = "Qbridge.envelope"
	hdrDLReason       = "Deadletterreason"
	hdrDLDescription  = "Deadlettererrordescription"
	nameDiagnosticID  = "Diagnostic-Id"              // as written: Service Bus's own spelling
	nameTraceState    = "tracestate"                 // as written: the W3C spelling
	nameDLReason      = "DeadLetterReason"           // Service Bus application property
	nameDLDescription = "DeadLetterErrorDescription" // Service Bus application property
)

// reservedHeaders says, for each name a custom property cannot have, why.
// Keys are canonical MIME header names. The decoder skips these names (or
// reads them as what they are), so a name refused on encode is never
// mistaken for a property on decode.
var reservedHeaders = map[string]string{
	// HTTP framing and connection management (hop-by-hop or set by the HTTP stack).
	"Connection":        "HTTP connection management",
	"Keep-Alive":        "HTTP connection management",
	"Proxy-Connection":  "HTTP connection management",
	"Te":                "HTTP connection management",
	"Trailer":           "HTTP framing",
	"Transfer-Encoding": "HTTP framing",
	"Upgrade":           "HTTP connection management",
	"Host":              "set by the HTTP client",
	"Expect":            "HTTP control (100-continue)",
	"Date":              "set by the HTTP stack; the enqueued time on receive",
	// .NET's restricted request headers (docs/wire-servicebus.md §7 excludes them).
	"Accept":            ".NET restricted HTTP header",
	"If-Modified-Since": ".NET restricted HTTP header",
	"Range":             ".NET restricted HTTP header",
	"Referer":           ".NET restricted HTTP header",
	"User-Agent":        ".NET restricted HTTP header",
	// Credentials.
	"Authorization":    "carries the SAS or Entra token",
	"Cookie":           "HTTP state",
	"Set-Cookie":       "HTTP state",
	"Www-Authenticate": "HTTP authentication",
	// Caching and conditional requests, added or consumed by intermediaries.
	"Cache-Control": "HTTP caching",
	"Pragma":        "HTTP caching",
	"Expires":       "HTTP caching",
	"Age":           "HTTP caching",
	"Etag":          "HTTP caching",
	"Last-Modified": "HTTP caching",
	"Vary":          "HTTP caching",
	"Via":           "added by proxies",
	"Warning":       "HTTP caching",
	// Response headers the service adds; as properties they would collide.
	"Server":                    "response header of the service",
	"Strict-Transport-Security": "response header of the service",
	"X-Content-Type-Options":    "response header of the service",
	"X-Powered-By":              "response header of the service",
	"Retry-After":               "response header of the service",
	"Alt-Svc":                   "response header of the service",
	"Location":                  "the lock URL of a peek-locked message",
	// HTTP-call tracing injected by instrumented HTTP clients; not message data.
	"Traceparent":         "trace context of the HTTP call (use the message trace)",
	"Request-Id":          "trace context of the HTTP call",
	"Correlation-Context": "trace context of the HTTP call",
	"Baggage":             "trace context of the HTTP call",
	// Service Bus protocol.
	hdrBrokerProps:                            "the broker properties header",
	"Servicebussupplementaryauthorization":    "Service Bus forwarding authorization",
	"Servicebusdlqsupplementaryauthorization": "Service Bus forwarding authorization",
	hdrDLReason:      "set by Service Bus on dead-lettering (decoded into the source facts)",
	hdrDLDescription: "set by Service Bus on dead-lettering (decoded into the source facts)",
	// qbridge's own properties.
	hdrContentType:  "the message ContentType",
	hdrDiagnosticID: "the message trace (Diagnostic-Id)",
	hdrTraceState:   "the message trace (tracestate)",
	hdrEnvelope:     "the qbridge carry envelope",
}

var reservedPrefixes = []struct{ prefix, reason string }{
	{"Content-", "describes the HTTP body"},
	{"Accept-", "HTTP content negotiation"},
	{"If-", "HTTP conditional request"},
	{"Proxy-", "HTTP proxy control"},
	{"X-Ms-", "Azure service control header"},
	{"Access-Control-", "HTTP CORS"},
}

// reservedReason reports why name cannot be a custom property header, or "".
func reservedReason(name string) string {
	c := textproto.CanonicalMIMEHeaderKey(name)
	if r, ok := reservedHeaders[c]; ok {
		return "reserved header name (" + r + ")"
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(c, p.prefix) {
			return "reserved header name (" + p.prefix + "*: " + p.reason + ")"
		}
	}
	return ""
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the only
// form a header name can take.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChar[s[i]] {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// isCanonical reports whether name survives net/http's canonicalization of
// received header names unchanged. Other names get their exact spelling
// recorded in the envelope so the decoder can restore it.
func isCanonical(name string) bool { return textproto.CanonicalMIMEHeaderKey(name) == name }

// headerSafe reports whether s can be an HTTP header value that every hop
// passes unchanged: printable ASCII (no control characters, no obs-text,
// which servers decode as Latin-1).
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
