package mapping

import (
	"errors"
	"fmt"
	"strings"
)

// Policy says what an encoder does when the target cannot take a message as
// it is: too many attributes, an invalid or reserved name, a body the target
// cannot carry, an oversized property.
type Policy uint8

const (
	// Reject refuses the message with a precise reason (a *RejectError), so
	// the pipeline dead-letters it. The default.
	Reject Policy = iota
	// Drop leaves out what does not fit, reports each item through
	// Options.OnDrop (logged and counted by the pipeline), and sends the rest.
	// A body that does not fit cannot be dropped: the message is rejected.
	Drop
	// Encode moves what does not fit into the carry envelope (see Envelope)
	// with a reversible encoding: overflow attributes packed into the
	// envelope, a body base64-encoded with a marker. Limits that no encoding
	// can meet (total size) still reject.
	Encode
)

var policyNames = [...]string{"reject", "drop", "encode"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", p)
}

// ParsePolicy parses "reject", "drop" or "encode".
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown policy %q: want reject, drop or encode", s)
}

// Options are the knobs every encoder takes.
type Options struct {
	Policy Policy
	// MaxMessageSize overrides the target's default size limit in bytes
	// (SQS: 262,144; Service Bus: the link's max-message-size or 256 KiB).
	MaxMessageSize int
	// MaxHeaderSize, where not 0, bounds the encoded headers apart from the
	// whole message (a JetStream stream refuses headers over 65,535 bytes
	// whatever its max_payload).
	MaxHeaderSize int
	// CarrySource writes the read-only source facts (enqueued time, sequence
	// number, delivery count, dead-letter reason...) into the carry envelope.
	CarrySource bool
	// OnDrop is told about each item left out under the Drop policy.
	OnDrop func(field, reason string)
	// Envelope says whether the carry envelope is written (EnvelopeAuto, the
	// default) or never (EnvelopeOff).
	Envelope EnvelopeMode
	// OnShed is told, once per encoded message, the envelope members (their
	// JSON names, see ShedOrder) left out because the envelope did not fit
	// on the target, or because Envelope is EnvelopeOff. Nil: not reported.
	OnShed func(fields []string)
}

// HeldReports keeps an encode's reports (OnDrop: drops, encodings, shed
// envelope members; OnShed) until the encode is known to succeed: an
// encoder that dropped items and then refuses the whole message (a size
// limit) must not have them counted and logged as left out of a message
// that was sent.
type HeldReports struct {
	drop    func(field, reason string)
	shed    func(fields []string)
	pending []heldReport
}

// heldReport is one OnDrop report, or (fields set) one OnShed report.
type heldReport struct {
	field, reason string
	fields        []string
}

// Hold makes o report into the HeldReports it returns until their Flush.
// Under Reject nothing is reported but shed members, which an encoder
// reports once at its end: o is left as it is, and the result is nil
// (nothing allocated on the hot path; Flush of nil does nothing).
func (o *Options) Hold() *HeldReports {
	if o.OnDrop == nil || o.Policy == Reject {
		return nil
	}
	return o.HoldAll()
}

// HoldAll is Hold under every policy, for an encoder that reports shed
// members before its last verdict (a REST batch, whose size is judged
// once its elements are encoded).
func (o *Options) HoldAll() *HeldReports {
	h := &HeldReports{drop: o.OnDrop, shed: o.OnShed}
	if o.OnDrop != nil {
		o.OnDrop = func(field, reason string) { h.pending = append(h.pending, heldReport{field: field, reason: reason}) }
	}
	if o.OnShed != nil {
		o.OnShed = func(fields []string) { h.pending = append(h.pending, heldReport{fields: fields}) }
	}
	return h
}

// Flush passes the held reports on, in order, and forgets them.
func (h *HeldReports) Flush() {
	if h == nil {
		return
	}
	for _, r := range h.pending {
		if r.fields != nil {
			h.shed(r.fields)
		} else {
			h.drop(r.field, r.reason)
		}
	}
	h.pending = h.pending[:0]
}

// Shed reports envelope members left out of one message: to OnShed, or,
// when that is not set, through OnDrop (the one callback a sink hands its
// encoder) as the field EnvelopeName with a reason that ShedReport reads
// back, so that the pipeline can count it apart from what Drop leaves out.
func (o *Options) Shed(fields []string) {
	if o == nil || len(fields) == 0 {
		return
	}
	switch {
	case o.OnShed != nil:
		o.OnShed(fields)
	case o.OnDrop != nil:
		o.OnDrop(EnvelopeName, shedPrefix+strings.Join(fields, ","))
	}
}

const shedPrefix = "envelope shed: "

