package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// TestLosslessAcrossAllPairs is the property test of the mapping layer: for
// random messages and every pair of wire forms X, Y,
// X -> model -> Y -> model -> X gives back X's rendering unchanged: every
// user attribute (name, type with its label, value byte for byte) and every
// settable property of X — where the envelope has room on Y. Where it has
// not (ten attributes on SQS), the envelope is shed: the test then checks
// that the body and every user attribute still come back exactly, and says
// what was shed.
func TestLosslessAcrossAllPairs(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 40
	}
	var shed []string
	opt := mapping.Options{Policy: mapping.Encode, OnShed: func(f []string) { shed = append(shed, f...) }}
	sheds := 0
	for seed := 0; seed < n; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		m0 := randomMessage(r)
		for _, x := range All() {
			mx, xr, err := through(x, m0, opt)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, x.Name, err)
			}
			for _, y := range All() {
				shed = shed[:0]
				my, _, err := through(y, mx, opt)
				if err != nil {
					t.Fatalf("seed %d: %s -> %s: %v\nmessage: %s", seed, x.Name, y.Name, err, xr)
				}
				mback, back, err := through(x, my, opt)
				if err != nil {
					t.Fatalf("seed %d: %s -> %s -> %s: %v", seed, x.Name, y.Name, x.Name, err)
				}
				if mx.ID == "" && y.Name == "sqs" && my.ID != "" {
					// SQS gives every message an id: an id-less message
					// comes back with the one SQS assigned (documented), as
					// its id or, where X has only that, its dedup id.
					if mback.ID == my.ID {
						mback.ID, mback.IDKind = "", mapping.KindInvalid
					}
					if mx.DedupID == "" && mback.DedupID == my.ID {
						mback.DedupID = ""
					}
					if back, err = x.Render(mback, opt); err != nil {
						t.Fatal(err)
					}
				}
				if len(shed) > 0 {
					// The envelope did not fit on Y: the user's content must.
					sheds++
					if !bytes.Equal(mx.Body, mback.Body) || !reflect.DeepEqual(normalized(mx).Attributes, normalized(mback).Attributes) {
						t.Fatalf("seed %d: %s -> %s -> %s shed %v and lost content:\nbefore: %s\nafter:  %s",
							seed, x.Name, y.Name, x.Name, shed, xr, back)
					}
					t.Logf("seed %d: %s -> %s -> %s: the envelope had no room, shed %v", seed, x.Name, y.Name, x.Name, shed)
					continue
				}
				ignore := readOnly[x.Name]
				if x.Name == "sqs" && mx.DedupID == "" {
					// A FIFO send needs a dedup id: one derived from the id
					// or the body is no property of the message, and after
					// another SQS hop it is the previous queue's message id.
					mback.DedupID = ""
					ignore = append(ignore[:len(ignore):len(ignore)], "$.Attributes.MessageDeduplicationId")
				}
				if (y.Name == "sqs" || y.Name == "nats") && mx.ID != "" && mx.DedupID == "" && mback.DedupID == mx.ID && mback.ID != mx.ID {
					// The id alone went to its native home (a FIFO queue's
					// MessageDeduplicationId, Nats-Msg-Id) without an
					// envelope: it is back as the dedup id (documented).
					mback.ID, mback.IDKind, mback.DedupID = mx.ID, mx.IDKind, ""
					if back, err = x.Render(mback, opt); err != nil {
						t.Fatal(err)
					}
				}
				if d := diffModels(mx, mback); d != "" {
					t.Fatalf("seed %d: %s -> %s -> %s changed the model: %s\nbefore: %s\nafter:  %s",
						seed, x.Name, y.Name, x.Name, d, xr, back)
				}
				if d := diffJSON(ignore, xr, back); d != "" {
					t.Fatalf("seed %d: %s -> %s -> %s changed the message:\n%s\nbefore: %s\nafter:  %s",
						seed, x.Name, y.Name, x.Name, d, xr, back)
				}
			}
		}
	}
	t.Logf("%d of %d round trips shed the envelope", sheds, n*len(All())*len(All()))
}

