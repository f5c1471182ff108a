package sqsmap

import (
	"crypto/md5"
	"crypto/sha256"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
)

// DecodeOptions are the knobs of Decode.
type DecodeOptions struct {
	// Address is the queue URL the message was received from
	// (Source.Address).
	Address string
	// OnWarn is told about something left out that does not warrant
	// rejecting the message: a malformed AWSTraceHeader.
	OnWarn func(field, reason string)
	// DedupPerGroup: the queue deduplicates within each message group
	// (DeduplicationScope messageGroup, a high-throughput FIFO queue), so
	// one MessageDeduplicationId may name distinct messages of two
	// groups. The model's DedupID is then made unique across the queue
	// (scopedDedupID): Service Bus duplicate detection, a JetStream
	// stream and an SQS FIFO queue of queue scope deduplicate across
	// groups, and would merge them.
	DedupPerGroup bool
}

func (o *DecodeOptions) warn(field, reason string) {
	if o.OnWarn != nil {
		o.OnWarn(field, reason)
	}
}

// System attribute names (ReceiveMessage AttributeNames).
const (
	attrSentTimestamp    = "SentTimestamp"
	attrReceiveCount     = "ApproximateReceiveCount"
	attrFirstReceive     = "ApproximateFirstReceiveTimestamp"
	attrSenderID         = "SenderId"
	attrGroupID          = "MessageGroupId"
	attrDedupID          = "MessageDeduplicationId"
	attrSequenceNumber   = "SequenceNumber"
	attrTraceHeader      = "AWSTraceHeader"
	attrDeadLetterSource = "DeadLetterQueueSourceArn"
)

// Decode translates a received SQS message into the model. A digest that is
// present must match; a malformed envelope, data type or system attribute is
// a *mapping.RejectError. A malformed AWSTraceHeader is left out and reported
// through opt.OnWarn: a trace is not worth dead-lettering a message for.
func Decode(msg types.Message, opt DecodeOptions) (*mapping.Message, error) {
	var body []byte // the wire body, hashed and then (usually) the model's
	if msg.Body != nil && *msg.Body != "" {
		body = []byte(*msg.Body)
	}
	if msg.MD5OfBody != nil {
		if sum := md5.Sum(body); !digestIs(*msg.MD5OfBody, sum) {
			return nil, mapping.Rejectf(Wire, "MD5OfBody", "corrupt: MD5OfBody is %q, the body hashes to %x", *msg.MD5OfBody, sum)
		}
	}
	if msg.MD5OfMessageAttributes != nil {
		if sum := md5Attrs(msg.MessageAttributes); !digestIs(*msg.MD5OfMessageAttributes, sum) {
			return nil, mapping.Rejectf(Wire, "MD5OfMessageAttributes", "corrupt: MD5OfMessageAttributes is %q, the attributes hash to %x",
				*msg.MD5OfMessageAttributes, sum)
		}
	}

	var env *mapping.Envelope
	if a, ok := msg.MessageAttributes[mapping.EnvelopeName]; ok {
		base, _, _ := strings.Cut(deref(a.DataType), ".")
		if base != mapping.BaseString || a.StringValue == nil {
			return nil, mapping.Rejectf(Wire, attrField(mapping.EnvelopeName), "malformed: data type %q, want %s",
				deref(a.DataType), mapping.EnvelopeDataType)
		}
		var err error
		if env, err = mapping.ParseEnvelope(*a.StringValue); err != nil {
			return nil, mapping.Rejectf(Wire, attrField(mapping.EnvelopeName), "malformed: %v", err)
		}
	}

	m := &mapping.Message{
		ID: deref(msg.MessageId),
		Source: mapping.Source{
			Protocol:    Wire,
			MessageID:   deref(msg.MessageId),
			Address:     opt.Address,
			LockToken:   deref(msg.ReceiptHandle),
			PartitionID: -1,
		},
	}
	if err := decodeAttributes(m, msg.MessageAttributes, env); err != nil {
		return nil, err
	}
	if err := decodeBody(m, body, env); err != nil {
		return nil, err
	}
	if err := decodeSystem(m, msg.Attributes, &opt); err != nil {
		return nil, err
	}
	// A FIFO send without any id made one up (madeUpDedupID; before it,
	// the SHA-256 of the body). That is no dedup id of the message's own:
	// an explicit one that looks the same travels in the envelope.
	if d := m.DedupID; (env == nil || env.Fields == nil || env.Fields.DedupID == "") &&
		(strings.HasPrefix(d, madeUpPrefix) || isBodyHash(d, body)) {
		m.DedupID = ""
	}
	if opt.DedupPerGroup && m.DedupID != "" && m.GroupKey != "" && (env == nil || env.Fields == nil || env.Fields.DedupID == "") {
		m.DedupID = scopedDedupID(m.GroupKey, m.DedupID)
	}
	if env != nil {
		if err := env.Apply(m); err != nil {
			return nil, mapping.Rejectf(Wire, attrField(mapping.EnvelopeName), "malformed: %v", err)
		}
		if len(env.Attrs) > 0 {
			slices.SortStableFunc(m.Attributes, func(a, b mapping.Attribute) int { return strings.Compare(a.Name, b.Name) })
		}
		// A FIFO send without an explicit dedup id used the ID (hashed when
		// SQS refuses it): the message had no DedupID.
		if f := env.Fields; f != nil && f.ID != "" && f.DedupID == "" && m.DedupID != "" &&
			(m.DedupID == m.ID || len(m.DedupID) == 64 && m.DedupID == hashID(m.ID)) {
			m.DedupID = ""
		}
	}
	return m, nil
}

