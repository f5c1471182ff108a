package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// The hooks of qbridge migrate: counts, the dead-letter queue, a dry-run
// sink. SQS cannot browse: every receive counts against the message's
// ApproximateReceiveCount, which a redrive policy acts on.

// errCannotBrowse is what Browse answers, for every SQS queue.
var errCannotBrowse = fmt.Errorf("sqs: SQS cannot be read without receiving; move, or dry-run with a sample: %w", driver.ErrCannotBrowse)

// CountSource reads the source queue's approximate counts.
func CountSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Backlog, error) {
	if _, err := cfg.resolve(); err != nil {
		return driver.Backlog{}, err
	}
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return driver.Backlog{}, err
	}
	return countQueue(ctx, client, &cfg.ConnConfig)
}

// CountSink reads the sink queue's approximate counts.
func CountSink(ctx context.Context, cfg SinkConfig, log *slog.Logger) (driver.Backlog, error) {
	if _, err := cfg.resolve(); err != nil {
		return driver.Backlog{}, err
	}
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return driver.Backlog{}, err
	}
	return countQueue(ctx, client, &cfg.ConnConfig)
}

// countMaxBackoff caps the SDK's wait between a count's attempts (20 s
// by default): a count runs within -connect-timeout, and when the SDK was
// still waiting to try again as that ended, the count's error said only
// "context deadline exceeded", not the attempts' "connection refused".
const countMaxBackoff = time.Second

func countRetries(o *awssqs.Options) {
	o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, countMaxBackoff)
}

// countAttrs map the queue's counters to the backlog
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_GetQueueAttributes.html).
var countAttrs = []types.QueueAttributeName{
	types.QueueAttributeNameApproximateNumberOfMessages,
	types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

func countQueue(ctx context.Context, client api, c *ConnConfig) (driver.Backlog, error) {
	url, err := queueURL(ctx, client, c)
	if err != nil {
		return driver.Backlog{}, countError(err)
	}
	out, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: append(countAttrs[:len(countAttrs):len(countAttrs)], types.QueueAttributeNameQueueArn)}, countRetries)
	if err != nil {
		return driver.Backlog{}, countError(fmt.Errorf("sqs: count queue %s: %w", url, err))
	}
	var b driver.Backlog
	for _, f := range []struct {
		name types.QueueAttributeName
		dst  *int64
	}{
		{countAttrs[0], &b.Ready}, {countAttrs[1], &b.InFlight}, {countAttrs[2], &b.Scheduled},
	} {
		v, ok := out.Attributes[string(f.name)]
		if !ok {
			// A compatible service without the counter cannot say the
			// queue is empty: migrate falls back to idle time.
			return driver.Backlog{}, fmt.Errorf("sqs: count queue %s: the answer has no %s: %w", url, f.name, errors.ErrUnsupported)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return driver.Backlog{}, fmt.Errorf("sqs: count queue %s: %s = %q is not a count", url, f.name, v)
		}
		*f.dst = n
	}
	// A FIFO queue drops a MessageDeduplicationId it saw within 5 minutes;
	// qbridge sends one with every message there.
	b.Deduplicates = strings.HasSuffix(url, ".fifo")
	if b.Deduplicates {
		b.DedupWindow = fifoDedupWindow
	}
	b.Ordered = b.Deduplicates // a FIFO queue: in order per message group
	b.Entity = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	// Every ReceiveMessage raises ApproximateReceiveCount, and SQS has no
	// other read.
	b.ReceivesCounted = true
	return b, nil
}

// fifoDedupWindow is how long a FIFO queue drops a message whose
// MessageDeduplicationId it has accepted
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/using-messagededuplicationid-property.html).
const fifoDedupWindow = 5 * time.Minute

// countError marks a queue that does not exist, or credentials the
// service refuses, as permanent: the engine retries them (a daemon may
// wait for the queue to be created or the keys to be mended), but a
// migration counts its queues first and fails at once on them. A count the
// queue's policy refuses is errors.ErrUnsupported: the queue cannot be
// counted, and is moved without counts.
func countError(err error) error {
	switch {
	case attributesRefused(err):
		// A queue policy that refuses GetQueueAttributes (or a compatible
		// service without the call) leaves the queue usable: the move
		// runs as for a broker that cannot count (ErrUnsupported), and
		// does not wait for a count that will never come.
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	case isQueueMissing(err):
		return driver.Permanent(fmt.Errorf("%w (the queue does not exist: check queue_url or queue_name, the region and the account)", err))
	}
	// Likewise keys that AWS does not know or a signature it does not
	// match.
	return refusedAtOpen(err)
}

