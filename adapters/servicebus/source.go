package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/amqpguard"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/lockhold"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// NewSource returns a source for a queue or subscription: over AMQP (the
// Azure SDK; a session receiver with a sessions block) or over HTTPS.
func NewSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Source, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("servicebus source: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return newSource(ctx, set, log, nil)
}

// newSource takes a credential for tests (nil: from the configuration).
func newSource(ctx context.Context, set *sourceSettings, log *slog.Logger, cred azcore.TokenCredential) (driver.Source, error) {
	cred, err := set.conn.credentialFor(cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus source: %w", err)
	}
	if set.browse {
		return newBrowseSource(ctx, set, log, cred)
	}
	if set.conn.https {
		return newHTTPSSource(set, log, cred), nil
	}
	c := &amqpCommon{set: set, log: log, poison: amqpguard.NewLog(), closed: make(chan struct{}), undecodableLog: logpace.PerMessage()}
	c.hold = lockhold.New(set.lockRenewal, log, "servicebus source")
	client, err := newSDKClient(set.conn, guardSettings{mode: c.guardMode, log: c.poison, onPoison: c.onPoison,
		onTLSError: func(err error) { c.tlsErr.Store(&errBox{err}) }, dialLog: log}, cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus source: %w", err)
	}
	c.client = client
	if set.sessions {
		return newSessionSource(c), nil
	}
	rcv, err := set.newReceiver(client)
	if err != nil {
		_ = client.Close(context.Background())
		return nil, fmt.Errorf("servicebus source: %w", err)
	}
	if err := c.probe(ctx, rcv); err != nil {
		_ = rcv.Close(context.Background())
		_ = client.Close(context.Background())
		return nil, err
	}
	log.Info("servicebus source: ready", "namespace", set.conn.description, "entity", set.entityPath,
		"max_messages", set.maxMessages, "decode_guard", set.guard)
	return &amqpSource{amqpCommon: c, rcv: rcv, bo: backoff.Backoff{Base: set.conn.backoff, Max: set.conn.backoffMax}}, nil
}

// probe peeks once: a receiver connects nothing until its first receive
// (the SDK attaches then), so an unreachable namespace, a key that does
// not sign or a missing entity made a source that said ready (and a
// migration's -connect-timeout did not apply) until that receive failed,
// some 50 s later. A peek takes no lock and settles nothing; it starts
// past the last sequence number, so that no message comes back: the peek
// reply is not behind the decode guard, and a message go-amqp cannot
// decode there would close the connection.
func (c *amqpCommon) probe(ctx context.Context, rcv *azservicebus.Receiver) error {
	ctx, cancel := context.WithTimeout(ctx, c.set.receiveWait)
	defer cancel()
	past := int64(math.MaxInt64)
	_, err := rcv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &past})
	if err == nil {
		return nil
	}
	err, permanent := c.fatalErr(err)
	err = fmt.Errorf("servicebus source: %s: %w", c.set.entityPath, explain(err, false))
	if permanent {
		// Refused for good: a migration fails at once; the engine
		// retries anyway.
		err = driver.Permanent(err)
	}
	return err
}

// newReceiver opens a peek-lock receiver on the configured entity or its
// dead-letter or transfer dead-letter subqueue: the source's receiver, and
// the browsing one's (peeked messages carry no lock, so the mode is moot).
func (set *sourceSettings) newReceiver(client *azservicebus.Client) (*azservicebus.Receiver, error) {
	opts := &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModePeekLock}
	switch set.subQueue {
	case subQueueDeadLetter:
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	case subQueueTransferDL:
		opts.SubQueue = azservicebus.SubQueueTransfer
	}
	if set.queue != "" {
		return client.NewReceiverForQueue(set.queue, opts)
	}
	return client.NewReceiverForSubscription(set.topic, set.subscription, opts)
}

// settleTimeout bounds a settlement or renewal the adapter makes on its
// own: the holder's bound (lockhold), one value for both.
const settleTimeout = lockhold.ReleaseTimeout

// amqpCommon is what the plain and the session source share.
type amqpCommon struct {
	set            *sourceSettings
	log            *slog.Logger
	undecodableLog *logpace.Pacer // the log line of an undecodable message
	client         *azservicebus.Client
	poison         *amqpguard.Log
	hold           *lockhold.Holder

	closeOnce sync.Once
	closed    chan struct{}

	undecodable atomic.Int64 // messages the guard replaced
	lastErr     atomic.Pointer[errBox]
	guardFull   atomic.Bool // escalated from scan to full
	tlsErr      atomic.Pointer[errBox]
}

