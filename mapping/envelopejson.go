package mapping

import (
	"encoding/json"
	"slices"
	"strconv"
)

// The carry envelope is written and read on every message that carries
// something, and in the common case it holds only data types and a few plain
// fields. This file renders and parses that case by hand; anything else goes
// through encoding/json (the general path). The hand-written writer produces
// exactly the bytes json.Marshal does (same member order, map keys sorted,
// same escaping: a string that is not plain printable ASCII is escaped by
// encoding/json itself), and the hand-written parser accepts only input that
// it reads exactly as json.Unmarshal does, returning false for anything else.
// Kept because it is measured to matter, and not shared with sbrest's writer
// (whose escaping differs): docs/benchmarks.md, "JSON: hand-written or
// encoding/json".

// appendEnvelopeFast appends the JSON of e as json.Marshal renders it, or
// returns false when e holds something only the general path writes.
func appendEnvelopeFast(dst []byte, e *Envelope) ([]byte, bool) {
	if len(e.Attrs) > 0 || len(e.Texts) > 0 {
		return dst, false
	}
	c := e.Fields
	if c != nil && (c.UserID != nil || c.ScheduledAt != nil || c.CreationTime != nil ||
		c.AbsoluteExpiry != nil || len(c.Annotations) > 0 || c.Source != nil) {
		return dst, false
	}
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(e.V), 10)
	if len(e.Types) > 0 {
		dst = append(dst, `,"types":{`...)
		var stack [16]string
		names := stack[:0]
		for name := range e.Types {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONText(dst, name)
			dst = append(dst, ':')
			dst = appendJSONText(dst, e.Types[name])
		}
		dst = append(dst, '}')
	}
	if e.BodyEncoding != "" {
		dst = append(dst, `,"body":`...)
		dst = appendJSONText(dst, e.BodyEncoding)
	}
	if c != nil {
		dst = append(dst, `,"m":`...)
		dst = appendCarriedFast(dst, c)
	}
	return append(dst, '}'), true
}

// appendCarriedFast renders the fields appendEnvelopeFast lets through, in
// struct order, with omitempty's rules.
func appendCarriedFast(dst []byte, c *CarriedFields) []byte {
	first := true
	key := func(k string) {
		if first {
			dst = append(dst, '{', '"')
			first = false
		} else {
			dst = append(dst, ',', '"')
		}
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			dst = appendJSONText(dst, v)
		}
	}
	str("id", c.ID)
	str("idKind", c.IDKind)
	str("correlationId", c.CorrelationID)
	str("correlationKind", c.CorrelationKind)
	str("contentType", c.ContentType)
	str("contentEncoding", c.ContentEncoding)
	str("subject", c.Subject)
	str("to", c.To)
	str("replyTo", c.ReplyTo)
	str("replyToGroup", c.ReplyToGroup)
	if c.GroupKey != nil {
		key("groupKey")
		dst = appendJSONText(dst, *c.GroupKey)
	}
	if c.GroupSequence != 0 {
		key("groupSequence")
		dst = strconv.AppendUint(dst, uint64(c.GroupSequence), 10)
	}
	str("partitionKey", c.PartitionKey)
	str("viaPartitionKey", c.ViaPartitionKey)
	str("dedupId", c.DedupID)
	if c.TTL != 0 {
		key("ttlNanos")
		dst = strconv.AppendInt(dst, c.TTL, 10)
	}
	if c.Durable {
		key("durable")
		dst = append(dst, "true"...)
	}
	if c.Priority != nil {
		key("priority")
		dst = strconv.AppendUint(dst, uint64(*c.Priority), 10)
	}
	if c.FirstAcquirer {
		key("firstAcquirer")
		dst = append(dst, "true"...)
	}
	str("bodyType", c.BodyType)
	if t := c.Trace; t != nil {
		key("trace")
		dst = append(dst, `{"traceId":`...)
		dst = appendJSONText(dst, t.TraceID)
		if t.SpanID != "" {
			dst = append(dst, `,"spanId":`...)
			dst = appendJSONText(dst, t.SpanID)
		}
		if t.Flags != 0 {
			dst = append(dst, `,"flags":`...)
			dst = strconv.AppendUint(dst, uint64(t.Flags), 10)
		}
		if t.State != "" {
			dst = append(dst, `,"state":`...)
			dst = appendJSONText(dst, t.State)
		}
		if t.XS != "" {
			dst = append(dst, `,"xraySampled":`...)
			dst = appendJSONText(dst, t.XS)
		}
		if t.XE != "" {
			dst = append(dst, `,"xrayExtra":`...)
			dst = appendJSONText(dst, t.XE)
		}
		dst = append(dst, '}')
	}
	if first {
		return append(dst, '{', '}')
	}
	return append(dst, '}')
}