// through renders m in form f and parses it back.
func through(f Form, m *mapping.Message, opt mapping.Options) (*mapping.Message, []byte, error) {
	out, err := f.Render(m, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	back, err := f.Parse(out)
	if err != nil {
		return nil, out, fmt.Errorf("parse %s: %w", out, err)
	}
	return back, out, nil
}

// readOnly lists, per form, the JSON paths of what the broker sets on
// delivery (ids, timestamps, counters): not settable, so not compared. The
// envelope attribute is not compared as text either (what it carries may
// differ in provenance, e.g. an SQS MessageId that became an AMQP
// message-id); the model comparison checks what it carries.
var readOnly = map[string][]string{
	"sqs": {"$.MessageId", "$.ReceiptHandle", "$.Attributes.SentTimestamp",
		"$.Attributes.ApproximateFirstReceiveTimestamp", "$.Attributes.ApproximateReceiveCount",
		"$.Attributes.SequenceNumber", "$.Attributes.SenderId", "$.MD5OfMessageAttributes"},
}

// diffModels compares two decoded messages field by field, leaving out the
// read-only source facts.
func diffModels(a, b *mapping.Message) string {
	na, nb := normalized(a), normalized(b)
	if a.ID != "" && a.ID == a.Source.MessageID && b.ID == b.Source.MessageID {
		// Both ids were assigned by the broker (SQS): read-only facts.
		na.ID, nb.ID = "", ""
	}
	va, vb := reflect.ValueOf(na), reflect.ValueOf(nb)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return fmt.Sprintf("%s: %#v vs %#v", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface())
		}
	}
	return ""
}

func normalized(m *mapping.Message) mapping.Message {
	c := *m.Clone()
	c.Source = mapping.Source{}
	if len(c.UserID) == 0 {
		c.UserID = nil
	}
	if len(c.Attributes) == 0 {
		c.Attributes = nil
	}
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	for _, t := range []*time.Time{&c.ScheduledAt, &c.CreationTime, &c.AbsoluteExpiry} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return c
}

// diffJSON compares two renderings as JSON values, leaving out the ignored
// paths, and names the first difference.
func diffJSON(ignore []string, a, b []byte) string {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		return "before: " + err.Error()
	}
	if err := db.Decode(&vb); err != nil {
		return "after: " + err.Error()
	}
	for _, p := range ignore {
		deletePath(va, p)
		deletePath(vb, p)
	}
	va, vb = stripEnvelope(va), stripEnvelope(vb)
	return diffValue("$", va, vb)
}

// stripEnvelope removes the envelope attribute wherever a rendering holds
// it: as an object member, or as a {"key": ...} list element.
func stripEnvelope(v any) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, mapping.EnvelopeName)
		for k, e := range t {
			t[k] = stripEnvelope(e)
		}
	case []any:
		out := t[:0]
		for _, e := range t {
			if o, ok := e.(map[string]any); ok && o["key"] == mapping.EnvelopeName {
				continue
			}
			out = append(out, stripEnvelope(e))
		}
		return out
	}
	return v
}

// deletePath removes a "$.a.b" member from a decoded JSON object.
func deletePath(v any, path string) {
	keys := strings.Split(strings.TrimPrefix(path, "$."), ".")
	for i, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if i == len(keys)-1 {
			delete(obj, k)
			return
		}
		v = obj[k]
	}
}

func diffValue(path string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: %v vs %v", path, a, b)
		}
		for k := range av {
			if d := diffValue(path+"."+k, av[k], bv[k]); d != "" {
				return d
			}
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				return fmt.Sprintf("%s.%s: added %v", path, k, bv[k])
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return fmt.Sprintf("%s: %v vs %v", path, a, b)
		}
		for i := range av {
			if d := diffValue(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return fmt.Sprintf("%s: %v vs %v", path, a, b)
	}
	return ""
}

const nameChars = "abcdefghijklmnopqrstuvwxyz0123456789_-"

func randomName(r *rand.Rand, used map[string]bool) string {
	for {
		var b strings.Builder
		b.WriteByte("abcdefghijklmnopqrstuvwxyz"[r.IntN(26)])
		for i, n := 0, r.IntN(12); i < n; i++ {
			if i > 0 && i < n-1 && r.IntN(8) == 0 {
				b.WriteByte('.')
				continue
			}
			b.WriteByte(nameChars[r.IntN(len(nameChars))])
		}
		name := strings.TrimRight(b.String(), ".")
		if strings.Contains(name, "..") || used[strings.ToLower(name)] {
			continue
		}
		used[strings.ToLower(name)] = true
		return name
	}
}

