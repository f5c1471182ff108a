package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// The hooks of qbridge migrate (docs/adapter-servicebus.md, "Counting,
// browsing and dead-letter queues"): counts from the management API's
// runtime properties, browsing by peek, the dead-letter sub-queue, and a
// sink that encodes without sending.

var (
	_ driver.Source  = (*browseSource)(nil)
	_ driver.Browser = (*browseSource)(nil)
	_ driver.Sink    = (*drySink)(nil)
)

// CountSource reads the source entity's runtime properties
// (https://learn.microsoft.com/en-us/azure/service-bus-messaging/message-counters):
// ActiveMessageCount is Ready, ScheduledMessageCount Scheduled,
// DeadLetterMessageCount DeadLetter. Reading a dead-letter sub-queue, its
// count is Ready.
func CountSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Backlog, error) {
	set, err := cfg.resolve()
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("servicebus source: %w", err)
	}
	ac, err := newAdminClient(set.conn, nil)
	if err != nil {
		return driver.Backlog{}, err
	}
	var c counts
	if set.queue != "" {
		c, err = queueCounts(ctx, ac, set.queue)
	} else {
		c, err = subscriptionCounts(ctx, ac, set.topic, set.subscription)
	}
	if err != nil {
		return driver.Backlog{}, err
	}
	// Each receive that is not completed raises DeliveryCount, an abandon
	// included: a dry run that cannot peek (sessions, HTTPS) receives and
	// abandons its sample, and records what it raised under Entity (a
	// sub-queue's path names it).
	entity := "servicebus " + strings.ToLower(set.conn.namespace) + "/" + strings.ToLower(set.entityPath)
	switch set.subQueue {
	case subQueueDeadLetter: // made and numbered with its entity
		return driver.Backlog{Ready: c.DeadLetter, Created: c.Created, Entity: entity, ReceivesCounted: true}, nil
	case subQueueTransferDL:
		return driver.Backlog{Ready: c.transferDeadLetter, Created: c.Created, Entity: entity, ReceivesCounted: true}, nil
	}
	c.Entity, c.ReceivesCounted = entity, true
	c.Ordered = set.sessions // a session is received in order
	if set.sessions {
		// A failed listing leaves the message counts standing.
		if n, err := sessionCount(ctx, set); err != nil {
			if log != nil {
				log.Warn("servicebus: cannot list the entity's sessions; the session count is absent", "error", err)
			}
		} else {
			c.Sessions, c.HasSessions = n, true
		}
	}
	return c.Backlog, nil
}

// maxListedSessions bounds a session listing (100 IDs a round trip): a
// count polled every 30 s does not page through more.
const maxListedSessions = 10000

// sessionCount counts the session entity's sessions that have messages or
// session state, with the official client's session pager (the
// get-message-sessions management operation), at most maxListedSessions.
func sessionCount(ctx context.Context, set *sourceSettings) (int64, error) {
	cred, err := set.conn.credentialFor(nil)
	if err != nil {
		return 0, err
	}
	client, err := newSDKClient(set.conn, guardSettings{}, cred)
	if err != nil {
		return 0, err
	}
	defer client.Close(context.WithoutCancel(ctx))
	pager := client.NewListSessionsForQueuePager(set.queue, nil)
	if set.queue == "" {
		pager = client.NewListSessionsForSubscriptionPager(set.topic, set.subscription, nil)
	}
	var n int64
	for pager.More() && n < maxListedSessions {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("servicebus: listing the sessions of %s: %w", set.entityPath, err)
		}
		n += int64(len(page.Sessions))
	}
	return n, nil
}

