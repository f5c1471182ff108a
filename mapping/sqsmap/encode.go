package sqsmap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
)

// EncodeOptions are the knobs of Encode.
type EncodeOptions struct {
	mapping.Options
	// FIFO: the target is a FIFO queue (MessageGroupId and
	// MessageDeduplicationId are native; no per-message delay).
	FIFO bool
	// DefaultGroup is the MessageGroupId for a FIFO message without a group
	// key (so the send never fails); "" means DefaultGroupID.
	DefaultGroup string
	// ContentBasedDedup: the FIFO queue has ContentBasedDeduplication, so a
	// message without an explicit DedupID is sent without
	// MessageDeduplicationId and SQS hashes the body.
	ContentBasedDedup bool
	// Now is the clock for DelaySeconds; nil means time.Now.
	Now func() time.Time
}

// EmptyBodyPlaceholder is the body sent for an empty one: SQS refuses an
// empty body, so under the Encode policy it travels as this text with the
// envelope's mapping.BodyEncodingEmpty and decodes back to empty.
const EmptyBodyPlaceholder = "-"

// wireAttr is one message attribute as it will go on the wire.
type wireAttr struct {
	name, dt, s string
	b           []byte
	binary      bool
	src         int  // index in Message.Attributes
	noted       bool // its model data type is recorded in the envelope
}

func (w *wireAttr) size() int { return attrSize(w.name, w.dt, len(w.s)+len(w.b)) }

// encoder holds one Encode. The wire attributes are passed around as a
// local slice rather than kept here, so that their array stays on the stack.
type encoder struct {
	m   *mapping.Message
	opt EncodeOptions
	env *mapping.Envelope
	out *Outbound
	// home: fields also written to a native home (the id as a FIFO
	// MessageDeduplicationId, the group key as MessageGroupId on a standard
	// queue); the envelope is not written for them alone.
	home mapping.Field
}

// Encode translates m into an SQS send. What SQS cannot take is handled by
// opt.Policy (see docs/mapping-sqs.md); a refusal is a *mapping.RejectError.
func Encode(m *mapping.Message, opt EncodeOptions) (*Outbound, error) {
	if m == nil {
		return nil, mapping.Rejectf(Wire, "", "nil message")
	}
	var buf [MaxAttributes + 1]wireAttr // no allocation for the usual case
	native := buf[:0]
	opt.Options = opt.Options.Effective()
	held := opt.Hold() // fit may still refuse the message
	e := encoder{m: m, opt: opt, out: new(Outbound)}
	bodyEnc, err := e.body()
	if err != nil {
		return nil, err
	}
	fields, emptyGroup, err := e.ids()
	if err != nil {
		return nil, err
	}
	e.env = mapping.NewEnvelope(m, fields, &opt.Options)
	e.env.BodyEncoding = bodyEnc
	if fields&mapping.FieldID != 0 && e.env.Fields != nil {
		// The ID is not carried, so neither is its kind: the receiver's ID
		// is the new SQS message id, a string.
		e.env.Fields.IDKind = ""
		e.tidyFields()
	}
	if emptyGroup && opt.Envelope != mapping.EnvelopeOff {
		// The default group is an SQS artefact: say the message had none.
		e.fields().GroupKey = new("")
	}
	if err := e.schedule(); err != nil {
		return nil, err
	}
	for i := range m.Attributes {
		w, ok, err := e.attribute(i, m.Attributes[i], native)
		if err != nil {
			return nil, err
		}
		if ok {
			native = append(native, w)
		}
	}
	if err := e.fit(native); err != nil {
		return nil, err
	}
	held.Flush()
	return e.out, nil
}

