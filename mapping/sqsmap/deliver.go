package sqsmap

import (
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Deliver returns what SQS hands a consumer (ReceiveMessage with
// AttributeNames All and MessageAttributeNames All) for the send o: the
// body, the attributes with both digests, and the system attributes
// SentTimestamp, ApproximateReceiveCount (1), ApproximateFirstReceiveTimestamp
// (sent plus the delay), MessageGroupId, MessageDeduplicationId and
// AWSTraceHeader. It does not invent SenderId or SequenceNumber, nor the
// dedup id SQS derives under content-based deduplication.
func Deliver(o *Outbound, messageID, receiptHandle string, sent time.Time) types.Message {
	body := o.Body
	md5Body := MD5OfBody(body)
	msg := types.Message{
		Body:          &body,
		MD5OfBody:     &md5Body,
		MessageId:     optString(messageID),
		ReceiptHandle: optString(receiptHandle),
	}
	if len(o.Attributes) > 0 {
		msg.MessageAttributes = maps.Clone(o.Attributes)
		d := MD5OfAttributes(o.Attributes)
		msg.MD5OfMessageAttributes = &d
	}
	sys := map[string]string{
		attrSentTimestamp: strconv.FormatInt(sent.UnixMilli(), 10),
		attrReceiveCount:  "1",
		attrFirstReceive:  strconv.FormatInt(sent.Add(time.Duration(o.DelaySeconds)*time.Second).UnixMilli(), 10),
	}
	if o.GroupID != "" {
		sys[attrGroupID] = o.GroupID
	}
	if o.DedupID != "" {
		sys[attrDedupID] = o.DedupID
	}
	if h, ok := o.SystemAttributes[attrTraceHeader]; ok && h.StringValue != nil {
		sys[attrTraceHeader] = *h.StringValue
	}
	msg.Attributes = sys
	return msg
}