// CountSink reads the sink queue's runtime properties. A topic keeps no
// messages of its own (its subscriptions do), and a templated entity is
// not one entity: neither can be counted.
func CountSink(ctx context.Context, cfg SinkConfig, log *slog.Logger) (driver.Backlog, error) {
	set, err := cfg.resolve()
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("servicebus sink: %w", err)
	}
	name := set.entity.String()
	switch {
	case set.entityField != "queue":
		return driver.Backlog{}, fmt.Errorf("servicebus: topic %q: a topic's messages are counted in its subscriptions: %w", name, errors.ErrUnsupported)
	case strings.Contains(name, "{"):
		return driver.Backlog{}, fmt.Errorf("servicebus: queue %q is a template, not one entity: %w", name, errors.ErrUnsupported)
	}
	ac, err := newAdminClient(set.conn, nil)
	if err != nil {
		return driver.Backlog{}, err
	}
	c, err := queueCounts(ctx, ac, name)
	if err != nil {
		return c.Backlog, err
	}
	// Duplicate detection drops a MessageId seen within the entity's
	// window. Not knowing it (no answer, no field) is taking it as off.
	if q, qerr := ac.GetQueue(ctx, name, nil); qerr == nil && q != nil {
		if q.RequiresDuplicateDetection != nil {
			c.Deduplicates = *q.RequiresDuplicateDetection
		}
		if q.RequiresSession != nil {
			c.Ordered = *q.RequiresSession
		}
	}
	return c.Backlog, nil
}

// counts is an entity's backlog and its transfer dead-letter count, which
// only a source reading that sub-queue needs.
type counts struct {
	driver.Backlog
	transferDeadLetter int64
}

// countErr makes a refused count (a key with Send and Listen but not
// Manage: 401 "'Manage' claim required"; 403) errors.ErrUnsupported: the
// entity stays usable and is moved without counts, as for a broker that
// cannot count, rather than retried as a lost connection until
// -connect-timeout failed a move that had moved everything.
func countErr(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (counting needs the Manage right): %w", err, errors.ErrUnsupported)
	}
	return err
}

func queueCounts(ctx context.Context, ac *admin.Client, queue string) (counts, error) {
	resp, err := ac.GetQueueRuntimeProperties(ctx, queue, nil)
	if err != nil {
		return counts{}, countErr(fmt.Errorf("servicebus: runtime properties of queue %q: %w", queue, err))
	}
	if resp == nil { // the SDK's answer for an entity that does not exist
		// Retrying cannot help: a migration fails at once on it.
		return counts{}, driver.Permanent(fmt.Errorf("servicebus: queue %q does not exist", queue))
	}
	p := resp.QueueRuntimeProperties
	return counts{
		Backlog: driver.Backlog{
			Ready: int64(p.ActiveMessageCount), Scheduled: int64(p.ScheduledMessageCount), DeadLetter: int64(p.DeadLetterMessageCount),
			Deferred: deferred(p.TotalMessageCount, int64(p.ActiveMessageCount), int64(p.ScheduledMessageCount), int64(p.DeadLetterMessageCount),
				int64(p.TransferDeadLetterMessageCount), int64(p.TransferMessageCount)),
			Created: p.CreatedAt,
		},
		transferDeadLetter: int64(p.TransferDeadLetterMessageCount),
	}, nil
}

func subscriptionCounts(ctx context.Context, ac *admin.Client, topic, sub string) (counts, error) {
	resp, err := ac.GetSubscriptionRuntimeProperties(ctx, topic, sub, nil)
	if err != nil {
		return counts{}, countErr(fmt.Errorf("servicebus: runtime properties of subscription %s/%s: %w", topic, sub, err))
	}
	if resp == nil {
		return counts{}, driver.Permanent(fmt.Errorf("servicebus: subscription %s/%s does not exist", topic, sub))
	}
	p := resp.SubscriptionRuntimeProperties
	return counts{
		Backlog: driver.Backlog{
			// A subscription's scheduled messages wait in its topic.
			Ready: int64(p.ActiveMessageCount), DeadLetter: int64(p.DeadLetterMessageCount),
			Deferred: deferred(p.TotalMessageCount, int64(p.ActiveMessageCount), 0, int64(p.DeadLetterMessageCount),
				int64(p.TransferDeadLetterMessageCount), int64(p.TransferMessageCount)),
			Created: p.CreatedAt,
		},
		transferDeadLetter: int64(p.TransferDeadLetterMessageCount),
	}, nil
}

