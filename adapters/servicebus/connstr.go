package servicebus

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// connString is a parsed Service Bus connection string:
//
//	Endpoint=sb://<fqdn>/;SharedAccessKeyName=<rule>;SharedAccessKey=<key>[;EntityPath=<entity>]
//	Endpoint=sb://<fqdn>/;SharedAccessSignature=SharedAccessSignature sr=...&sig=...&se=...&skn=...
//	... ;UseDevelopmentEmulator=true   (the emulator: sb://localhost:<port>, no TLS)
//
// The SDK parses it again for the AMQP transport; this parse serves
// validation, the HTTPS transport (which signs its own SAS tokens) and the
// dialer (host, port, TLS or not).
type connString struct {
	raw        string
	endpoint   string // as written
	fqdn       string // host[:port] of Endpoint
	keyName    string
	key        string
	sas        string // a pre-built SharedAccessSignature token
	sasExpiry  time.Time
	entityPath string
	emulator   bool
}

// parseConnString parses s. Its errors quote what was written, so that the
// user sees the mistake, but never the key or the token's signature, even
// where one was pasted into another field.
func parseConnString(s string) (*connString, error) {
	cs, err := parseConnStringParts(s)
	if err != nil {
		return nil, errors.New(scrubSecrets(err.Error(), connStringSecrets(s)))
	}
	return cs, nil
}

func parseConnStringParts(s string) (*connString, error) {
	cs := &connString{raw: s}
	var hasKey, hasKeyName, hasSAS bool
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", redactPart(part))
		}
		switch {
		case strings.EqualFold(k, "Endpoint"):
			u, err := url.Parse(v)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("Endpoint %q: want sb://<namespace>.servicebus.windows.net/", adaptercfg.RedactURL(v))
			}
			cs.endpoint, cs.fqdn = v, u.Host
		case strings.EqualFold(k, "SharedAccessKeyName"):
			cs.keyName, hasKeyName = v, true
		case strings.EqualFold(k, "SharedAccessKey"):
			cs.key, hasKey = v, true
		case strings.EqualFold(k, "SharedAccessSignature"):
			cs.sas, hasSAS = v, true
		case strings.EqualFold(k, "EntityPath"):
			cs.entityPath = v
		case strings.EqualFold(k, "UseDevelopmentEmulator"):
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("UseDevelopmentEmulator %q: want true or false", v)
			}
			cs.emulator = b
		}
	}
	switch {
	case cs.fqdn == "":
		return nil, errors.New("Endpoint: missing")
	case hasSAS && (hasKey || hasKeyName):
		return nil, errors.New("SharedAccessSignature and SharedAccessKey: set one")
	case !hasSAS && (!hasKey || !hasKeyName || cs.keyName == "" || cs.key == ""):
		return nil, errors.New("SharedAccessKeyName and SharedAccessKey (or SharedAccessSignature): required")
	}
	if cs.emulator && !strings.HasPrefix(strings.ToLower(cs.endpoint), "sb://") {
		// the SDK's own rule
		return nil, fmt.Errorf("UseDevelopmentEmulator=true needs Endpoint=sb://<host>[:<port>], not %q", adaptercfg.RedactURL(cs.endpoint))
	}
	if hasSAS {
		exp, err := sasExpiry(cs.sas)
		if err != nil {
			return nil, fmt.Errorf("SharedAccessSignature: %w", err)
		}
		cs.sasExpiry = exp
	}
	return cs, nil
}

// sasExpiry reads se= of a SharedAccessSignature token.
func sasExpiry(tok string) (time.Time, error) {
	body, ok := strings.CutPrefix(tok, "SharedAccessSignature ")
	if !ok {
		return time.Time{}, errors.New(`want "SharedAccessSignature sr=...&sig=...&se=...&skn=..."`)
	}
	q, err := url.ParseQuery(body)
	if err != nil {
		return time.Time{}, err
	}
	for _, k := range []string{"sr", "sig", "se"} {
		if q.Get(k) == "" {
			return time.Time{}, fmt.Errorf("%s= missing", k)
		}
	}
	se, err := strconv.ParseInt(q.Get("se"), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("se=%q: not unix seconds", q.Get("se"))
	}
	return time.Unix(se, 0), nil
}

// hostPort splits the namespace host and port, with def as the port when
// there is none.
func hostPort(hp, def string) (host, port string) {
	if h, p, err := net.SplitHostPort(hp); err == nil {
		return h, p
	}
	return strings.Trim(hp, "[]"), def
}

// connStringSecrets are the key and signature values written in s, raw as
// they may be quoted. Shorter than 8 characters they cannot be a real key
// (44) or signature, and replacing them would garble the message.
func connStringSecrets(s string) []string {
	var out []string
	add := func(v string) {
		if len(v) >= 8 {
			out = append(out, v)
		}
	}
	for _, part := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "SharedAccessKey"):
			add(v)
		case strings.EqualFold(k, "SharedAccessSignature"):
			for _, kv := range strings.Split(v, "&") {
				if n, sig, ok := strings.Cut(kv, "="); ok && n == "sig" {
					add(sig)
				}
			}
		}
	}
	return out
}

func scrubSecrets(msg string, secrets []string) string {
	for _, v := range secrets {
		msg = strings.ReplaceAll(msg, v, "…")
	}
	return msg
}

func redactPart(p string) string {
	if k, _, ok := strings.Cut(p, "="); ok {
		return k + "=…"
	}
	if len(p) > 12 {
		return p[:12] + "…"
	}
	return p
}