func randomText(r *rand.Rand, max int) string {
	alphabet := []rune("abcXYZ 019_-.,:;!?/\\\"'{}[]éüжщ中文🙂\t")
	n := 1 + r.IntN(max)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func randomBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, 1+r.IntN(max))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func randomValue(r *rand.Rand) mapping.Value {
	switch r.IntN(26) {
	case 0:
		return mapping.String(randomText(r, 20))
	case 1:
		return mapping.String(randomText(r, 10)).WithLabel("json")
	case 2:
		return mapping.Number([]string{"12345678901234567890123456789012345678", "-0.5", "42", "1e5", "3.14"}[r.IntN(5)])
	case 3:
		return mapping.Binary(randomBytes(r, 16))
	case 4:
		return mapping.Binary(randomBytes(r, 8)).WithLabel("png")
	case 5:
		return mapping.Bool(r.IntN(2) == 0)
	case 6:
		return mapping.Int8(int8(r.Int32()))
	case 7:
		return mapping.Int16(int16(r.Int32()))
	case 8:
		return mapping.Int32(r.Int32() - math.MaxInt32/2)
	case 9:
		return mapping.Int64(r.Int64() - math.MaxInt64/2)
	case 10:
		return mapping.Uint8(uint8(r.Uint32()))
	case 11:
		return mapping.Uint16(uint16(r.Uint32()))
	case 12:
		return mapping.Uint32(r.Uint32())
	case 13:
		return mapping.Uint64(r.Uint64())
	case 14:
		return mapping.Float32(float32(r.NormFloat64() * 1000))
	case 15:
		return mapping.Float64(r.NormFloat64() * 1e6)
	case 16:
		return mapping.Float64(float64(r.IntN(1000)) / 8).WithLabel("float")
	case 17:
		return mapping.Decimal(mapping.KindDecimal128, "-79228162514264337593543950335")
	case 18:
		return mapping.Char([]rune("aж🙂")[r.IntN(3)])
	case 19:
		return mapping.TimestampMillis(r.Int64N(4e12))
	case 20:
		var u [16]byte
		copy(u[:], randomBytes(r, 16))
		u[0] |= 1
		return mapping.UUID(u)
	case 21:
		return mapping.Symbol("sym:" + randomName(r, map[string]bool{}))
	case 22:
		return mapping.URI("https://example.com/" + randomName(r, map[string]bool{}))
	case 23:
		return mapping.DateTimeOffsetTicks(621355968000000000 + r.Int64N(1e17))
	case 24:
		return mapping.TimeSpanTicks(r.Int64N(1e13) - 5e12)
	default:
		return mapping.Strings(randomText(r, 5), randomText(r, 5))
	}
}

func randomMessage(r *rand.Rand) *mapping.Message {
	m := &mapping.Message{}
	if r.IntN(4) == 0 {
		m.Body = randomBytes(r, 64)
	} else {
		m.Body = []byte(randomText(r, 64))
	}
	maybe := func(s string) string {
		if r.IntN(2) == 0 {
			return s
		}
		return ""
	}
	used := map[string]bool{}
	m.ID = maybe("id-" + randomName(r, used))
	m.CorrelationID = maybe("corr-" + randomName(r, used))
	m.ContentType = maybe("application/json")
	m.Subject = maybe(randomText(r, 10))
	m.To = maybe("to-" + randomName(r, used))
	m.ReplyTo = maybe("reply-" + randomName(r, used))
	m.ReplyToGroup = maybe("rg-" + randomName(r, used))
	m.GroupKey = maybe("group-" + randomName(r, used))
	if m.GroupKey != "" && r.IntN(2) == 0 {
		m.PartitionKey = m.GroupKey
	}
	m.DedupID = maybe("dedup-" + randomName(r, used))
	if r.IntN(2) == 0 {
		m.TTL = time.Duration(1+r.IntN(86400)) * time.Second
	}
	if r.IntN(3) == 0 {
		m.ScheduledAt = time.Unix(1_800_000_000+r.Int64N(1e6), 0).UTC()
	}
	if r.IntN(3) == 0 {
		var tr mapping.Trace
		copy(tr.TraceID[:], randomBytes(r, 16))
		tr.TraceID[0] |= 1
		copy(tr.SpanID[:], randomBytes(r, 8))
		tr.SpanID[0] |= 1
		tr.Flags = byte(r.IntN(2))
		if r.IntN(3) == 0 {
			tr.State = "vendor=" + randomName(r, map[string]bool{})
		}
		m.Trace = tr
	}
	attrNames := map[string]bool{}
	for i, n := 0, r.IntN(13); i < n; i++ {
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: randomName(r, attrNames), Value: randomValue(r)})
	}
	return m
}