// deferred is what the total holds beyond the states the runtime
// properties count one by one: deferred messages (an application's Defer),
// which no receiver gets. The message counters
// (https://learn.microsoft.com/en-us/azure/service-bus-messaging/message-counters)
// give the total and each state but deferred; where the service counts a
// deferred message as active instead, this is 0 and the move waits for
// the active count, which never falls (-timeout then ends it not drained).
func deferred(total, active, scheduled, deadLetter, transferDeadLetter, transfer int64) int64 {
	return max(0, total-active-scheduled-deadLetter-transferDeadLetter-transfer)
}

// newAdminClient is the SDK's management client. It always addresses
// https://<namespace>/ (azservicebus/internal/atom newEntityManagerImpl);
// when the management endpoint differs (an endpoint override, a test
// server on plain HTTP), its transport sends each request there instead,
// keeping the path, the query and the SAS token the SDK signed for the
// namespace.
// mod, if given, changes the client's options.
func newAdminClient(c *connSettings, cred azcore.TokenCredential, mod ...func(*admin.ClientOptions)) (*admin.Client, error) {
	if c.mgmtURL == "" {
		return nil, fmt.Errorf("servicebus: where %s serves its management API is not known (plain AMQP, an emulator): set management_endpoint (the management API's http(s)://host[:port]) in the servicebus block to count it: %w", c.namespace, errors.ErrUnsupported)
	}
	opts := &admin.ClientOptions{}
	for _, m := range mod {
		m(opts)
	}
	if c.mgmtURL != "https://"+c.namespace {
		u, err := url.Parse(c.mgmtURL)
		if err != nil {
			return nil, fmt.Errorf("servicebus: management endpoint %q: %w", c.mgmtURL, err)
		}
		opts.Transport = redirectTransport{to: u, next: &http.Client{Timeout: time.Minute}}
	}
	if c.cs != nil {
		ac, err := admin.NewClientFromConnectionString(c.cs.raw, opts)
		if err != nil {
			return nil, fmt.Errorf("servicebus: management client: %w", err)
		}
		return ac, nil
	}
	cred, err := c.credentialFor(cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus: management client: %w", err)
	}
	ac, err := admin.NewClient(c.namespace, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("servicebus: management client: %w", err)
	}
	return ac, nil
}

// redirectTransport sends the SDK's requests to another scheme and host.
type redirectTransport struct {
	to   *url.URL
	next *http.Client
}

var _ policy.Transporter = redirectTransport{}

func (t redirectTransport) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.to.Scheme, t.to.Host, ""
	return t.next.Do(r)
}

// Browse returns cfg changed so that its source peeks from sequence
// number after+1 and settles nothing
// (https://learn.microsoft.com/en-us/azure/service-bus-messaging/message-browsing).
// Peek is an AMQP operation: the REST API has none; a session entity needs
// a session receiver per session, which browsing does not do.
func Browse(cfg SourceConfig, after uint64) (SourceConfig, error) {
	if t := cfg.Transport; t == transportHTTPS {
		return cfg, fmt.Errorf("servicebus: the REST API (transport = %q) cannot peek; browse with transport = %q: %w", t, transportAMQP, driver.ErrCannotBrowse)
	}
	if cfg.Sessions != nil {
		return cfg, fmt.Errorf("servicebus: a session entity is peeked session by session, which browsing does not do: %w", driver.ErrCannotBrowse)
	}
	cfg.browse, cfg.browseAfter = true, after
	return cfg, nil
}

// DeadLetterSource returns cfg reading the entity's dead-letter sub-queue.
func DeadLetterSource(_ context.Context, cfg SourceConfig, _ *slog.Logger) (SourceConfig, error) {
	if cfg.SubQueue != "" {
		return cfg, fmt.Errorf("servicebus: the source reads sub-queue %q, which has no dead-letter queue of its own: %w", cfg.SubQueue, driver.ErrNoDeadLetterQueue)
	}
	cfg.SubQueue = subQueueDeadLetter
	// A dead-letter queue is never session-enabled, even that of a session
	// queue: read it with a plain receiver (its messages keep their
	// SessionId, the group key).
	cfg.Sessions = nil
	if _, err := cfg.resolve(); err != nil {
		return cfg, fmt.Errorf("servicebus source: %w", err)
	}
	return cfg, nil
}