// ShedReport recognizes a report of Shed that came through OnDrop and
// returns the envelope members it names.
func ShedReport(field, reason string) (fields []string, ok bool) {
	rest, found := strings.CutPrefix(reason, shedPrefix)
	if field != EnvelopeName || !found || rest == "" {
		return nil, false
	}
	return strings.Split(rest, ","), true
}

// EnvelopeMode says whether encoders write the carry envelope.
type EnvelopeMode uint8

const (
	// EnvelopeAuto writes the envelope when something needs carrying and
	// sheds what it carries (see ShedOrder) where it does not fit: the
	// envelope never costs a message that fits natively.
	EnvelopeAuto EnvelopeMode = iota
	// EnvelopeOff never writes it: native consumers see only native
	// properties. What the envelope would carry is left out and reported
	// through Options.OnShed; round trips are lossy by choice. The Encode
	// policy, whose reversible encodings live in the envelope, acts as
	// Reject.
	EnvelopeOff
)

var envelopeModeNames = [...]string{"auto", "off"}

func (m EnvelopeMode) String() string {
	if int(m) < len(envelopeModeNames) {
		return envelopeModeNames[m]
	}
	return fmt.Sprintf("envelope(%d)", m)
}

// ParseEnvelopeMode parses "auto" or "off".
func ParseEnvelopeMode(s string) (EnvelopeMode, error) {
	for i, n := range envelopeModeNames {
		if n == s {
			return EnvelopeMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown envelope mode %q: want auto or off", s)
}

// Effective returns o as encoders apply it: with the envelope off, the
// Encode policy has nowhere to put what it encodes, so it rejects.
func (o Options) Effective() Options {
	if o.Envelope == EnvelopeOff && o.Policy == Encode {
		o.Policy = Reject
	}
	return o
}

// Encoded reports an item the Encode policy changed to fit the target
// (moved into the carry envelope, a body base64-encoded, a schedule sent
// now): the message arrives, but a native consumer sees it otherwise.
// It travels through OnDrop, the one callback a sink hands its encoder,
// with a reason that EncodedReport reads back, so that the pipeline counts
// it apart from what Drop leaves out (and a dry run can list it).
func (o *Options) Encoded(field, how string) {
	if o != nil && o.OnDrop != nil {
		o.OnDrop(field, encodedPrefix+how)
	}
}

const encodedPrefix = "encoded: "

// EncodedReport recognizes a report of Encoded that came through OnDrop
// and returns how the item was encoded.
func EncodedReport(reason string) (how string, ok bool) {
	return strings.CutPrefix(reason, encodedPrefix)
}

// Refuse applies o.Policy to an item the wire form cannot take as it is:
// under Drop it reports the item (Dropped) and returns carry=false, under
// Encode, when canCarry, it reports it (Encoded) and returns carry=true (the
// caller moves it into the envelope); otherwise it returns the RejectError
// naming wire and field. canCarry false is for an item the envelope cannot
// hold either (a duplicate, invalid UTF-8): Encode then rejects it.
func (o *Options) Refuse(wire, field, reason string, canCarry bool) (carry bool, err error) {
	switch o.Policy {
	case Drop:
		o.Dropped(field, reason)
		return false, nil
	case Encode:
		if canCarry {
			o.Encoded(field, reason)
			return true, nil
		}
	}
	return false, Rejectf(wire, field, "%s", reason)
}

// Dropped reports an item left out under the Drop policy.
func (o *Options) Dropped(field, reason string) {
	if o != nil && o.OnDrop != nil {
		o.OnDrop(field, reason)
	}
}

// RejectError says why a message cannot be decoded from or encoded for a wire
// form. It is permanent: retrying cannot help, so the pipeline dead-letters
// the message with Error() as the reason.
type RejectError struct {
	Wire   string // "sqs", "servicebus", "servicebus-https", "amqp", "nats"
	Field  string // e.g. `attribute "x.y"`, "body", "MessageGroupId"
	Reason string
	// TooLarge marks a size limit: its remedy (a larger limit, fewer
	// attributes) differs from other refusals, so the pipeline counts it apart.
	TooLarge bool
}

func (e *RejectError) Error() string {
	if e.Field == "" {
		return e.Wire + ": " + e.Reason
	}
	return e.Wire + ": " + e.Field + ": " + e.Reason
}

// Rejectf builds a *RejectError.
func Rejectf(wire, field, format string, args ...any) error {
	return &RejectError{Wire: wire, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// TooLargef builds a *RejectError for a size limit.
func TooLargef(wire, field, format string, args ...any) error {
	return &RejectError{Wire: wire, Field: field, Reason: fmt.Sprintf(format, args...), TooLarge: true}
}

// IsReject reports whether err is, or wraps, a *RejectError.
func IsReject(err error) bool {
	var r *RejectError
	return errors.As(err, &r)
}
