package mapping

import (
	"errors"
	"fmt"
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
	// CarrySource writes the read-only source facts (enqueued time, sequence
	// number, delivery count, dead-letter reason...) into the carry envelope.
	CarrySource bool
	// OnDrop is told about each item left out under the Drop policy.
	OnDrop func(field, reason string)
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