// browseSource peeks the entity in sequence-number order. Peeked messages
// carry no lock: every settlement is a no-op.
type browseSource struct {
	client *azservicebus.Client
	rcv    *azservicebus.Receiver
	set    *sourceSettings
	log    *slog.Logger

	mu      sync.Mutex // one peek at a time: next follows the last one
	next    int64
	drained atomic.Bool // read by the migration's watcher while Receive waits
}

// newBrowseSource takes the credential newSource resolved.
func newBrowseSource(ctx context.Context, set *sourceSettings, log *slog.Logger, cred azcore.TokenCredential) (*browseSource, error) {
	if set.conn.https || set.sessions {
		return nil, fmt.Errorf("servicebus: browsing needs transport = %q and an entity without sessions: %w", transportAMQP, driver.ErrCannotBrowse)
	}
	client, err := newSDKClient(set.conn, guardSettings{dialLog: log}, cred)
	if err != nil {
		return nil, fmt.Errorf("servicebus source: %w", err)
	}
	rcv, err := set.newReceiver(client)
	if err != nil {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("servicebus source: %s: %w", set.entityPath, err)
	}
	log.Info("servicebus source: browsing (peek)", "namespace", set.conn.description, "entity", set.entityPath, "after", set.browseAfter)
	return &browseSource{client: client, rcv: rcv, set: set, log: log, next: set.browseAfter + 1}, nil
}

// browseIdle is how long Receive waits before it peeks again after a
// peek found nothing.
const browseIdle = 500 * time.Millisecond

// Receive peeks up to limit messages from the next sequence number. When
// a peek returns nothing, the entity is read to its end (Drained); Receive
// then peeks again now and then until ctx ends, for messages sent since.
func (s *browseSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	for {
		out, err := s.peek(ctx, limit)
		if err != nil || len(out) > 0 {
			return out, err
		}
		s.drained.Store(true)
		t := time.NewTimer(browseIdle)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// peek takes the next messages, if any, and moves past them.
func (s *browseSource) peek(ctx context.Context, limit int) ([]driver.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := s.next
	msgs, err := s.rcv.PeekMessages(ctx, limit, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = fmt.Errorf("servicebus: peek %s from %d: %w", s.set.entityPath, from, explain(err, false))
		if fatal(err) {
			// As a receive's (source.go): a migration fails at once
			// (a session entity without a sessions block, refused
			// credentials) instead of retrying for ever.
			return nil, driver.Permanent(err)
		}
		return nil, err
	}
	out := make([]driver.Delivery, 0, len(msgs))
	for _, rm := range msgs {
		if rm.SequenceNumber != nil && *rm.SequenceNumber >= s.next {
			s.next = *rm.SequenceNumber + 1
		}
		m, derr := decodeReceived(rm, s.set.entityPath)
		out = append(out, &browseDelivery{msg: m, decodeErr: derr})
	}
	return out, nil
}

// Drained reports whether a peek found nothing after the last message.
func (s *browseSource) Drained() bool { return s.drained.Load() }

func (s *browseSource) Close(ctx context.Context) error {
	return errors.Join(s.rcv.Close(ctx), s.client.Close(ctx))
}

// browseDelivery is a peeked message: it holds no lock, so nothing settles.
type browseDelivery struct {
	msg       *mapping.Message
	decodeErr error
}

func (d *browseDelivery) Message() *mapping.Message                        { return d.msg }
func (d *browseDelivery) DecodeError() error                               { return d.decodeErr }
func (d *browseDelivery) Ack(context.Context) error                        { return nil }
func (d *browseDelivery) Nack(context.Context, time.Duration) error        { return nil }
func (d *browseDelivery) Extend(context.Context, time.Duration) error      { return nil }
func (d *browseDelivery) DeadLetter(context.Context, string, string) error { return nil }

// NewDrySink returns a sink that resolves each message's entity and
// encodes it as NewSink's sink would, over AMQP (sbmap) or HTTPS (sbrest),
// with the same policy and max_message_size, and sends nothing.
func NewDrySink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("servicebus sink: %w", err)
	}
	set.opt.OnDrop = onDrop
	if log == nil {
		log = slog.Default()
	}
	facts := readQueueFacts(ctx, set, log)
	return &drySink{sinkCommon: &sinkCommon{set: set.withQueueLimit(facts.maxBytes), log: log, sessions: facts.sessions}}, nil
}

