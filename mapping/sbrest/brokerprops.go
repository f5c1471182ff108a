package sbrest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// brokerOut holds the settable broker properties an encoder writes.
type brokerOut struct {
	MessageID, CorrelationID, SessionID, PartitionKey, Label string
	To, ReplyTo, ReplyToSessionID, ContentType               string
	TTLTicks                                                 int64     // 0: unset
	Scheduled                                                time.Time // whole seconds; zero: unset
}

// appendBrokerProperties renders the BrokerProperties JSON object. It is
// printable ASCII (non-ASCII as \u escapes) so it can be an HTTP header.
// Get-only properties are never written.
func appendBrokerProperties(dst []byte, p *brokerOut) []byte {
	dst = append(dst, '{')
	first := true
	key := func(k string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			dst = appendJSONString(dst, v, true)
		}
	}
	str("MessageId", p.MessageID)
	str("CorrelationId", p.CorrelationID)
	str("SessionId", p.SessionID)
	str("PartitionKey", p.PartitionKey)
	str("Label", p.Label)
	str("To", p.To)
	str("ReplyTo", p.ReplyTo)
	str("ReplyToSessionId", p.ReplyToSessionID)
	str("ContentType", p.ContentType)
	if p.TTLTicks > 0 {
		key("TimeToLive")
		dst = append(dst, formatSeconds7(p.TTLTicks)...)
	}
	if !p.Scheduled.IsZero() {
		key("ScheduledEnqueueTimeUtc")
		dst = append(dst, '"')
		dst = p.Scheduled.UTC().AppendFormat(dst, http.TimeFormat)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// formatSeconds7 renders 100 ns ticks as seconds with up to 7 decimals,
// exactly (TimeToLive is a double of seconds on the wire).
func formatSeconds7(ticks int64) string {
	s := strconv.FormatInt(ticks/1e7, 10)
	if frac := ticks % 1e7; frac != 0 {
		f := strconv.FormatInt(frac+1e7, 10)[1:]
		s += "." + strings.TrimRight(f, "0")
	}
	return s
}

// maxTTLSeconds is the longest TTL a time.Duration holds. Longer ones
// (including TimeSpan.MaxValue, Service Bus's "never expires") decode as
// unset: the entity default.
const maxTTLSeconds = math.MaxInt64 / int64(time.Second)

// parseTTLSeconds reads TimeToLive (a JSON number of seconds) into a
// duration with 100 ns precision, exactly when the text has at most 7
// decimals. ok is false for a TTL too long to hold.
func parseTTLSeconds(text string) (d time.Duration, ok bool, err error) {
	whole, frac, dotted := strings.Cut(text, ".")
	if w, err := strconv.ParseUint(whole, 10, 64); err == nil && len(frac) <= 7 && (!dotted || frac != "" && isDigits(frac)) {
		if w > uint64(maxTTLSeconds) {
			return 0, false, nil
		}
		f, _ := strconv.ParseUint((frac + "0000000")[:7], 10, 64)
		d = time.Duration(w)*time.Second + time.Duration(f)*100
		if d < 0 {
			return 0, false, nil
		}
		return d, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false, fmt.Errorf("%s is not a non-negative number of seconds", text)
	}
	if f >= float64(maxTTLSeconds) {
		return 0, false, nil
	}
	return time.Duration(math.Round(f*1e7)) * 100, true, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseTimeSpan reads .NET's constant TimeSpan format [d.]hh:mm:ss[.fffffff]
// (the TimeToLiveTimeSpan of the REST batch examples). Negative spans are
// refused: a TTL is positive.
func parseTimeSpan(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a TimeSpan [d.]hh:mm:ss[.fffffff]", s)
	head, rest, ok := strings.Cut(s, ":")
	if !ok {
		return 0, bad
	}
	var days uint64
	if d, h, ok := strings.Cut(head, "."); ok {
		n, err := strconv.ParseUint(d, 10, 32)
		if err != nil || !isDigits(d) {
			return 0, bad
		}
		days, head = n, h
	}
	mm, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, bad
	}
	ss, frac, dotted := strings.Cut(rest, ".")
	if len(frac) > 7 || dotted && (frac == "" || !isDigits(frac)) {
		return 0, bad
	}
	var hms [3]uint64
	for i, p := range [3]string{head, mm, ss} {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || len(p) != 2 || !isDigits(p) || i == 0 && n > 23 || i > 0 && n > 59 {
			return 0, bad
		}
		hms[i] = n
	}
	f, _ := strconv.ParseUint((frac + "0000000")[:7], 10, 64)
	secs := days*86400 + hms[0]*3600 + hms[1]*60 + hms[2]
	if secs > uint64(maxTTLSeconds) {
		return 0, nil
	}
	return time.Duration(secs)*time.Second + time.Duration(f)*100, nil
}

// minDateTime is .NET DateTime.MinValue as an RFC 2616 date: "not set".
var minDateTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// bpInfo is what BrokerProperties says beyond the message fields.
type bpInfo struct {
	contentType string
	hasEnqueued bool
}

// decodeBrokerProperties reads a BrokerProperties JSON object into m.
// Properties come in any order and unknown ones are ignored; a known one
// with a malformed value is a RejectError naming it. Get-only properties go
// to m.Source.
func decodeBrokerProperties(raw string, m *mapping.Message) (bpInfo, error) {
	var info bpInfo
	if strings.TrimSpace(raw) == "" {
		return info, nil
	}
	var ttlSet bool
	var bad string
	err := eachMember(raw, func(k, v string) error {
		if err := decodeBrokerProperty(k, v, m, &info, &ttlSet); err != nil {
			bad = k
			return err
		}
		return nil
	})
	if err != nil {
		if bad != "" {
			return info, mapping.Rejectf(Wire, "BrokerProperties."+bad, "%v", err)
		}
		return info, mapping.Rejectf(Wire, "BrokerProperties", "%v", err)
	}
	return info, nil
}

func decodeBrokerProperty(k, v string, m *mapping.Message, info *bpInfo, ttlSet *bool) error {
	if v == "null" {
		return nil
	}
	str := func(dst *string) error {
		s, err := unquoteJSON(v)
		if err != nil {
			return err
		}
		*dst = s
		return nil
	}
	date := func(dst *time.Time) error {
		var s string
		if err := str(&s); err != nil {
			return err
		}
		t, err := parseDate(s)
		if err != nil {
			return fmt.Errorf("want an RFC 2616 date: %w", err)
		}
		if !t.Equal(minDateTime) {
			*dst = t
		}
		return nil
	}
	integer := func() (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want an integer, got %s", clip(v))
		}
		return n, nil
	}
	s := &m.Source
	switch k {
	case "MessageId":
		return str(&m.ID)
	case "CorrelationId":
		return str(&m.CorrelationID)
	case "SessionId":
		return str(&m.GroupKey)
	case "PartitionKey":
		return str(&m.PartitionKey)
	case "ViaPartitionKey":
		return str(&m.ViaPartitionKey)
	case "Label":
		return str(&m.Subject)
	case "To":
		return str(&m.To)
	case "ReplyTo":
		return str(&m.ReplyTo)
	case "ReplyToSessionId":
		return str(&m.ReplyToGroup)
	case "ContentType":
		return str(&info.contentType)
	case "TimeToLive":
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return fmt.Errorf("want a number of seconds, got %s", clip(v))
		}
		d, ok, err := parseTTLSeconds(v)
		if err != nil {
			return err
		}
		m.TTL, *ttlSet = 0, true
		if ok {
			m.TTL = d
		}
	case "TimeToLiveTimeSpan":
		var t string
		if err := str(&t); err != nil {
			return err
		}
		d, err := parseTimeSpan(t)
		if err != nil {
			return err
		}
		if !*ttlSet { // TimeToLive, when both are present, is the precise one
			m.TTL = d
		}
	case "ScheduledEnqueueTimeUtc":
		return date(&m.ScheduledAt)
	case "EnqueuedTimeUtc":
		info.hasEnqueued = true
		return date(&s.EnqueuedTime)
	case "LockedUntilUtc":
		return date(&s.LockedUntil)
	case "LockToken":
		var t string
		if err := str(&t); err != nil {
			return err
		}
		u, err := mapping.ParseUUID(t)
		if err != nil {
			return err
		}
		s.LockToken = mapping.UUIDString(u)
	case "DeliveryCount":
		n, err := integer()
		if err != nil {
			return err
		}
		if n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("%d out of range", n)
		}
		s.DeliveryCount = int(n)
	case "SequenceNumber":
		n, err := integer()
		if err != nil {
			return err
		}
		s.SequenceNumber = strconv.FormatInt(n, 10)
	case "EnqueuedSequenceNumber":
		n, err := integer()
		if err != nil {
			return err
		}
		s.EnqueuedSequence = n
	case "State":
		return decodeState(v, s)
	case "DeadLetterSource":
		return str(&s.DeadLetterSource)
	}
	return nil
}

var stateNames = map[string]int{"Active": 0, "Deferred": 1, "Scheduled": 2}

func decodeState(v string, s *mapping.Source) error {
	if v[0] == '"' {
		name, err := unquoteJSON(v)
		if err != nil {
			return err
		}
		n, ok := stateNames[name]
		if !ok {
			return fmt.Errorf("unknown state %q (want Active, Deferred or Scheduled)", name)
		}
		s.State = n
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return fmt.Errorf("want a state name or number, got %s", clip(v))
	}
	s.State = int(n)
	return nil
}