func (e *encoder) body() (encoding string, err error) {
	b := e.m.Body
	if len(b) == 0 {
		if e.opt.Policy == mapping.Encode {
			e.opt.Encoded("body", fmt.Sprintf("empty: SQS requires a body; sent as %q", EmptyBodyPlaceholder))
			e.out.Body = EmptyBodyPlaceholder
			return mapping.BodyEncodingEmpty, nil
		}
		return "", mapping.Rejectf(Wire, "body", "SQS requires a non-empty body (a body cannot be dropped; policy encode sends a placeholder)")
	}
	s := string(b)
	if at := invalidTextAt(s); at >= 0 {
		if e.opt.Policy == mapping.Encode {
			e.opt.Encoded("body", describeInvalidText(s, at)+"; SQS takes only XML characters: sent base64")
			e.out.Body = mapping.EncodeBodyBase64(b)
			return mapping.BodyEncodingBase64, nil
		}
		return "", mapping.Rejectf(Wire, "body", "%s; SQS takes only XML characters (a body cannot be dropped; policy encode sends it base64)",
			describeInvalidText(s, at))
	}
	e.out.Body = s
	return "", nil
}

// ids sets the trace header, group and dedup ids and returns the fields the
// send holds natively.
func (e *encoder) ids() (native mapping.Field, emptyGroup bool, err error) {
	m, opt := e.m, e.opt
	if m.ID == "" || m.Source.Protocol == Wire && m.ID == m.Source.MessageID {
		// An SQS message id means nothing on another queue; an id that an
		// envelope restored (say a Service Bus MessageId) is carried on.
		native |= mapping.FieldID
	}
	if !m.Trace.IsZero() {
		// Send the header when it is well-formed and reproduces the X-Ray
		// part of the trace; NewEnvelope carries whatever else there is.
		h := m.Trace.XRay()
		x := m.Trace
		x.State, x.Flags = "", x.Flags&1
		if t, perr := mapping.ParseXRay(h); perr == nil && t == x && invalidTextAt(h) < 0 {
			native |= mapping.FieldTraceXRay
			dt := mapping.BaseString
			e.out.SystemAttributes = map[string]types.MessageSystemAttributeValue{
				"AWSTraceHeader": {DataType: &dt, StringValue: &h},
			}
		}
	}
	if !opt.FIFO {
		// Standard queues take a MessageGroupId too (fair queues, 2025):
		// it names the tenant for fair delivery, and a consumer reads it.
		if g := m.GroupKey; g != "" && checkID(g) == "" {
			e.out.GroupID = g
			e.home |= mapping.FieldGroupKey
		}
		return native, false, nil
	}

	switch g := m.GroupKey; {
	case g == "":
		e.out.GroupID = opt.DefaultGroup
		if e.out.GroupID == "" {
			e.out.GroupID = DefaultGroupID
		} else if r := checkID(e.out.GroupID); r != "" {
			return 0, false, fmt.Errorf("sqs: EncodeOptions.DefaultGroup %q: %s", opt.DefaultGroup, r)
		}
		native |= mapping.FieldGroupKey
		emptyGroup = true
	case checkID(g) == "":
		e.out.GroupID = g
		native |= mapping.FieldGroupKey
	default:
		enc, err := e.opt.Refuse(Wire, "MessageGroupId", "group key: "+checkID(g), true)
		if err != nil {
			return 0, false, err
		}
		// Hashing keeps the grouping: equal keys, equal ids.
		e.out.GroupID = hashID(g)
		if !enc {
			native |= mapping.FieldGroupKey
		}
	}

	switch d := m.DedupID; {
	case d != "":
		if r := checkID(d); r != "" {
			enc, err := e.opt.Refuse(Wire, "MessageDeduplicationId", "dedup id: "+r, true)
			if err != nil {
				return 0, false, err
			}
			e.out.DedupID = hashID(d)
			if !enc {
				native |= mapping.FieldDedupID
			}
			break
		}
		e.out.DedupID = d
		// Equal to a carried ID, it is carried too, so that the decoder can
		// tell an explicit dedup id from one derived from the ID; so is one
		// that looks made up (madeUpPrefix).
		if (d != m.ID || native&mapping.FieldID != 0) && !strings.HasPrefix(d, madeUpPrefix) {
			native |= mapping.FieldDedupID
		}
	case m.ID != "":
		// The id's native home on FIFO: a Service Bus MessageId means what
		// MessageDeduplicationId means.
		e.out.DedupID = m.ID
		if checkID(m.ID) != "" {
			e.out.DedupID = hashID(m.ID)
		} else {
			e.home |= mapping.FieldID
		}
	default:
		// No id of the message's own. The SHA-256 of the body, what
		// content-based deduplication uses, would merge distinct messages
		// with equal bodies on a queue that does not deduplicate on content
		// (a move would delete them at the source): the source's name for
		// the message where it has one (the same on a redelivery), else an
		// id of its own (a redelivery may then arrive twice; no message is
		// ever lost to another's id). On a queue that does deduplicate on
		// content, a message with a name keeps it too (SQS takes an
		// explicit id over the body's hash), and only one that nothing
		// names is left to the queue's own choice.
		k := m.SourceKey()
		if k == "" && opt.ContentBasedDedup {
			break
		}
		e.out.DedupID = madeUpDedupID(k)
	}
	return native, emptyGroup, nil
}