type drySink struct {
	*sinkCommon
}

// queueFacts is what the management API says of a sink's queue: whether
// it takes sessions, and its MaxMessageSizeInKilobytes in bytes (0: not
// known).
type queueFacts struct {
	sessions bool
	maxBytes int
}

// readQueueFacts asks the management API about a sink's literal queue
// (one try; zero facts when it cannot tell): a session queue refuses a
// message without a session id, and a queue's own size limit (a Premium
// queue's, or one set lower) is what it takes, not the tier's default
// (an audit: a queue of 64 KiB dead-lettered what a dry run said it would
// write).
func readQueueFacts(ctx context.Context, set *sinkSettings, log *slog.Logger) queueFacts {
	name, literal := set.entity.Literal()
	if !literal || set.entityField != "queue" {
		return queueFacts{}
	}
	// One try: the answer only spares the broker's refusal, and every
	// sink's open waits for it (the SDK's retries took 10 s where the
	// management API does not answer).
	ac, err := newAdminClient(set.conn, nil, func(o *admin.ClientOptions) { o.Retry.MaxRetries = -1 })
	if err != nil {
		return queueFacts{}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q, err := ac.GetQueue(ctx, name, nil)
	if err != nil || q == nil {
		log.Debug("servicebus sink: the queue's properties are not known", "queue", name, "error", err)
		return queueFacts{}
	}
	var f queueFacts
	if q.RequiresSession != nil {
		f.sessions = *q.RequiresSession
	}
	if kb := q.MaxMessageSizeInKilobytes; kb != nil && *kb > 0 && *kb <= math.MaxInt32/1024 {
		f.maxBytes = int(*kb) * 1024
	}
	return f
}

// withQueueLimit is set with the queue's own size limit (maxBytes, 0: not
// known), as adaptercfg.EntityLimit has it.
func (set *sinkSettings) withQueueLimit(maxBytes int) *sinkSettings {
	most := MaxAMQPMessageSize
	if set.conn.https {
		most = MaxHTTPSMessageSize
	}
	configured := 0
	if set.maxConfigured {
		configured = set.maxMessageSize
	}
	n := adaptercfg.EntityLimit(configured, set.maxMessageSize, maxBytes, most)
	if n == set.maxMessageSize {
		return set
	}
	c := *set
	c.maxMessageSize, c.opt.MaxMessageSize = n, n
	return &c
}

// Send returns the verdict of the entity template and the encoder for
// each message.
func (s *drySink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		_, mm, err := s.target(m)
		if err == nil {
			if s.set.conn.https {
				_, _, err = restRequest(mm, s.set.opt)
			} else {
				_, err = sbmap.Encode(mm, s.set.opt)
			}
		}
		errs[i] = err
	}
	return errs
}

func (s *drySink) Close(context.Context) error { return nil }

// serverBusy is Service Bus's "slow down" over AMQP
// (https://learn.microsoft.com/en-us/azure/service-bus-messaging/service-bus-messaging-exceptions-latest#reason-serverbusy).
const serverBusy = "com.microsoft:server-busy"

// restThrottled reports the REST API's "slow down": 503 Server Busy, and
// 429 where a gateway throttles
// (https://learn.microsoft.com/en-us/rest/api/servicebus/send-message-to-queue).
func restThrottled(err error) bool {
	s := statusOf(err)
	return s == http.StatusServiceUnavailable || s == http.StatusTooManyRequests
}
