package sbmap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// Encode maps a model message onto an AMQP message for Service Bus. On top
// of amqpmap's rules: MessageId is m.DedupKey(); ids and keys are at most
// 128 characters; SessionId and PartitionKey must be equal when both are
// set; the header limits (32 KiB per application property, 64 KiB for all
// properties) and the message size limit (opt.MaxMessageSize, default
// 256 KiB) hold. See the package doc for the policies.
func Encode(m *mapping.Message, opt mapping.Options) (*amqp.Message, error) {
	if opt.MaxMessageSize == 0 {
		opt.MaxMessageSize = DefaultMaxMessageSize
	}
	opt = opt.Effective()
	// What the envelope shed is reported once, for the encode that is
	// sent; what the policy did, only for a message that passes the header
	// limits (mapping.HeldReports).
	if opt.Policy != mapping.Drop {
		held := opt.Hold()
		msg, shed, err := Dialect.EncodeShed(m, opt)
		if err != nil {
			return nil, err
		}
		if _, err := headerLimits(m, msg, opt.Policy); err != nil {
			return nil, err
		}
		opt.Shed(shed)
		held.Flush()
		return msg, nil
	}
	// Under Drop, header limits are met by leaving out the largest user
	// attributes and encoding again; reports of the encode attempts that
	// were thrown away are not repeated.
	type report struct{ field, reason string }
	var sizeDrops []report
	cur := m
	for {
		o := opt
		held := o.Hold()
		msg, shed, err := Dialect.EncodeShed(cur, o)
		if err != nil {
			return nil, err
		}
		drop, err := headerLimits(cur, msg, opt.Policy)
		if err != nil {
			return nil, err
		}
		if len(drop) == 0 {
			held.Flush()
			for _, r := range sizeDrops {
				opt.Dropped(r.field, r.reason)
			}
			opt.Shed(shed)
			return msg, nil
		}
		cur = cur.Clone()
		for _, d := range drop {
			cur.DeleteAttr(d.name)
			sizeDrops = append(sizeDrops, report{fmt.Sprintf("application-properties %q", d.name), d.reason})
		}
	}
}

type sizeDrop struct{ name, reason string }

// over reports whether the envelope property or the properties together
// exceed the Service Bus limits: Dialect.Encode then sheds the envelope.
func over(msg *amqp.Message, _ *mapping.Options) bool {
	if v, ok := msg.ApplicationProperties[mapping.EnvelopeName]; ok {
		if n, ok := amqpmap.PropertySize(mapping.EnvelopeName, v); ok && n > MaxPropertySize {
			return true
		}
	}
	return amqpmap.MessageSize(msg).Header > MaxHeaderSize
}

// headerLimits checks the Service Bus header limits. Under Drop it returns
// the user attributes to leave out; otherwise a violation is a too-large
// RejectError (moving a property into the envelope cannot make the header
// smaller).
func headerLimits(m *mapping.Message, msg *amqp.Message, policy mapping.Policy) ([]sizeDrop, error) {
	user := func(name string) bool {
		_, ok := m.Attr(name)
		return ok && name != mapping.EnvelopeName
	}
	var drop []sizeDrop
	for k, v := range msg.ApplicationProperties {
		n, ok := amqpmap.PropertySize(k, v)
		if !ok || n <= MaxPropertySize {
			continue
		}
		reason := fmt.Sprintf("encoded size %d bytes exceeds the Service Bus limit of %d per property", n, MaxPropertySize)
		if policy != mapping.Drop || !user(k) {
			return nil, mapping.TooLargef(Wire, fmt.Sprintf("application-properties %q", k), "%s", reason)
		}
		drop = append(drop, sizeDrop{k, reason})
	}
	if len(drop) > 0 {
		slices.SortFunc(drop, func(a, b sizeDrop) int { return strings.Compare(a.name, b.name) })
		return drop, nil
	}
	header := amqpmap.MessageSize(msg).Header
	if header <= MaxHeaderSize {
		return nil, nil
	}
	reason := fmt.Sprintf("encoded properties of %d bytes exceed the Service Bus header limit of %d", header, MaxHeaderSize)
	if policy != mapping.Drop {
		return nil, mapping.TooLargef(Wire, "properties", "%s", reason)
	}
	// Leave out the largest user attributes first.
	type sized struct {
		name string
		size int
	}
	var users []sized
	for k, v := range msg.ApplicationProperties {
		if n, ok := amqpmap.PropertySize(k, v); ok && user(k) {
			users = append(users, sized{k, n})
		}
	}
	slices.SortFunc(users, func(a, b sized) int {
		if a.size != b.size {
			return b.size - a.size
		}
		return strings.Compare(a.name, b.name)
	})
	for _, u := range users {
		drop = append(drop, sizeDrop{u.name, reason})
		if header -= u.size; header <= MaxHeaderSize {
			return drop, nil
		}
	}
	return nil, mapping.TooLargef(Wire, "properties", "%s, even without user attributes", reason)
}