// queueURL is the configured URL, or GetQueueUrl's for a name.
func queueURL(ctx context.Context, client api, c *ConnConfig) (string, error) {
	if c.QueueURL != "" {
		return c.QueueURL, nil
	}
	in := &awssqs.GetQueueUrlInput{QueueName: aws.String(c.QueueName)}
	if c.AccountID != "" {
		in.QueueOwnerAWSAccountId = aws.String(c.AccountID)
	}
	out, err := client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("sqs: get URL of queue %q: %w", c.QueueName, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Browse refuses: SQS has no read that leaves a message untouched.
func Browse(SourceConfig, uint64) (SourceConfig, error) {
	return SourceConfig{}, errCannotBrowse
}

// DeadLetterSource returns cfg reading the queue's dead-letter queue:
// dead_letter_queue_url when set, else the target of the queue's
// RedrivePolicy
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
func DeadLetterSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (SourceConfig, error) {
	if _, err := cfg.resolve(); err != nil {
		return cfg, err
	}
	if cfg.DeadLetterQueueURL != "" {
		return withQueue(cfg, cfg.DeadLetterQueueURL), nil
	}
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return cfg, err
	}
	url, err := deadLetterQueueURL(ctx, client, &cfg.ConnConfig)
	if err != nil {
		return cfg, err
	}
	return withQueue(cfg, url), nil
}

// withQueue is cfg reading the queue at url, with the rest unchanged.
func withQueue(cfg SourceConfig, url string) SourceConfig {
	cfg.QueueURL, cfg.QueueName, cfg.AccountID, cfg.DeadLetterQueueURL = url, "", "", ""
	return cfg
}

// redrivePolicy is the JSON of the RedrivePolicy queue attribute.
type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
}

func deadLetterQueueURL(ctx context.Context, client api, c *ConnConfig) (string, error) {
	url, err := queueURL(ctx, client, c)
	if err != nil {
		return "", err
	}
	out, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", fmt.Errorf("sqs: read the redrive policy of %s: %w", url, err)
	}
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return "", fmt.Errorf("sqs: queue %s has no RedrivePolicy (set dead_letter_queue_url): %w", url, driver.ErrNoDeadLetterQueue)
	}
	var p redrivePolicy
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return "", fmt.Errorf("sqs: queue %s: RedrivePolicy %q: %w", url, raw, err)
	}
	account, name, ok := splitQueueARN(p.DeadLetterTargetArn)
	if !ok {
		return "", fmt.Errorf("sqs: queue %s: RedrivePolicy deadLetterTargetArn %q is not a queue ARN: %w", url, p.DeadLetterTargetArn, driver.ErrNoDeadLetterQueue)
	}
	in := &awssqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if account != "" && account != accountOf(url) {
		// Only a queue of another account needs its owner named.
		in.QueueOwnerAWSAccountId = aws.String(account)
	}
	dlq, err := client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("sqs: get URL of dead-letter queue %s: %w", p.DeadLetterTargetArn, err)
	}
	return aws.ToString(dlq.QueueUrl), nil
}

// splitQueueARN splits arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
func splitQueueARN(arn string) (account, name string, ok bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", "", false
	}
	return parts[4], parts[5], true
}

// accountOf is the ACCOUNT of a queue URL's /ACCOUNT/NAME path, if any.
func accountOf(queueURL string) string {
	p := strings.Split(strings.Trim(strings.TrimPrefix(strings.TrimPrefix(queueURL, "https://"), "http://"), "/"), "/")
	if len(p) >= 3 {
		return p[len(p)-2]
	}
	return ""
}

// drySink encodes as the sink would and sends nothing.
type drySink struct{ enc sqsmap.EncodeOptions }

var _ driver.Sink = drySink{}

// NewDrySink returns a sink that encodes each message as NewSink's sink
// would (policy, size limit, FIFO group and deduplication id) and sends
// nothing. Without the network, FIFO-ness comes from the queue's name
// (.fifo, which SQS requires of FIFO queues) and content-based
// deduplication from content_based_dedup; the latter changes no verdict.
func NewDrySink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	name := cfg.QueueName
	if cfg.QueueURL != "" {
		name = queueNameOf(cfg.QueueURL)
	}
	cbd := cfg.ContentBasedDedup != nil && *cfg.ContentBasedDedup
	fifo := strings.HasSuffix(name, ".fifo")
	// The queue's own size limit, where it can be read (best effort: a
	// dry run with no network or no sqs:GetQueueAttributes goes on with
	// the configured one).
	if q := dryQueue(ctx, &cfg, log); q != nil {
		local := *set
		local.maxMessageSize = sizeLimit(cfg.MaxMessageSize, set.maxMessageSize, q)
		set = &local
	}
	return drySink{enc: encodeOptions(&cfg, set, fifo, cbd, onDrop)}, nil
}

// dryQueue reads the queue's attributes for a dry run, or nil.
func dryQueue(ctx context.Context, cfg *SinkConfig, log *slog.Logger) *queueInfo {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return nil
	}
	q, err := resolveQueue(ctx, client, &cfg.ConnConfig)
	if err != nil {
		return nil
	}
	return q
}

// Send returns the encoder's verdict for each message.
func (s drySink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if _, err := sqsmap.Encode(m, s.enc); err != nil {
			errs[i] = err // as the sink says it
		}
	}
	return errs
}

func (drySink) Close(context.Context) error { return nil }

// throttlingCodes are SQS's "slow down" answers: the SDK's throttle codes
// (aws/retry DefaultThrottleErrorCodes) and SQS's own OverLimit and
// KmsThrottled
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html).
func isThrottlingCode(code string) bool {
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return true
	}
	return code == "OverLimit" || code == "KmsThrottled"
}

// markThrottled marks err with driver.Throttled when the service asked to
// slow down; err stays what it was otherwise.
func markThrottled(err error) error {
	var (
		ae   smithy.APIError
		over *types.OverLimit
		req  *types.RequestThrottled
		kms  *types.KmsThrottled
	)
	switch {
	case errors.As(err, &over), errors.As(err, &req), errors.As(err, &kms):
	case errors.As(err, &ae) && isThrottlingCode(strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService.")):
	default:
		return err
	}
	return driver.Throttled(err)
}