// plainJSON reports whether s renders in JSON as itself between quotes:
// printable ASCII without '"', '\\' and the characters encoding/json escapes
// for HTML ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONText appends s as a JSON string exactly as json.Marshal writes
// it: plain text directly, anything else through encoding/json.
func appendJSONText(dst []byte, s string) []byte {
	if plainJSON(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, err := json.Marshal(s) // a string always marshals
	if err != nil {
		panic(err)
	}
	return append(dst, b...)
}

// parseEnvelopeFast reads the common envelope — members "v", "types" and
// "body" as appendEnvelopeFast writes them: no white space, plain strings
// (see plainJSON, minus the HTML characters, which JSON takes raw), each
// member once — into e, exactly as json.Unmarshal would. It returns false,
// leaving e in an unspecified state, for anything else.
func parseEnvelopeFast(s string, e *Envelope) bool {
	p := envParser{s: s}
	if !p.lit(`{`) {
		return false
	}
	var seenV, seenTypes, seenBody bool
	for first := true; ; first = false {
		if p.lit(`}`) {
			return p.i == len(p.s)
		}
		if !first && !p.lit(`,`) {
			return false
		}
		k, ok := p.str()
		if !ok || !p.lit(`:`) {
			return false
		}
		switch {
		case k == "v" && !seenV:
			seenV = true
			n, ok := p.smallInt()
			if !ok {
				return false
			}
			e.V = n
		case k == "types" && !seenTypes:
			seenTypes = true
			if !p.lit(`{`) {
				return false
			}
			e.Types = make(map[string]string)
			if p.lit(`}`) {
				continue
			}
			for {
				name, ok := p.str()
				if !ok || !p.lit(`:`) {
					return false
				}
				dt, ok := p.str()
				if !ok {
					return false
				}
				if _, dup := e.Types[name]; dup {
					return false
				}
				e.Types[name] = dt
				if p.lit(`}`) {
					break
				}
				if !p.lit(`,`) {
					return false
				}
			}
		case k == "body" && !seenBody:
			seenBody = true
			b, ok := p.str()
			if !ok {
				return false
			}
			e.BodyEncoding = b
		default:
			return false
		}
	}
}

type envParser struct {
	s string
	i int
}

func (p *envParser) lit(t string) bool {
	if len(p.s)-p.i >= len(t) && p.s[p.i:p.i+len(t)] == t {
		p.i += len(t)
		return true
	}
	return false
}

// str reads a string of printable ASCII without '"' and '\\'.
func (p *envParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	start := p.i
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			return v, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", false
		}
	}
	return "", false
}

// smallInt reads a JSON integer of at most 9 digits without sign or leading
// zero (any int holds it).
func (p *envParser) smallInt() (int, bool) {
	start, n := p.i, 0
	for ; p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9'; p.i++ {
		n = n*10 + int(p.s[p.i]-'0')
	}
	d := p.i - start
	if d == 0 || d > 9 || d > 1 && p.s[start] == '0' {
		return 0, false
	}
	// A number must end here: 1.5 or 1e3 are for encoding/json to judge.
	if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		return 0, false
	}
	return n, true
}