// fatalErr says whether a receive error is one retrying cannot fix, and
// gives the most useful form of it: the SDK reports a certificate that
// fails verification as a lost connection.
func (c *amqpCommon) fatalErr(err error) (error, bool) {
	if b := c.tlsErr.Load(); b != nil {
		return b.err, true
	}
	return err, fatal(err)
}

// guardMode is the decode guard's mode for the next connection.
func (c *amqpCommon) guardMode() string {
	if c.set.guard == guardScan && c.guardFull.Load() {
		return guardFull
	}
	return c.set.guard
}

// undecodable handles a receive error that says go-amqp could not decode a
// message (the link closed with "decimal128 not implemented"): the scan
// let it through, so the guard runs the full decoder from the next
// connection on; without a guard, the message is redelivered until the
// broker dead-letters it (MaxDeliveryCount).
func (c *amqpCommon) undecodableErr(err error) {
	typ, ok := amqpmap.UndecodableType(err)
	switch {
	case !ok:
	case c.set.guard == guardScan:
		if !c.guardFull.Swap(true) {
			c.log.Warn("servicebus source: the AMQP client failed to decode a message the decode guard's scan let through; the guard runs the full decoder from the next connection on",
				"entity", c.set.entityPath, "type", typ, "error", err)
		}
	default:
		c.log.Error("servicebus source: the AMQP client cannot decode the message at the head of the entity and closed the link; it is redelivered until the broker dead-letters it (MaxDeliveryCount)",
			"entity", c.set.entityPath, "type", typ, "decode_guard", c.set.guard)
	}
}

type errBox struct{ err error }

func (c *amqpCommon) onPoison(reason string, size int) {
	c.undecodable.Add(1)
	c.log.Warn("servicebus source: a message the AMQP client cannot decode arrived", "reason", reason, "bytes", size)
}

func (c *amqpCommon) setErr(err error) {
	if err == nil {
		c.lastErr.Store(nil)
		return
	}
	c.lastErr.Store(&errBox{err})
}