// madeUpPrefix starts a dedup id the encoder made up for a message that has
// none: the decoder does not take it for the message's own. An explicit
// dedup id that starts with it travels in the envelope instead.
const madeUpPrefix = mapping.MadeUpIDPrefix

// madeUpDedupID is the dedup id of a message without one: from its
// SourceKey (key), else unique.
func madeUpDedupID(key string) string {
	if key != "" {
		return mapping.IDFromSourceKey(key)
	}
	return madeUpPrefix + rand.Text()
}

// hashID is the lowercase hex SHA-256 of s: a valid SQS id for any key.
func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (e *encoder) fields() *mapping.CarriedFields {
	if e.env.Fields == nil {
		e.env.Fields = &mapping.CarriedFields{}
	}
	return e.env.Fields
}

// tidyFields removes the carried fields when nothing is left in them.
func (e *encoder) tidyFields() {
	if f := e.env.Fields; f != nil && reflect.ValueOf(f).Elem().IsZero() {
		e.env.Fields = nil
	}
}

func (e *encoder) schedule() error {
	at := e.m.ScheduledAt
	if at.IsZero() {
		return nil
	}
	now := time.Now
	if e.opt.Now != nil {
		now = e.opt.Now
	}
	d := at.Sub(now())
	if d <= 0 {
		return nil
	}
	var reason string
	switch {
	case e.opt.FIFO:
		reason = "FIFO queues take no per-message delay"
	case d > MaxDelaySeconds*time.Second:
		reason = fmt.Sprintf("delay of %s exceeds the SQS maximum of %ds", d.Round(time.Second), MaxDelaySeconds)
	default:
		e.out.DelaySeconds = int32((d + time.Second - 1) / time.Second)
		return nil
	}
	enc, err := e.opt.Refuse(Wire, "ScheduledAt", reason, true)
	if err != nil {
		return err
	}
	if !enc && e.env.Fields != nil {
		// Drop: sent now and the schedule is left out.
		e.env.Fields.ScheduledAt = nil
		e.tidyFields()
	}
	// Encode: sent now; the envelope carries ScheduledAt (it always does).
	return nil
}

