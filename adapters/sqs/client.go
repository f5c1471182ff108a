package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/internal/wholebody"
)

// api is the part of *sqs.Client the adapter uses. Tests substitute it only
// where no available server implements the behaviour (ReceiveRequestAttemptId,
// invalid receipt handles, AWSTraceHeader, corrupt messages).
type api interface {
	ReceiveMessage(context.Context, *awssqs.ReceiveMessageInput, ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *awssqs.DeleteMessageBatchInput, ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *awssqs.ChangeMessageVisibilityBatchInput, ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessage(context.Context, *awssqs.SendMessageInput, ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
	SendMessageBatch(context.Context, *awssqs.SendMessageBatchInput, ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error)
	GetQueueAttributes(context.Context, *awssqs.GetQueueAttributesInput, ...func(*awssqs.Options)) (*awssqs.GetQueueAttributesOutput, error)
	GetQueueUrl(context.Context, *awssqs.GetQueueUrlInput, ...func(*awssqs.Options)) (*awssqs.GetQueueUrlOutput, error)
}

var _ api = (*awssqs.Client)(nil)

// newClient builds the SQS client: region, endpoint override and credentials
// (static keys, a shared profile or the SDK's default chain: environment,
// shared files, web identity / IRSA, container and instance roles),
// optionally assuming role_arn on top.
func newClient(ctx context.Context, c *ConnConfig, log *slog.Logger) (*awssqs.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(sdkLogger(log))}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.Profile))
	}
	if c.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		err = fmt.Errorf("sqs: load AWS configuration: %w", err)
		var missing config.SharedConfigProfileNotExistError
		if errors.As(err, &missing) {
			err = driver.Permanent(err)
		}
		return nil, err
	}
	endpoint := c.Endpoint
	if endpoint == "" && c.QueueURL != "" && !isAWSHost(c.QueueURL) {
		// An SQS-compatible service named by its queue URL: talk to that host.
		u, _ := url.Parse(c.QueueURL)
		endpoint = u.Scheme + "://" + u.Host
	}
	if cfg.Region == "" {
		cfg.Region = regionOf(c.QueueURL)
	}
	if cfg.Region == "" && endpoint != "" {
		// Compatible services ignore the region but the signer needs one.
		cfg.Region = "us-east-1"
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("region: not set and not in the environment or profile (set region, AWS_REGION or a queue_url)")
	}
	if c.RoleARN != "" {
		name := c.SessionName
		if name == "" {
			name = DefaultSessionName
		}
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = name
			if c.ExternalID != "" {
				o.ExternalID = aws.String(c.ExternalID)
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	if err := checkCredentials(ctx, cfg.Credentials); err != nil {
		return nil, err
	}
	return awssqs.NewFromConfig(cfg, func(o *awssqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		// sqsmap checks the digests per message: the SDK's check would fail
		// a whole ReceiveMessage (or SendMessageBatch) for one bad message.
		o.DisableMessageChecksumValidation = true
		// A response lost to the SDK's early close of the request body is
		// retried: hidden messages, or a batch stored twice (wholebody).
		if o.HTTPClient == nil {
			o.HTTPClient = awshttp.NewBuildableClient()
		}
		o.HTTPClient = wholebody.Wrap(o.HTTPClient)
	}), nil
}

// checkCredentials retrieves the credentials once, at open, so that a
// machine with none fails with an error that says so instead of the first
// call's signing error. The SDK's default chain tries the instance role
// last (IMDS), only when nothing else is configured: an IMDS failure there
// means no credentials at all, which waiting does not change, so it is
// permanent (a migration fails at once; the daemon still retries). Other
// failures (an STS AssumeRole for role_arn or a web identity that the
// network lost) stay transient. The cache keeps what was retrieved for
// the client's calls.
func checkCredentials(ctx context.Context, p aws.CredentialsProvider) error {
	if p == nil {
		return driver.Permanent(errors.New("sqs: no AWS credentials provider"))
	}
	if _, err := p.Retrieve(ctx); err != nil {
		err = fmt.Errorf("sqs: get AWS credentials: %w", err)
		if fromInstanceRole(err) {
			return driver.Permanent(fmt.Errorf("%w (no credentials found: set access_key_id and secret_access_key, profile, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the SDK's chain ended at the EC2 instance role, which this machine does not give)", err))
		}
		return err
	}
	return nil
}

// fromInstanceRole reports whether err comes from the EC2 instance
// metadata service (operation errors of the SDK's "ec2imds" client).
func fromInstanceRole(err error) bool {
	for err != nil {
		var oe *smithy.OperationError
		if !errors.As(err, &oe) {
			return false
		}
		if oe.ServiceID == "ec2imds" {
			return true
		}
		err = oe.Err
	}
	return false
}

// sdkLogger sends the SDK's own log lines to slog. Its warning about an
// undrained response body follows every long poll cut short by Close: debug.
func sdkLogger(log *slog.Logger) logging.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		msg := fmt.Sprintf(format, v...)
		if c == logging.Warn && !strings.Contains(msg, "failed to discard remaining HTTP response body") {
			log.Warn("sqs: aws sdk: " + msg)
			return
		}
		log.Debug("sqs: aws sdk: " + msg)
	})
}