// Ready reports the last receive failure, if the last receive failed.
func (c *amqpCommon) Ready(context.Context) error {
	select {
	case <-c.closed:
		return errClosed
	default:
	}
	if b := c.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// RawMessageContentType is the content type of the message an undecodable
// delivery carries (driver.DecodeErrorer): its body is the AMQP encoding of
// the received message, every section as it came on the wire. (The same
// value as the amqp adapter's: adapters do not import each other.)
const RawMessageContentType = "application/vnd.qbridge.amqp-message"

// wrap makes a driver.Delivery of a received message. One the guard
// replaced comes back with its original bytes and a DecodeError, for the
// engine to dead-letter (its dead_letter sink, or this entity's dead-letter
// queue, counted either way); on a sub-queue, which cannot dead-letter, it
// is deferred here and nil returned.
func (c *amqpCommon) wrap(rcv settler, rm *azservicebus.ReceivedMessage, renew func(context.Context) (time.Time, error)) driver.Delivery {
	d := newDelivery(rcv, rm, c.hold, c.set.maxNackDelay, renew)
	if rm.RawAMQPMessage != nil {
		if info, ok := c.poison.Match(rm.RawAMQPMessage.MessageAnnotations); ok {
			if c.set.subQueue != "" {
				c.deferPoison(d, info)
				return nil
			}
			d.m, d.err = c.poisonModel(rm, info), errors.New("the AMQP client cannot decode the message: "+info.Reason)
			return dlDelivery{d}
		}
	}
	d.m, d.err = decodeReceived(rm, c.set.entityPath)
	if d.err != nil {
		c.log.Error("servicebus source: cannot decode a received message; it must be dead-lettered",
			"entity", c.set.entityPath, "message_id", rm.MessageID, "error", d.err)
	}
	if c.set.subQueue != "" {
		return d // a dead-letter queue cannot dead-letter again
	}
	return dlDelivery{d}
}

// poisonModel is the message of an undecodable delivery: the original AMQP
// bytes as body (RawMessageContentType) and the ids and broker facts the SDK
// read from the guard's stub.
func (c *amqpCommon) poisonModel(rm *azservicebus.ReceivedMessage, info amqpguard.Info) *mapping.Message {
	m := rawModel(rm)
	m.Body, m.BodyType, m.ContentType = info.Raw, mapping.BodyData, RawMessageContentType
	m.Source.Address = c.set.entityPath
	var seq any
	if rm.SequenceNumber != nil {
		seq = *rm.SequenceNumber
	}
	c.undecodableLog.Do(func(leftOut int64) {
		c.log.Warn("servicebus source: a message cannot be decoded; handed to the pipeline to dead-letter (reason corrupt)",
			"entity", c.set.entityPath, "message_id", rm.MessageID, "sequence_number", seq, "reason", info.Reason, "size", info.Size, logpace.LeftOutKey, leftOut)
	})
	return m
}

// deferPoison sets aside a message of a sub-queue the AMQP client cannot
// decode (a sub-queue cannot dead-letter again): deferred, it stays in the
// dead-letter queue, receivable by sequence number.
func (c *amqpCommon) deferPoison(d *delivery, info amqpguard.Info) {
	defer d.finish()
	d.settled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var seq any
	if d.rm.SequenceNumber != nil {
		seq = *d.rm.SequenceNumber
	}
	err := d.rcv.DeferMessage(ctx, d.rm, nil)
	c.log.Error("servicebus source: deferred an undecodable message of the sub-queue (it cannot be dead-lettered again); receive it by sequence number to inspect it",
		"entity", c.set.entityPath, "message_id", d.rm.MessageID, "sequence_number", seq, "reason", info.Reason, "error", err)
}

// amqpSource receives from a queue or subscription (not session-enabled).
type amqpSource struct {
	*amqpCommon
	rcv *azservicebus.Receiver

	mu sync.Mutex // the SDK's receiver takes one receive call at a time
	bo backoff.Backoff
}

var (
	_ driver.Source       = (*amqpSource)(nil)
	_ driver.ReadyChecker = (*amqpSource)(nil)
)

// Receive blocks until messages arrive, ctx ends or the source fails for
// good (bad credentials, no such entity). Transient failures are retried
// with backoff (the SDK recovers its links itself).
func (s *amqpSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := max(1, min(limit, s.set.maxMessages))
	for {
		select {
		case <-s.closed:
			return nil, errClosed
		default:
		}
		msgs, err := s.receive(ctx, n)
		out := make([]driver.Delivery, 0, len(msgs))
		for _, rm := range msgs {
			if d := s.wrap(s.rcv, rm, s.renewer(rm)); d != nil {
				out = append(out, d)
			}
		}
		if len(out) > 0 {
			s.bo.Reset()
			s.setErr(nil)
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(msgs) > 0 {
			continue // every one was undecodable and is settled
		}
		if err == nil {
			err = errors.New("the receiving link failed; the SDK recovers it")
		}
		s.setErr(err)
		s.undecodableErr(err)
		if ferr, ok := s.fatalErr(err); ok {
			// Permanent: a migration fails at once (refused credentials, a
			// missing claim); the engine reopens the source anyway.
			return nil, driver.Permanent(fmt.Errorf("servicebus source: %s: %w", s.set.entityPath, explain(ferr, false)))
		}
		wait := s.bo.Next()
		s.log.Warn("servicebus source: receive failed; retrying", "entity", s.set.entityPath, "error", err, "retry_in", wait.Round(time.Millisecond))
		if err := backoff.Sleep(ctx, s.closed, errClosed, wait); err != nil {
			return nil, err
		}
	}
}

// receive calls the SDK, turning a panic in it into an error: the SDK
// type-asserts some broker properties and panics on unexpected types.
func (s *amqpSource) receive(ctx context.Context, n int) (msgs []*azservicebus.ReceivedMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			msgs, err = nil, fmt.Errorf("the Service Bus SDK panicked reading a message (the broker redelivers it when its lock expires, and dead-letters it after MaxDeliveryCount): %v", r)
		}
	}()
	return s.rcv.ReceiveMessages(ctx, n, nil)
}

func (s *amqpSource) renewer(rm *azservicebus.ReceivedMessage) func(context.Context) (time.Time, error) {
	var mu sync.Mutex // RenewMessageLock writes rm.LockedUntil
	return func(ctx context.Context) (time.Time, error) {
		mu.Lock()
		defer mu.Unlock()
		if err := s.rcv.RenewMessageLock(ctx, rm, nil); err != nil {
			return time.Time{}, err
		}
		return lockedUntil(rm), nil
	}
}

// Close abandons the messages held for a Nack delay, closes the receiver
// and the connection; unsettled messages come back when their locks
// expire.
func (s *amqpSource) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.hold.Close(ctx)
		// A receive call in progress ends with the receiver's close.
		err = errors.Join(s.rcv.Close(ctx), s.client.Close(ctx))
	})
	return err
}
