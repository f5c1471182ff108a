package sbmap

import (
	"math"
	"strconv"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// decoded moves the broker properties out of the generic decode: the x-opt-*
// annotations into their fields and m.Source, absolute-expiry-time into
// Source.ExpiresAt, the dead-letter application properties into Source, and
// the lock token into Source.LockToken.
func decoded(msg *amqp.Message, m *mapping.Message, env *mapping.Envelope) error {
	m.Source.ExpiresAt, m.AbsoluteExpiry = m.AbsoluteExpiry, time.Time{}

	if len(m.Annotations) > 0 {
		kept := m.Annotations[:0]
		for _, a := range m.Annotations {
			if !brokerAnnotation(m, a) {
				kept = append(kept, a)
			}
		}
		m.Annotations = kept
		if len(kept) == 0 {
			m.Annotations = nil
		}
	}

	for _, p := range []struct {
		name string
		dst  *string
	}{
		{DeadLetterReasonProperty, &m.Source.DeadLetterReason},
		{DeadLetterDescriptionProperty, &m.Source.DeadLetterDesc},
	} {
		if _, user := env.TypeOf(p.name); user {
			continue // a user attribute of that name, typed by our encoder
		}
		if v, ok := m.Attr(p.name); ok && v.Kind == mapping.KindString && v.Label == "" {
			*p.dst = v.Str()
			m.DeleteAttr(p.name)
		}
	}

	// MessageId was made up by an encoder for a message without an id
	// (IDFromSourceKey), or was the dedup id (or its digest) of a message
	// without an id of its own.
	if mapping.IsMadeUpID(m.ID) {
		m.ID = ""
	}
	if env != nil && env.Fields != nil {
		if c := env.Fields; c.ID == "" && c.DedupID != "" && (m.ID == c.DedupID || m.ID == digest(c.DedupID)) {
			m.ID = ""
		}
	}

	if u, ok := LockToken(msg); ok {
		m.Source.LockToken = mapping.UUIDString(u)
	}
	return nil
}

// brokerAnnotation applies one broker annotation; it reports false (keep it
// as an annotation) for any other, or for one of an unexpected type.
func brokerAnnotation(m *mapping.Message, a mapping.Attribute) bool {
	v := a.Value
	if v.Label != "" {
		return false
	}
	str := func(dst *string) bool {
		if v.Kind != mapping.KindString {
			return false
		}
		*dst = v.Str()
		return true
	}
	stamp := func(dst *time.Time) bool {
		if v.Kind != mapping.KindTimestamp {
			return false
		}
		*dst = v.Time()
		return true
	}
	n, isInt := integer(v)
	switch a.Name {
	case AnnotationPartitionKey:
		return str(&m.PartitionKey)
	case AnnotationViaPartitionKey:
		return str(&m.ViaPartitionKey)
	case AnnotationScheduledEnqueueTime:
		return stamp(&m.ScheduledAt)
	case AnnotationEnqueuedTime:
		return stamp(&m.Source.EnqueuedTime)
	case AnnotationLockedUntil:
		return stamp(&m.Source.LockedUntil)
	case AnnotationDeadLetterSource:
		return str(&m.Source.DeadLetterSource)
	case AnnotationSequenceNumber:
		if isInt {
			m.Source.SequenceNumber = strconv.FormatInt(n, 10)
		}
		return isInt
	case AnnotationEnqueuedSequenceNumber:
		if isInt {
			m.Source.EnqueuedSequence = n
		}
		return isInt
	case AnnotationMessageState:
		if isInt {
			m.Source.State = int(n)
		}
		return isInt
	case AnnotationPartitionID:
		if isInt {
			m.Source.PartitionID = int(n)
		}
		return isInt
	}
	return false
}

// integer reads any AMQP integer kind that fits an int64.
func integer(v mapping.Value) (int64, bool) {
	switch v.Kind {
	case mapping.KindInt8, mapping.KindInt16, mapping.KindInt32, mapping.KindInt64:
		return v.Int(), true
	case mapping.KindUint8, mapping.KindUint16, mapping.KindUint32:
		return int64(v.Uint()), true
	case mapping.KindUint64:
		if v.Uint() <= math.MaxInt64 {
			return int64(v.Uint()), true
		}
	}
	return 0, false
}

// LockToken returns the lock token of a peek-locked message as the RFC 4122
// UUID that renew-lock and update-disposition take: the delivery
// annotation x-opt-lock-token when present, else the 16-byte delivery tag
// read as a .NET GUID (bytes 0-3, 4-5 and 6-7 little-endian).
func LockToken(msg *amqp.Message) (amqp.UUID, bool) {
	v, ok := msg.DeliveryAnnotations[DeliveryAnnotationLockToken] // decoded symbol keys are strings
	if !ok {
		v = msg.DeliveryAnnotations[amqp.Symbol(DeliveryAnnotationLockToken)]
	}
	if u, ok := v.(amqp.UUID); ok {
		return u, true
	}
	if len(msg.DeliveryTag) != 16 {
		return amqp.UUID{}, false
	}
	return GUIDToUUID([16]byte(msg.DeliveryTag)), true
}

// GUIDToUUID converts the 16 bytes of a .NET GUID (Guid.ToByteArray order)
// to an RFC 4122 UUID; the conversion is its own inverse.
func GUIDToUUID(g [16]byte) amqp.UUID {
	g[0], g[1], g[2], g[3] = g[3], g[2], g[1], g[0]
	g[4], g[5] = g[5], g[4]
	g[6], g[7] = g[7], g[6]
	return amqp.UUID(g)
}