// isAWSHost reports whether the URL's host is an AWS SQS endpoint.
func isAWSHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

// regionOf extracts REGION from https://sqs.REGION.amazonaws.com/... .
func regionOf(queueURL string) string {
	if queueURL == "" || !isAWSHost(queueURL) {
		return ""
	}
	u, _ := url.Parse(queueURL)
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) >= 4 && parts[0] == "sqs" {
		return parts[1]
	}
	if len(parts) >= 4 && strings.HasPrefix(parts[0], "sqs-fips") {
		return parts[1]
	}
	return ""
}

// queueInfo is what the adapter learns about its queue at start.
type queueInfo struct {
	url               string
	name              string
	fifo              bool
	contentBasedDedup bool
	dedupPerGroup     bool          // DeduplicationScope messageGroup (high-throughput FIFO)
	visibility        time.Duration // the queue's VisibilityTimeout
	maxMessageSize    int           // the queue's MaximumMessageSize; 0: not read
}

// refusedAtOpen marks credentials the service refuses as permanent at a
// source's or sink's open (resolveQueue runs there only): a migration
// fails at once, also for a dead-letter sink, which it does not count;
// the engine retries anyway.
func refusedAtOpen(err error) error {
	if credentialsRefused(err) {
		return driver.Permanent(fmt.Errorf("%w (the credentials are refused: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, the profile or role)", err))
	}
	return err
}

// resolveQueue finds the queue URL (GetQueueUrl for a name) and reads the
// FIFO, content-based deduplication and visibility attributes. A queue whose
// attributes may not be read (no sqs:GetQueueAttributes permission, a
// compatible service that does not know them) is judged by its name's .fifo
// suffix; any other failure (no such queue, unreachable) is a start error.
func resolveQueue(ctx context.Context, client api, c *ConnConfig) (*queueInfo, error) {
	q := &queueInfo{url: c.QueueURL, visibility: defaultQueueVisibility}
	if q.url == "" {
		in := &awssqs.GetQueueUrlInput{QueueName: aws.String(c.QueueName)}
		if c.AccountID != "" {
			in.QueueOwnerAWSAccountId = aws.String(c.AccountID)
		}
		out, err := client.GetQueueUrl(ctx, in)
		if err != nil {
			return nil, refusedAtOpen(fmt.Errorf("sqs: get URL of queue %q: %w", c.QueueName, err))
		}
		q.url = aws.ToString(out.QueueUrl)
	}
	q.name = queueNameOf(q.url)
	q.fifo = strings.HasSuffix(q.name, ".fifo")
	out, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue,
			types.QueueAttributeNameContentBasedDeduplication, types.QueueAttributeNameVisibilityTimeout,
			types.QueueAttributeNameMaximumMessageSize, types.QueueAttributeNameDeduplicationScope},
	})
	if err != nil {
		if !attributesRefused(err) {
			return nil, refusedAtOpen(fmt.Errorf("sqs: queue %s: %w", q.url, err))
		}
		return q, err // the caller logs it and goes on with the name's suffix
	}
	if v, ok := out.Attributes[string(types.QueueAttributeNameFifoQueue)]; ok {
		q.fifo = v == "true"
	}
	q.contentBasedDedup = out.Attributes[string(types.QueueAttributeNameContentBasedDeduplication)] == "true"
	q.dedupPerGroup = out.Attributes[string(types.QueueAttributeNameDeduplicationScope)] == "messageGroup"
	if v, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]); err == nil && v >= 0 {
		q.visibility = time.Duration(v) * time.Second
	}
	if v, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && v >= 1024 && v <= MaxMessageSizeLimit {
		q.maxMessageSize = v
	}
	return q, nil
}

// sizeLimit is the limit a sink encodes for (adaptercfg.EntityLimit),
// with the queue's MaximumMessageSize where it was read.
func sizeLimit(configured, resolved int, q *queueInfo) int {
	if q == nil {
		return resolved
	}
	return adaptercfg.EntityLimit(configured, resolved, q.maxMessageSize, MaxMessageSizeLimit)
}

// attributesRefused reports a GetQueueAttributes failure that leaves the
// queue usable: access denied, or attributes a compatible service lacks.
func attributesRefused(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) || isQueueMissing(err) {
		return false
	}
	code := ae.ErrorCode()
	return strings.Contains(code, "AccessDenied") || code == "UnsupportedOperation" ||
		code == "InvalidAttributeName" || code == "InvalidParameterValue"
}
