package servicebus

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// amqpSink sends with the Azure SDK: messages of one entity and partition
// go out as batches (one transfer each, within the link's batch size);
// scheduled messages, and a message alone, as single sends.
type amqpSink struct {
	*sinkCommon
	client  *azservicebus.Client
	senders *senderCache

	closeOnce sync.Once
}

var (
	_ driver.Sink         = (*amqpSink)(nil)
	_ driver.ReadyChecker = (*amqpSink)(nil)
)

// outgoing is one encoded message of a Send call.
type outgoing struct {
	idx       int
	entity    string
	partition string
	single    bool // scheduled: sent on its own
	msg       *azservicebus.AMQPAnnotatedMessage
}

// Send encodes every message (sbmap) and sends them; errors are per
// message. A message too large for the entity, or one the broker refuses
// for good, gets a driver.Permanent error.
func (s *amqpSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	var items []outgoing
	for i, m := range msgs {
		entity, mm, err := s.target(m)
		if err != nil {
			errs[i] = err
			continue
		}
		am, err := sbmap.Encode(mm, s.set.opt)
		if err != nil {
			errs[i] = err
			continue
		}
		items = append(items, outgoing{idx: i, entity: entity, partition: partitionOf(mm),
			single: !mm.ScheduledAt.IsZero(), msg: fromAMQP(am)})
	}
	order, groups := groupBy(items, func(o outgoing) batchKey { return batchKey{o.entity, o.partition} })
	eachGroup(order, groups, func(k batchKey, items []outgoing) {
		snd, release, err := s.senders.Acquire(ctx, k.entity, func() (*azservicebus.Sender, error) { return s.client.NewSender(k.entity, nil) })
		if err != nil {
			for _, it := range items {
				errs[it.idx] = s.sendErr(k.entity, err)
			}
			return
		}
		// The cache closes a sender pushed out meanwhile at this release.
		defer release()
		s.sendGroup(ctx, snd, k.entity, items, errs)
	})
	for _, err := range errs {
		if err != nil {
			s.record(err)
			return errs
		}
	}
	s.record(nil)
	return errs
}

// sendGroup sends the messages of one entity and partition in order.
func (s *amqpSink) sendGroup(ctx context.Context, snd *azservicebus.Sender, entity string, items []outgoing, errs []error) {
	var batch *azservicebus.MessageBatch
	var in []outgoing
	flush := func() {
		defer func() { batch, in = nil, nil }()
		switch len(in) {
		case 0:
			return
		case 1:
			s.sendOne(ctx, snd, entity, in[0], errs)
			return
		}
		octx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
		err := snd.SendMessageBatch(octx, batch, nil)
		cancel()
		if err != nil && permanentSend(err) {
			// One message may be the cause: find it by sending one by one
			// (a batch is all or nothing, so none of them was enqueued).
			s.log.Warn("servicebus sink: a batch was refused; sending its messages one by one", "entity", entity, "messages", len(in), "error", err)
			for _, it := range in {
				s.sendOne(ctx, snd, entity, it, errs)
			}
			return
		}
		for _, it := range in {
			errs[it.idx] = s.sendErr(entity, err)
		}
	}
	for _, it := range items {
		if it.single {
			flush()
			s.sendOne(ctx, snd, entity, it, errs)
			continue
		}
		newBatch := func() error {
			octx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
			defer cancel()
			b, err := snd.NewMessageBatch(octx, nil)
			batch = b
			return err
		}
		if batch == nil {
			if err := newBatch(); err != nil {
				errs[it.idx] = s.sendErr(entity, err)
				continue
			}
		}
		err := batch.AddAMQPAnnotatedMessage(it.msg, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && len(in) > 0 {
			flush() // the batch is full: send it, start another
			if err = newBatch(); err != nil {
				errs[it.idx] = s.sendErr(entity, err)
				continue
			}
			err = batch.AddAMQPAnnotatedMessage(it.msg, nil)
		}
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			// larger than a batch can be: alone, the link says whether it fits
			batch = nil
			s.sendOne(ctx, snd, entity, it, errs)
			continue
		}
		if err != nil {
			errs[it.idx] = fmt.Errorf("servicebus: batch: %w", err)
			continue
		}
		in = append(in, it)
	}
	flush()
}

func (s *amqpSink) sendOne(ctx context.Context, snd *azservicebus.Sender, entity string, it outgoing, errs []error) {
	octx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
	defer cancel()
	errs[it.idx] = s.sendErr(entity, snd.SendAMQPAnnotatedMessage(octx, it.msg, nil))
}

// probe attaches the sender link of entity (creating a batch asks the
// link for its size limit).
func (s *amqpSink) probe(ctx context.Context, entity string) error {
	snd, release, err := s.senders.Acquire(ctx, entity, func() (*azservicebus.Sender, error) { return s.client.NewSender(entity, nil) })
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
	defer cancel()
	_, err = snd.NewMessageBatch(ctx, nil)
	return err
}

// permanentSend reports whether the broker refused a send for good.
func permanentSend(err error) bool {
	return errors.Is(err, azservicebus.ErrMessageTooLarge) || fatal(err)
}

// sendErr classifies a send error: refusals retrying cannot fix are
// driver.Permanent (too large, unauthorized for the entity, no such
// entity, not allowed).
func (s *sinkCommon) sendErr(entity string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, azservicebus.ErrMessageTooLarge) || condition(err) == amqp.ErrCondMessageSizeExceeded:
		// Too large, as the encoder's own limit says (reason too-large):
		// the entity takes less than the sink's max_message_size.
		return driver.Permanent(fmt.Errorf("servicebus: %s: %w: %w", entity,
			mapping.TooLargef(sbmap.Wire, "message", "the entity takes less than this message and refused it (the sink's max_message_size is %d: set it to the entity's maximum message size to refuse such messages before sending)", s.set.maxMessageSize), err))
	case unauthorized(err):
		// The sink's credentials, not the message: retried (the
		// pipeline stalls and says why), never a dead letter.
		return fmt.Errorf("servicebus: %s: %w", entity, err)
	case fatal(err):
		return driver.Permanent(fmt.Errorf("servicebus: %s: %w", entity, sessionHint(err)))
	case condition(err) == serverBusy:
		return driver.Throttled(fmt.Errorf("servicebus: %s: %w", entity, err))
	}
	return fmt.Errorf("servicebus: %s: %w", entity, err)
}

// Close closes the senders and the connection.
func (s *amqpSink) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		err = errors.Join(s.senders.Close(ctx), s.client.Close(ctx))
	})
	return err
}