// attribute returns the wire form of attribute i, or ok=false when the
// policy dropped it or moved it into the envelope.
func (e *encoder) attribute(i int, a mapping.Attribute, native []wireAttr) (w wireAttr, ok bool, err error) {
	if r := checkName(a.Name); r != "" {
		return w, false, e.misfit(a, r, true)
	}
	if isNative(native, a.Name) {
		return w, false, e.misfit(a, "duplicate attribute name", true)
	}
	v := a.Value
	if !v.IsValid() {
		return w, false, e.misfit(a, "invalid value", false)
	}
	dt := dataType(v)
	w = wireAttr{name: a.Name, dt: dt, src: i}
	if r := checkDataType(dt); r != "" {
		if enc, err := e.opt.Refuse(Wire, attrField(a.Name), r, true); err != nil || !enc {
			return w, false, err
		}
		w.dt, w.noted = v.Base(), true
	}
	if v.Base() == mapping.BaseBinary {
		w.b, w.binary = v.Bytes(), true
		if len(w.b) == 0 {
			return w, false, e.misfit(a, "empty Binary value", true)
		}
	} else {
		text, err := v.Text()
		if err != nil {
			return w, false, e.misfit(a, "value: "+err.Error(), false)
		}
		if text == "" {
			return w, false, e.misfit(a, "empty "+v.Base()+" value", true)
		}
		if v.Base() == mapping.BaseNumber {
			if r := checkNumber(text); r != "" {
				if enc, err := e.opt.Refuse(Wire, attrField(a.Name), r, true); err != nil || !enc {
					return w, false, err
				}
				// Text with the type in the envelope.
				w.dt, w.noted = mapping.BaseString, true
			}
		}
		if at := invalidTextAt(text); at >= 0 {
			if enc, err := e.opt.Refuse(Wire, attrField(a.Name), "String value: "+describeInvalidText(text, at), true); err != nil || !enc {
				return w, false, err
			}
			// The text's bytes as Binary, with the type in the envelope.
			w.dt, w.noted, w.binary, w.b = mapping.BaseBinary, true, true, []byte(text)
		} else {
			w.s = text
		}
	}
	if w.noted {
		e.env.SetEncodedType(a.Name, dt)
	}
	return w, true, nil
}

// misfit applies the policy to an attribute that cannot go natively; movable
// says whether the Encode policy can carry it in the envelope.
func (e *encoder) misfit(a mapping.Attribute, reason string, movable bool) error {
	field := attrField(a.Name)
	if !movable && e.opt.Policy == mapping.Encode {
		return mapping.Rejectf(Wire, field, "%s", reason)
	}
	enc, err := e.opt.Refuse(Wire, field, reason, true)
	if enc {
		e.env.Attrs = append(e.env.Attrs, a)
	}
	return err
}

func isNative(native []wireAttr, name string) bool {
	for i := range native {
		if native[i].name == name {
			return true
		}
	}
	return false
}

func (e *encoder) unnote(w *wireAttr) {
	if w.noted {
		e.env.DeleteType(w.name)
	}
}