// prepare returns the wire view of m under the Service Bus rules: MessageId
// is the dedup key, over-long ids, keys and session ids and a PartitionKey that differs
// from the SessionId go by opt.Policy. Where the wire view differs from m,
// carry names the fields whose originals ride in the envelope.
func prepare(m *mapping.Message, opt *mapping.Options) (*mapping.Message, mapping.Field, error) {
	w, carry := m, mapping.Field(0)
	edit := func() *mapping.Message {
		if w == m {
			c := *m
			w = &c
		}
		return w
	}
	// Service Bus deduplicates on MessageId, so it is the dedup key; the id
	// then rides in the envelope (as sbrest does: a decoder sees MessageId
	// equal to the carried dedup id and no carried id as "no id").
	if m.DedupID != "" {
		edit().ID = m.DedupID
		carry |= mapping.FieldID
	}
	if m.ID == "" && m.DedupID == "" {
		// No id of its own: one from the source's name for it, so that
		// duplicate detection drops what a resume writes again (the SDK
		// would give each send a random one).
		if id := mapping.IDFromSourceKey(m.SourceKey()); id != "" {
			edit().ID = id
		}
	}
	for _, k := range []struct {
		field string
		bit   mapping.Field
		get   func(*mapping.Message) *string
	}{
		{"MessageId", mapping.FieldID, func(m *mapping.Message) *string { return &m.ID }},
		{"SessionId", mapping.FieldGroupKey, func(m *mapping.Message) *string { return &m.GroupKey }},
		{"PartitionKey", mapping.FieldPartitionKey, func(m *mapping.Message) *string { return &m.PartitionKey }},
		{"ViaPartitionKey", mapping.FieldViaPartitionKey, func(m *mapping.Message) *string { return &m.ViaPartitionKey }},
		{"ReplyToSessionId", mapping.FieldReplyToGroup, func(m *mapping.Message) *string { return &m.ReplyToGroup }},
	} {
		v := *k.get(w)
		n := utf16Len(v)
		if n <= MaxIDLength {
			continue
		}
		reason := fmt.Sprintf("%d characters exceed the Service Bus limit of %d", n, MaxIDLength)
		encode, err := opt.Refuse(Dialect.Wire, k.field, reason, true)
		if err != nil {
			return nil, 0, err
		}
		if !encode {
			*k.get(edit()) = ""
			continue
		}
		// Encode: a digest keeps equal keys equal (deduplication, sessions,
		// partitions); the original rides in the envelope.
		*k.get(edit()) = digest(v)
		carry |= k.bit
	}
	if w.GroupKey != "" && w.PartitionKey != "" && w.GroupKey != w.PartitionKey {
		reason := fmt.Sprintf("PartitionKey %q differs from SessionId %q; Service Bus requires them equal", w.PartitionKey, w.GroupKey)
		encode, err := opt.Refuse(Dialect.Wire, "PartitionKey", reason, true)
		if err != nil {
			return nil, 0, err
		}
		if !encode {
			edit().PartitionKey = ""
		} else {
			edit().PartitionKey = w.GroupKey
			carry |= mapping.FieldPartitionKey
		}
	}
	if !m.ScheduledAt.IsZero() && m.ScheduledAt.Nanosecond()%int(time.Millisecond) != 0 {
		carry |= mapping.FieldScheduledAt // the timestamp holds milliseconds
	}
	return w, carry, nil
}

func utf16Len(s string) int {
	if len(s) <= MaxIDLength {
		return len(s) // at most one UTF-16 unit per byte
	}
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// digest stands for an over-long id or key on the wire.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// encoded writes the broker properties that are message annotations. It
// also gives msg the sections the Azure SDK always sends (azservicebus's
// AMQPAnnotatedMessage.toAMQPMessage writes an empty properties and
// message-annotations section where there are none), so that the sizes the
// limits are checked against are the sizes the link sees: 16 bytes more
// than the bare message, which go-amqp refuses when they cross the link's
// max-message-size.
func encoded(w *mapping.Message, msg *amqp.Message) error {
	if msg.Properties == nil {
		msg.Properties = &amqp.MessageProperties{}
	}
	if msg.Annotations == nil {
		msg.Annotations = make(amqp.Annotations, 3)
	}
	if w.PartitionKey == "" && w.ViaPartitionKey == "" && w.ScheduledAt.IsZero() {
		return nil
	}
	for _, a := range []struct{ name, field, v string }{
		{AnnotationPartitionKey, "PartitionKey", w.PartitionKey},
		{AnnotationViaPartitionKey, "ViaPartitionKey", w.ViaPartitionKey},
	} {
		if a.v == "" {
			continue
		}
		if !utf8.ValidString(a.v) {
			return mapping.Rejectf(Wire, a.field, "not valid UTF-8")
		}
		msg.Annotations[a.name] = a.v
	}
	if !w.ScheduledAt.IsZero() {
		msg.Annotations[AnnotationScheduledEnqueueTime] = w.ScheduledAt.UTC()
	}
	return nil
}
