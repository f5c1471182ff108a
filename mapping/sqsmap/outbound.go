package sqsmap

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Outbound is one message ready to send to SQS.
type Outbound struct {
	Body             string
	Attributes       map[string]types.MessageAttributeValue       // nil when none
	SystemAttributes map[string]types.MessageSystemAttributeValue // AWSTraceHeader; nil when none
	GroupID          string                                       // MessageGroupId; "" on standard queues
	DedupID          string                                       // MessageDeduplicationId; "" when not sent
	DelaySeconds     int32                                        // 0: the queue's default delay
}

// SendMessageInput builds the SendMessage request for queueURL. The maps are
// shared with o.
func (o *Outbound) SendMessageInput(queueURL string) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{
		QueueUrl:                &queueURL,
		MessageBody:             &o.Body,
		MessageAttributes:       o.Attributes,
		MessageSystemAttributes: o.SystemAttributes,
		MessageGroupId:          optString(o.GroupID),
		MessageDeduplicationId:  optString(o.DedupID),
		DelaySeconds:            o.DelaySeconds,
	}
}

// BatchEntry builds a SendMessageBatch entry with the given entry id.
func (o *Outbound) BatchEntry(id string) types.SendMessageBatchRequestEntry {
	return types.SendMessageBatchRequestEntry{
		Id:                      &id,
		MessageBody:             &o.Body,
		MessageAttributes:       o.Attributes,
		MessageSystemAttributes: o.SystemAttributes,
		MessageGroupId:          optString(o.GroupID),
		MessageDeduplicationId:  optString(o.DedupID),
		DelaySeconds:            o.DelaySeconds,
	}
}

// Size is the message size as SQS accounts it against the limit: the body
// plus every message attribute's name, data type and value. System
// attributes, group and dedup ids do not count.
func (o *Outbound) Size() int {
	n := len(o.Body)
	for name, a := range o.Attributes {
		n += attrSize(name, deref(a.DataType), len(deref(a.StringValue))+len(a.BinaryValue))
	}
	return n
}

func attrSize(name, dt string, valueLen int) int { return len(name) + len(dt) + valueLen }

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