// fit enforces the attribute count and the size limit, then builds the
// attribute map.
func (e *encoder) fit(native []wireAttr) error {
	opt := &e.opt
	var shed []string
	if opt.Envelope == mapping.EnvelopeOff {
		shed = e.env.ShedAll(shed)
	}
	e.env.DropIfOnly(e.home)
	if len(native)+b2i(!e.env.Empty()) > MaxAttributes && !e.env.Essential() &&
		(len(native) <= MaxAttributes || opt.Policy == mapping.Drop) {
		// The envelope must not cost an attribute: it goes whole (it is
		// one attribute). Attributes that are too many by themselves are
		// the policy's below; Encode then carries them, and the rest, in
		// the envelope.
		shed = e.env.ShedAll(shed)
	}
	if len(native)+b2i(!e.env.Empty()) > MaxAttributes {
		// Which attributes stay native must not depend on the model's order,
		// or every SQS hop would reshuffle them (decoders sort by name).
		slices.SortStableFunc(native, func(a, b wireAttr) int { return strings.Compare(a.name, b.name) })
	}
	for len(native)+b2i(!e.env.Empty()) > MaxAttributes {
		switch opt.Policy {
		case mapping.Drop:
			w := &native[len(native)-1]
			e.unnote(w)
			opt.Dropped(attrField(w.name), "SQS takes at most 10 message attributes, qbridge.envelope included")
			native = native[:len(native)-1]
		case mapping.Encode:
			keep := MaxAttributes - 1
			for k := range native[keep:] {
				w := &native[keep+k]
				e.unnote(w)
				opt.Encoded(attrField(w.name), "SQS takes at most 10 message attributes, qbridge.envelope included: moved into the envelope")
				e.env.Attrs = append(e.env.Attrs, e.m.Attributes[w.src])
			}
			native = native[:keep]
		default:
			plus := ""
			if !e.env.Empty() {
				plus = " plus the qbridge.envelope attribute"
			}
			return mapping.Rejectf(Wire, "attributes", "%d message attributes%s; SQS takes at most %d",
				len(native), plus, MaxAttributes)
		}
	}

	limit := opt.MaxMessageSize
	if limit <= 0 {
		limit = DefaultMaxMessageSize
	}
	for {
		envText, err := e.envelopeText()
		if err != nil {
			return err
		}
		envSize := 0
		if envText != "" {
			envSize = attrSize(mapping.EnvelopeName, mapping.EnvelopeDataType, len(envText))
		}
		attrs, big := envSize, -1
		for k := range native {
			s := native[k].size()
			attrs += s
			if big < 0 || s > native[big].size() {
				big = k
			}
		}
		size := len(e.out.Body) + attrs
		if size <= limit {
			e.build(native, envText)
			opt.Shed(shed)
			return nil
		}
		if name := e.env.ShedNext(); name != "" {
			// The envelope gives way before any attribute of the message.
			shed = append(shed, name)
			continue
		}
		if opt.Policy != mapping.Drop || big < 0 || len(e.out.Body)+envSize > limit {
			return mapping.TooLargef(Wire, "message", "size %d bytes exceeds the limit of %d (body %d, attributes %d)",
				size, limit, len(e.out.Body), attrs)
		}
		// Drop: leave out the largest attribute and try again.
		w := &native[big]
		e.unnote(w)
		opt.Dropped(attrField(w.name), fmt.Sprintf("message size %d bytes exceeds the limit of %d", size, limit))
		native = slices.Delete(native, big, big+1)
	}
}

// envelopeText marshals the envelope, or returns "" when it carries nothing.
func (e *encoder) envelopeText() (string, error) {
	if e.env.Empty() {
		return "", nil
	}
	s, err := e.env.Marshal()
	if err != nil {
		return "", mapping.Rejectf(Wire, attrField(mapping.EnvelopeName), "%v", err)
	}
	// JSON leaves U+FFFE and U+FFFF unescaped; SQS refuses them raw.
	if strings.Contains(s, "\uFFFE") || strings.Contains(s, "\uFFFF") {
		s = strings.NewReplacer("\uFFFE", `\ufffe`, "\uFFFF", `\uffff`).Replace(s)
	}
	return s, nil
}

func (e *encoder) build(native []wireAttr, envText string) {
	n := len(native)
	if envText != "" {
		n++
	}
	if n == 0 {
		return
	}
	// One backing array for the strings the attribute values point to.
	strs := make([]string, 2*n)
	attrs := make(map[string]types.MessageAttributeValue, n)
	for k := range native {
		w := &native[k]
		strs[2*k] = w.dt
		a := types.MessageAttributeValue{DataType: &strs[2*k]}
		if w.binary {
			a.BinaryValue = w.b
		} else {
			strs[2*k+1] = w.s
			a.StringValue = &strs[2*k+1]
		}
		attrs[w.name] = a
	}
	if envText != "" {
		strs[2*n-2], strs[2*n-1] = mapping.EnvelopeDataType, envText
		attrs[mapping.EnvelopeName] = types.MessageAttributeValue{DataType: &strs[2*n-2], StringValue: &strs[2*n-1]}
	}
	e.out.Attributes = attrs
}

// defaultDataTypes are the data types of unlabelled values by kind, so that
// the hot path does not build them.
var defaultDataTypes = func() []string {
	var t []string
	for k := mapping.Kind(0); ; k++ {
		v := mapping.Value{Kind: k}
		if k > 0 && !v.IsValid() {
			return t
		}
		t = append(t, v.DataType())
	}
}()

func dataType(v mapping.Value) string {
	if v.Label == "" && int(v.Kind) < len(defaultDataTypes) {
		return defaultDataTypes[v.Kind]
	}
	return v.DataType()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
