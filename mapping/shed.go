package mapping

// Shedding: when the carry envelope does not fit on the target (SQS's ten
// attributes, Service Bus's 32 KiB per property and 64 KiB of properties,
// any total size limit), an encoder leaves out what the envelope carries,
// one member at a time in ShedOrder, until the message fits. A message whose
// own content fits natively is therefore never refused because of the
// envelope. What the Encode policy put there (attributes that did not fit,
// the body's encoding marker) is the message's own content and is never
// shed: without it the message does not fit, and the policy decides. So are
// the type records that undo its encodings (Envelope.SetEncodedType).

// ShedOrder lists the envelope's members, by their JSON names, in the order
// they are shed: read-only source facts and AMQP header details first; then
// addressing and descriptive properties, the trace, delivery times, the
// body's AMQP section type, and the identity fields (dedup id, group key,
// id); last what keeps the user's attributes exact for a qbridge reader —
// their data types and exact texts, whose values a native consumer already
// has.
var ShedOrder = func() []string {
	names := make([]string, len(shedMembers))
	for i, m := range shedMembers {
		names[i] = m.name
	}
	return names
}()

type shedMember struct {
	name  string
	has   func(e *Envelope) bool
	clear func(e *Envelope)
}

// field builds a member held in the carried fields.
func field(name string, has func(c *CarriedFields) bool, clear func(c *CarriedFields)) shedMember {
	return shedMember{
		name: name,
		has:  func(e *Envelope) bool { return e.Fields != nil && has(e.Fields) },
		clear: func(e *Envelope) {
			clear(e.Fields)
			if e.Fields.isZero() {
				e.Fields = nil
			}
		},
	}
}

func str(name string, get func(c *CarriedFields) *string) shedMember {
	return field(name, func(c *CarriedFields) bool { return *get(c) != "" }, func(c *CarriedFields) { *get(c) = "" })
}

var shedMembers = []shedMember{
	field("source", func(c *CarriedFields) bool { return c.Source != nil }, func(c *CarriedFields) { c.Source = nil }),
	field("annotations", func(c *CarriedFields) bool { return c.Annotations != nil }, func(c *CarriedFields) { c.Annotations = nil }),
	field("userId", func(c *CarriedFields) bool { return c.UserID != nil }, func(c *CarriedFields) { c.UserID = nil }),
	field("durable", func(c *CarriedFields) bool { return c.Durable }, func(c *CarriedFields) { c.Durable = false }),
	field("priority", func(c *CarriedFields) bool { return c.Priority != nil }, func(c *CarriedFields) { c.Priority = nil }),
	field("firstAcquirer", func(c *CarriedFields) bool { return c.FirstAcquirer }, func(c *CarriedFields) { c.FirstAcquirer = false }),
	field("creationTime", func(c *CarriedFields) bool { return c.CreationTime != nil }, func(c *CarriedFields) { c.CreationTime = nil }),
	field("absoluteExpiry", func(c *CarriedFields) bool { return c.AbsoluteExpiry != nil }, func(c *CarriedFields) { c.AbsoluteExpiry = nil }),
	field("groupSequence", func(c *CarriedFields) bool { return c.GroupSequence != 0 }, func(c *CarriedFields) { c.GroupSequence = 0 }),
	str("viaPartitionKey", func(c *CarriedFields) *string { return &c.ViaPartitionKey }),
	str("partitionKey", func(c *CarriedFields) *string { return &c.PartitionKey }),
	str("replyToGroup", func(c *CarriedFields) *string { return &c.ReplyToGroup }),
	str("replyTo", func(c *CarriedFields) *string { return &c.ReplyTo }),
	str("to", func(c *CarriedFields) *string { return &c.To }),
	str("contentEncoding", func(c *CarriedFields) *string { return &c.ContentEncoding }),
	str("correlationKind", func(c *CarriedFields) *string { return &c.CorrelationKind }),
	str("subject", func(c *CarriedFields) *string { return &c.Subject }),
	str("contentType", func(c *CarriedFields) *string { return &c.ContentType }),
	str("correlationId", func(c *CarriedFields) *string { return &c.CorrelationID }),
	field("trace", func(c *CarriedFields) bool { return c.Trace != nil }, func(c *CarriedFields) { c.Trace = nil }),
	field("scheduledAt", func(c *CarriedFields) bool { return c.ScheduledAt != nil }, func(c *CarriedFields) { c.ScheduledAt = nil }),
	field("ttlNanos", func(c *CarriedFields) bool { return c.TTL != 0 }, func(c *CarriedFields) { c.TTL = 0 }),
	str("bodyType", func(c *CarriedFields) *string { return &c.BodyType }),
	str("dedupId", func(c *CarriedFields) *string { return &c.DedupID }),
	field("groupKey", func(c *CarriedFields) bool { return c.GroupKey != nil }, func(c *CarriedFields) { c.GroupKey = nil }),
	str("idKind", func(c *CarriedFields) *string { return &c.IDKind }),
	str("id", func(c *CarriedFields) *string { return &c.ID }),
	{"types", func(e *Envelope) bool { return len(e.Types) > len(e.encoded) }, func(e *Envelope) {
		if len(e.encoded) == 0 {
			e.Types = nil
			return
		}
		for name := range e.Types {
			if !e.encoded[name] {
				delete(e.Types, name)
			}
		}
	}},
	{"text", func(e *Envelope) bool { return len(e.Texts) > 0 }, func(e *Envelope) { e.Texts = nil }},
}

// ShedNext leaves out the first member of ShedOrder that e carries and
// returns its name, or "" when e carries nothing that can be shed.
func (e *Envelope) ShedNext() string {
	if e == nil {
		return ""
	}
	for _, m := range shedMembers {
		if m.has(e) {
			m.clear(e)
			return m.name
		}
	}
	return ""
}

// ShedAll leaves out everything that can be shed and returns the members'
// names in ShedOrder (appended to dst).
func (e *Envelope) ShedAll(dst []string) []string {
	for {
		n := e.ShedNext()
		if n == "" {
			return dst
		}
		dst = append(dst, n)
	}
}

// Sheddable reports whether e carries something that can be shed.
func (e *Envelope) Sheddable() bool {
	if e == nil {
		return false
	}
	for _, m := range shedMembers {
		if m.has(e) {
			return true
		}
	}
	return false
}

// Essential reports whether e carries what cannot be shed: attributes the
// Encode policy moved there, the types that undo its encodings
// (SetEncodedType) or the body's encoding marker.
func (e *Envelope) Essential() bool {
	return e != nil && (len(e.Attrs) > 0 || len(e.encoded) > 0 || e.BodyEncoding != "")
}

// DropIfOnly empties the carried fields when they hold nothing but fields of
// home — fields the encoder also wrote to a native home on the target (an id
// sent as SQS FIFO MessageDeduplicationId, a group key as MessageGroupId) —
// and the envelope carries nothing else: then it is not written for them.
// When it is written anyway they ride along, so a qbridge reader gets them
// back exactly.
func (e *Envelope) DropIfOnly(home Field) {
	if e == nil || e.Fields == nil || len(e.Types) > 0 || len(e.Texts) > 0 || e.Essential() {
		return
	}
	c := *e.Fields
	if home&FieldID != 0 {
		c.ID, c.IDKind = "", ""
	}
	if home&FieldGroupKey != 0 {
		c.GroupKey = nil
	}
	if home&FieldDedupID != 0 {
		c.DedupID = ""
	}
	if c.isZero() {
		e.Fields = nil
	}
}
