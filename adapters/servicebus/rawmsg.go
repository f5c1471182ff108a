package servicebus

import (
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// The SDK carries the whole AMQP message as an AMQPAnnotatedMessage (its
// mirror of go-amqp's amqp.Message, every section included); sbmap works
// on amqp.Message. These two functions convert field by field, so no
// section is lost either way.

// toAMQP converts a received message (RawAMQPMessage) for sbmap.Decode.
func toAMQP(am *azservicebus.AMQPAnnotatedMessage) *amqp.Message {
	m := &amqp.Message{
		DeliveryTag:           am.DeliveryTag,
		DeliveryAnnotations:   amqp.Annotations(am.DeliveryAnnotations),
		Annotations:           amqp.Annotations(am.MessageAnnotations),
		ApplicationProperties: am.ApplicationProperties,
		Data:                  am.Body.Data,
		Sequence:              am.Body.Sequence,
		Value:                 am.Body.Value,
		Footer:                amqp.Annotations(am.Footer),
	}
	if h := am.Header; h != nil {
		m.Header = &amqp.MessageHeader{Durable: h.Durable, Priority: h.Priority, TTL: h.TTL,
			FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
	}
	if p := am.Properties; p != nil {
		m.Properties = &amqp.MessageProperties{
			MessageID: p.MessageID, UserID: p.UserID, To: p.To, Subject: p.Subject, ReplyTo: p.ReplyTo,
			CorrelationID: p.CorrelationID, ContentType: p.ContentType, ContentEncoding: p.ContentEncoding,
			AbsoluteExpiryTime: p.AbsoluteExpiryTime, CreationTime: p.CreationTime, GroupID: p.GroupID,
			GroupSequence: p.GroupSequence, ReplyToGroupID: p.ReplyToGroupID,
		}
	}
	return m
}

// fromAMQP converts an encoded message (sbmap.Encode) for the SDK's
// SendAMQPAnnotatedMessage and AddAMQPAnnotatedMessage.
func fromAMQP(m *amqp.Message) *azservicebus.AMQPAnnotatedMessage {
	am := &azservicebus.AMQPAnnotatedMessage{
		ApplicationProperties: m.ApplicationProperties,
		Body:                  azservicebus.AMQPAnnotatedMessageBody{Data: m.Data, Sequence: m.Sequence, Value: m.Value},
		DeliveryAnnotations:   map[any]any(m.DeliveryAnnotations),
		MessageAnnotations:    map[any]any(m.Annotations),
		Footer:                map[any]any(m.Footer),
	}
	if h := m.Header; h != nil {
		am.Header = &azservicebus.AMQPAnnotatedMessageHeader{Durable: h.Durable, Priority: h.Priority, TTL: h.TTL,
			FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
	}
	if p := m.Properties; p != nil {
		am.Properties = &azservicebus.AMQPAnnotatedMessageProperties{
			MessageID: p.MessageID, UserID: p.UserID, To: p.To, Subject: p.Subject, ReplyTo: p.ReplyTo,
			CorrelationID: p.CorrelationID, ContentType: p.ContentType, ContentEncoding: p.ContentEncoding,
			AbsoluteExpiryTime: p.AbsoluteExpiryTime, CreationTime: p.CreationTime, GroupID: p.GroupID,
			GroupSequence: p.GroupSequence, ReplyToGroupID: p.ReplyToGroupID,
		}
	}
	return am
}
