package sqs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

var errSettled = errors.New("sqs: delivery already settled")

// delivery is one received message and its receipt handle.
type delivery struct {
	src       *Source
	msg       *mapping.Message
	decodeErr error
	id        string
	handle    string
	// deadline is when the message becomes visible again (unix nanoseconds),
	// as far as the source knows.
	deadline atomic.Int64
	settled  atomic.Bool
}

var (
	_ driver.Delivery      = (*delivery)(nil)
	_ driver.DecodeErrorer = (*delivery)(nil)
)

// newDelivery decodes a received message.
func (s *Source) newDelivery(raw types.Message, received time.Time) *delivery {
	d := &delivery{src: s, id: aws.ToString(raw.MessageId), handle: aws.ToString(raw.ReceiptHandle)}
	if s.visTimeout > 0 {
		d.deadline.Store(received.Add(s.visTimeout).UnixNano())
	} else {
		d.deadline.Store(math.MaxInt64) // a visibility of 0 s: no deadline to watch
	}
	m, err := sqsmap.Decode(raw, sqsmap.DecodeOptions{
		Address:       s.queue.url,
		DedupPerGroup: s.queue.dedupPerGroup,
		OnWarn: func(field, reason string) {
			s.log.Warn("sqs: left out of a received message", "message_id", d.id, "field", field, "reason", reason)
		},
	})
	if err != nil {
		s.stats.corrupt.Add(1)
		s.undecodableLog.Do(func(leftOut int64) {
			s.log.Error("sqs: received a message that cannot be decoded; it must be dead-lettered",
				"message_id", d.id, "error", err, logpace.LeftOutKey, leftOut)
		})
		d.decodeErr = err
		d.msg = rawMessage(raw, s.queue.url, err)
		return d
	}
	d.msg = m
	return d
}

// rawMessage keeps what can be trusted of an undecodable message for the
// dead-letter sink. Where the digests matched (they are checked first), the
// message attributes are trusted: it is decoded without its carry envelope
// (the usual culprit), whose text travels on as the attribute
// mapping.RefusedEnvelopeAttr. Otherwise, or if that fails too: the body as
// received, the message id and the system attributes.
func rawMessage(raw types.Message, address string, cause error) *mapping.Message {
	var rej *mapping.RejectError
	digestsOK := errors.As(cause, &rej) && rej.Field != "MD5OfBody" && rej.Field != "MD5OfMessageAttributes"
	if env, ok := raw.MessageAttributes[mapping.EnvelopeName]; ok && digestsOK {
		attrs := make(map[string]types.MessageAttributeValue, len(raw.MessageAttributes))
		for k, v := range raw.MessageAttributes {
			if k != mapping.EnvelopeName {
				attrs[k] = v
			}
		}
		bare := raw
		bare.MessageAttributes, bare.MD5OfMessageAttributes = attrs, nil // its digest matched
		if m, err := sqsmap.Decode(bare, sqsmap.DecodeOptions{Address: address}); err == nil {
			m.SetAttr(mapping.RefusedEnvelopeAttr, mapping.String(aws.ToString(env.StringValue)))
			return m
		}
	}
	bare := types.Message{Body: raw.Body, MessageId: raw.MessageId, ReceiptHandle: raw.ReceiptHandle, Attributes: raw.Attributes}
	if m, err := sqsmap.Decode(bare, sqsmap.DecodeOptions{Address: address}); err == nil {
		return m
	}
	return &mapping.Message{
		Body: []byte(aws.ToString(raw.Body)),
		ID:   aws.ToString(raw.MessageId),
		Source: mapping.Source{Protocol: sqsmap.Wire, Address: address,
			LockToken: aws.ToString(raw.ReceiptHandle), PartitionID: -1},
	}
}

func (d *delivery) Message() *mapping.Message { return d.msg }

// DecodeError is the reason the message could not be decoded, or nil.
func (d *delivery) DecodeError() error { return d.decodeErr }

// Ack deletes the message (DeleteMessageBatch, coalesced with other acks).
func (d *delivery) Ack(ctx context.Context) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	if err := d.src.deleter.do(ctx, d.handle); err != nil {
		return fmt.Errorf("sqs: ack message %s: %w", d.id, err)
	}
	return nil
}

// Nack makes the message visible again after delay, raised to the source's
// nack_backoff.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	delay = max(delay, d.src.set.nackBackoff)
	secs := visibilitySeconds(delay)
	if err := d.src.visibility.do(ctx, visItem{d.handle, secs}); err != nil {
		return fmt.Errorf("sqs: nack message %s: %w", d.id, err)
	}
	if secs == 0 {
		d.src.releasedAt.Store(time.Now().UnixNano())
	}
	return nil
}

// Release makes a message the engine never sent visible again at once
// (driver.Releaser: the shutdown hand-back), with no nack_backoff: it did
// not fail. SQS has counted its receive already (ApproximateReceiveCount);
// nothing undoes that.
func (d *delivery) Release(ctx context.Context) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	if err := d.src.visibility.do(ctx, visItem{d.handle, 0}); err != nil {
		return fmt.Errorf("sqs: release message %s: %w", d.id, err)
	}
	d.src.releasedAt.Store(time.Now().UnixNano())
	return nil
}

// Extend keeps the message invisible for at least dur more (rounded up to
// whole seconds; SQS allows at most 12 hours from the first receipt). A
// settled delivery is not extended.
func (d *delivery) Extend(ctx context.Context, dur time.Duration) error {
	if d.settled.Load() {
		return nil
	}
	secs := max(visibilitySeconds(dur), 1)
	start := time.Now()
	if err := d.src.visibility.do(ctx, visItem{d.handle, secs}); err != nil {
		if d.settled.Load() {
			return nil // settled meanwhile: nothing left to extend
		}
		return fmt.Errorf("sqs: extend message %s: %w", d.id, err)
	}
	d.deadline.Store(start.Add(time.Duration(secs) * time.Second).UnixNano())
	return nil
}

// expired reports whether the message is (nearly) visible again, so handing
// it to the engine now would process a message another consumer may have.
func (d *delivery) expired(now time.Time) bool {
	margin := min(handoverMargin, d.src.visTimeout/10)
	return now.Add(margin).UnixNano() >= d.deadline.Load()
}
