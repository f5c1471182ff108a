package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/lru"
	"github.com/qbridge/qbridge/internal/parallel"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// sendParallel bounds the batches one Send call has in flight at once.
const sendParallel = 8

// NewSink returns a sink for a queue or topic, over AMQP (the Azure SDK)
// or HTTPS. onDrop (may be nil) is told about each item the Drop policy
// leaves out.
func NewSink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("servicebus sink: %w", err)
	}
	set.opt.OnDrop = onDrop
	if log == nil {
		log = slog.Default()
	}
	return newSink(ctx, set, log, nil)
}

func newSink(ctx context.Context, set *sinkSettings, log *slog.Logger, cred azcore.TokenCredential) (driver.Sink, error) {
	cred, err := set.conn.credentialFor(cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus sink: %w", err)
	}
	facts := readQueueFacts(ctx, set, log)
	set = set.withQueueLimit(facts.maxBytes)
	common := &sinkCommon{set: set, log: log, sessions: facts.sessions}
	if set.conn.https {
		return newHTTPSSink(common, cred), nil
	}
	// The sender's connection only receives management replies: no guard.
	var tlsErr atomic.Pointer[errBox]
	client, err := newSDKClient(set.conn, guardSettings{onTLSError: func(err error) { tlsErr.Store(&errBox{err}) }, dialLog: log}, cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus sink: %w", err)
	}
	snk := &amqpSink{sinkCommon: common, client: client, senders: newSenderCache(set.maxSenders)}
	if name := set.entity.String(); !strings.Contains(name, "{") {
		// A fixed entity: attach now, so that a wrong key or entity name
		// fails at start rather than with the first message.
		if err := snk.probe(ctx, name); err != nil {
			_ = client.Close(context.Background())
			if b := tlsErr.Load(); b != nil {
				err = b.err
			}
			err = fmt.Errorf("servicebus sink: %s: %w", name, err)
			if fatal(err) {
				// Refused for good (a key that does not sign, a missing
				// claim, no such entity): a migration fails at once; the
				// engine retries anyway.
				err = driver.Permanent(err)
			}
			return nil, err
		}
	}
	log.Info("servicebus sink: ready", "namespace", set.conn.description, set.entityField, set.entity.String(),
		"max_message_size", set.maxMessageSize)
	return snk, nil
}

// sinkCommon is what the AMQP and HTTPS sinks share.
type sinkCommon struct {
	set *sinkSettings
	log *slog.Logger
	// sessions: the sink's queue is session-enabled (as the management API
	// says, where it can: readQueueFacts), so a message without a
	// group key is refused here. Left to the broker, its refusal
	// (com.microsoft:argument-error) looked like a lost connection to the
	// SDK, which retried each send for some 50 s, and a migration stalled
	// where its dry run had promised dead letters.
	sessions bool
	lastErr  atomic.Pointer[errBox]
}

// target resolves the entity of m and applies default_session.
func (s *sinkCommon) target(m *mapping.Message) (string, *mapping.Message, error) {
	entity, err := s.set.entity.Execute(m)
	if err != nil {
		return "", nil, err
	}
	if err := entityName(s.set.entityField, entity, false); err != nil || entity == "" {
		if err == nil {
			err = errors.New("empty")
		}
		return "", nil, mapping.Rejectf(sbmap.Wire, s.set.entityField, "template %q yields an unusable entity name: %v", s.set.entity.String(), err)
	}
	if m.GroupKey == "" && s.set.defaultSession != "" {
		c := *m
		c.GroupKey = s.set.defaultSession
		m = &c
	}
	if s.sessions && m.GroupKey == "" {
		return "", nil, mapping.Rejectf(sbmap.Wire, "SessionId", "queue %q is session-enabled and the message has no group key: give messages one (mapping { group_key = ... }) or set default_session", s.set.entity.String())
	}
	// The AMQP header holds at most 49.7 days of TTL. Service Bus caps a
	// message's TTL at the entity's default anyway, so under the reject
	// policy a longer TTL is capped rather than refused (drop and encode
	// keep their own rules: leave it out, or cap and carry the exact TTL).
	if !s.set.conn.https && m.TTL > amqpmap.MaxTTL && s.set.opt.Policy == mapping.Reject {
		c := *m
		c.TTL = amqpmap.MaxTTL
		m = &c
	}
	return entity, m, nil
}

// batchKey is what the messages of one batch share: the entity, and the
// partition (PartitionKey, else SessionId): a partitioned entity takes a
// batch for one partition only.
type batchKey struct{ entity, partition string }

func partitionOf(m *mapping.Message) string {
	if m.PartitionKey != "" {
		return m.PartitionKey
	}
	return m.GroupKey
}

// groupBy splits the indexes of items by key, keeping their order.
func groupBy[T any](items []T, key func(T) batchKey) ([]batchKey, map[batchKey][]T) {
	var order []batchKey
	groups := map[batchKey][]T{}
	for _, it := range items {
		k := key(it)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	return order, groups
}

// eachGroup runs send for every group, sendParallel at a time (groups of
// distinct sessions are a message each).
func eachGroup[T any](order []batchKey, groups map[batchKey][]T, send func(batchKey, []T)) {
	parallel.Each(len(order), sendParallel, func(i int) { send(order[i], groups[order[i]]) })
}

// sessionHint explains a refusal that names sessions.
func sessionHint(err error) error {
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "session") {
		return fmt.Errorf("%w (a session-enabled entity needs a SessionId: give messages a group key or set default_session)", err)
	}
	return err
}

func (s *sinkCommon) record(err error) {
	if err == nil || driver.IsPermanent(err) {
		s.lastErr.Store(nil)
		return
	}
	s.lastErr.Store(&errBox{err})
}

// Ready reports the last send failure, if the last send failed for a
// reason other than the message.
func (s *sinkCommon) Ready(context.Context) error {
	if b := s.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// senderCache keeps the most recently used senders, one per entity.
type senderCache = lru.Cache[string, *azservicebus.Sender]

// newSenderCache keeps n senders (beyond those in use). An evicted sender
// is closed once no Send uses it, within settleTimeout (the cache gives an
// eviction's close context.Background(), and a context that never ends is
// bounded so); at Close, within Close's context.
func newSenderCache(n int) *senderCache {
	return lru.New[string](n, func(ctx context.Context, snd *azservicebus.Sender) error {
		if ctx.Done() == nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, settleTimeout)
			defer cancel()
		}
		return snd.Close(ctx)
	})
}