func decodeAttributes(m *mapping.Message, attrs map[string]types.MessageAttributeValue, env *mapping.Envelope) error {
	n := len(attrs)
	if env != nil {
		n += len(env.Attrs) - 1
	}
	if n == 0 {
		return nil
	}
	var stack [16]string
	names := stack[:0]
	for name := range attrs {
		if name != mapping.EnvelopeName {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	m.Attributes = make([]mapping.Attribute, 0, n)
	for _, name := range names {
		v, err := decodeValue(name, attrs[name], env)
		if err != nil {
			return err
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: name, Value: v})
	}
	return nil
}

// decodeValue rebuilds a typed value from its wire form and, when the
// envelope records one, its model data type.
func decodeValue(name string, a types.MessageAttributeValue, env *mapping.Envelope) (mapping.Value, error) {
	dt := deref(a.DataType)
	wireBase, _, err := mapping.SplitDataType(dt)
	if err != nil {
		return mapping.Value{}, mapping.Rejectf(Wire, attrField(name), "%v", err)
	}
	if len(a.StringListValues) > 0 || len(a.BinaryListValues) > 0 {
		return mapping.Value{}, mapping.Rejectf(Wire, attrField(name), "list values are not supported (SQS reserves them)")
	}
	if wireBase == mapping.BaseBinary {
		if a.StringValue != nil {
			return mapping.Value{}, mapping.Rejectf(Wire, attrField(name), "data type %q with a StringValue", dt)
		}
	} else if a.BinaryValue != nil {
		return mapping.Value{}, mapping.Rejectf(Wire, attrField(name), "data type %q with a BinaryValue", dt)
	}
	want, noted := env.TypeOf(name)
	var v mapping.Value
	switch {
	case !noted && wireBase == mapping.BaseBinary:
		v, err = mapping.ParseBinary(dt, a.BinaryValue)
	case !noted:
		v, err = mapping.ParseValue(dt, deref(a.StringValue))
	case wireBase == mapping.BaseBinary && strings.HasPrefix(want, mapping.BaseBinary):
		v, err = mapping.ParseBinary(want, a.BinaryValue)
	case wireBase == mapping.BaseBinary:
		v, err = mapping.ParseValue(want, string(a.BinaryValue))
	default:
		v, err = mapping.ParseValue(want, deref(a.StringValue))
	}
	if err != nil {
		return mapping.Value{}, mapping.Rejectf(Wire, attrField(name), "%v", err)
	}
	return v, nil
}

func decodeBody(m *mapping.Message, body []byte, env *mapping.Envelope) error {
	b, err := env.DecodeBody(body)
	if err != nil {
		return mapping.Rejectf(Wire, "body", "%v", err)
	}
	m.Body = b
	return nil
}

func decodeSystem(m *mapping.Message, sys map[string]string, opt *DecodeOptions) error {
	for k, v := range sys {
		var err error
		switch k {
		case attrSentTimestamp:
			m.Source.EnqueuedTime, err = parseMillis(v)
		case attrFirstReceive:
			m.Source.FirstReceiveTime, err = parseMillis(v)
		case attrReceiveCount:
			m.Source.DeliveryCount, err = strconv.Atoi(v)
			if err == nil && m.Source.DeliveryCount < 0 {
				err = strconv.ErrRange
			}
		case attrSenderID:
			m.Source.SenderID = v
		case attrGroupID:
			m.GroupKey = v
		case attrDedupID:
			m.DedupID = v
		case attrSequenceNumber:
			m.Source.SequenceNumber = v
		case attrDeadLetterSource:
			m.Source.DeadLetterSource = v
		case attrTraceHeader:
			t, terr := mapping.ParseXRay(v)
			if terr != nil {
				opt.warn(attrTraceHeader, terr.Error())
				continue
			}
			m.Trace = t
		}
		// Other (future) system attributes are ignored.
		if err != nil {
			return mapping.Rejectf(Wire, k, "malformed %q: %v", v, err)
		}
	}
	return nil
}

func parseMillis(s string) (time.Time, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// isBodyHash reports whether d is hashID(body), without the copies of a
// body of up to 1 MiB that hashID(string(body)) makes.
func isBodyHash(d string, body []byte) bool {
	const digits = "0123456789abcdef"
	if len(d) != 2*sha256.Size {
		return false
	}
	sum := sha256.Sum256(body)
	for i, b := range sum {
		if d[2*i] != digits[b>>4] || d[2*i+1] != digits[b&0x0f] {
			return false
		}
	}
	return true
}

// scopedDedupID is a dedup id unique across a queue for id, unique within
// group: "group/id", valid wherever both are (SQS allows the same
// characters in both), or its hash where that is longer than the 128
// characters SQS and Service Bus take.
func scopedDedupID(group, id string) string {
	if s := group + "/" + id; len(s) <= 128 {
		return s
	}
	return "group-" + hashID(group+"\x00"+id) // not MadeUpIDPrefix: it is the message's own
}
