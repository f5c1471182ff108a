package sqs

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// Defaults applied to fields left empty.
const (
	DefaultWaitTime       = 20 * time.Second
	DefaultMaxMessages    = 10
	DefaultPollers        = 2
	DefaultNackBackoff    = time.Second
	DefaultAckLinger      = 10 * time.Millisecond
	DefaultSendLinger     = 5 * time.Millisecond
	DefaultMaxMessageSize = sqsmap.DefaultMaxMessageSize
	MaxMessageSizeLimit   = 1 << 20 // SQS raised the limit to 1 MiB in 2025
	DefaultGroup          = sqsmap.DefaultGroupID
	DefaultSenders        = 4
	DefaultSessionName    = "qbridge"

	maxVisibility = 12 * time.Hour // SQS caps visibility at 12 hours
	maxBatch      = 10             // SQS batch calls take at most 10 entries
)

// SourceConfig is the body of `source "sqs" { ... }`.
type SourceConfig struct {
	ConnConfig `hcl:",remain"`

	// WaitTime is the long-polling wait (WaitTimeSeconds), 0s to 20s.
	WaitTime string `hcl:"wait_time,optional"`
	// MaxMessages is MaxNumberOfMessages per ReceiveMessage, 1 to 10.
	MaxMessages int `hcl:"max_messages,optional"`
	// VisibilityTimeout overrides the queue's visibility timeout for the
	// messages received; empty keeps the queue's.
	VisibilityTimeout string `hcl:"visibility_timeout,optional"`
	// Pollers is the number of concurrent ReceiveMessage loops.
	Pollers int `hcl:"pollers,optional"`
	// AttributeNames are the message system attributes to receive
	// (MessageSystemAttributeNames); default All.
	AttributeNames []string `hcl:"attribute_names,optional"`
	// MessageAttributeNames are the message attributes to receive: names,
	// prefixes such as "bar.*", or All / ".*"; default All.
	MessageAttributeNames []string `hcl:"message_attribute_names,optional"`
	// NackBackoff is the least visibility a Nack sets (a smaller delay is
	// raised to it); "0s" allows an immediate redelivery.
	NackBackoff string `hcl:"nack_backoff,optional"`
	// Heartbeat is deprecated and ignored (a warning when set): the
	// pipeline's lock block extends the messages the engine holds, and the
	// source extends its prefetched ones. Still parsed so that existing
	// configurations load.
	Heartbeat string `hcl:"heartbeat,optional"`
	// Linger is how long Ack, Nack and Extend wait to fill a batch call.
	Linger string `hcl:"linger,optional"`
	// DeadLetterQueueURL names the queue's dead-letter queue for qbridge
	// migrate -include-dead-letters; empty: found through the queue's
	// RedrivePolicy. The daemon does not read it.
	DeadLetterQueueURL string `hcl:"dead_letter_queue_url,optional"`
}

// SinkConfig is the body of `sink "sqs" { ... }`.
type SinkConfig struct {
	ConnConfig `hcl:",remain"`

	// MaxMessageSize is the queue's size limit in bytes, which also bounds a
	// batch's total; default 262,144, at most 1,048,576.
	MaxMessageSize int `hcl:"max_message_size,optional"`
	// DefaultGroup is the MessageGroupId for FIFO messages without a group.
	DefaultGroup string `hcl:"default_group,optional"`
	// Linger is how long a send waits to fill a SendMessageBatch.
	Linger string `hcl:"linger,optional"`
	// ContentBasedDedup says whether the FIFO queue deduplicates on content;
	// unset: read from the queue's ContentBasedDeduplication attribute.
	ContentBasedDedup *bool `hcl:"content_based_dedup,optional"`
	// CarrySource writes the source facts into the carry envelope.
	CarrySource bool `hcl:"carry_source,optional"`
	// Senders is the number of batch calls in flight at once.
	Senders int `hcl:"senders,optional"`

	// Set by the config layer from the pipeline's mapping block. Untagged:
	// gohcl skips untagged fields (it would read `hcl:"-"` as an attribute
	// named "-"). The drop callback is not configuration: NewSink takes it.
	Policy   mapping.Policy
	Envelope mapping.EnvelopeMode
}

// ConnConfig is the connection part shared by source and sink. It is decoded
// from the same block as the rest (the config layer may also fill it).
type ConnConfig struct {
	Region string `hcl:"region,optional"`
	// QueueURL or QueueName (with AccountID for a queue of another account)
	// names the queue.
	QueueURL  string `hcl:"queue_url,optional"`
	QueueName string `hcl:"queue_name,optional"`
	AccountID string `hcl:"account_id,optional"`
	// Endpoint overrides the SQS endpoint (ElasticMQ, LocalStack, fauxqs,
	// Yandex Message Queue, VK Cloud...).
	Endpoint string `hcl:"endpoint,optional"`
	// Profile selects a shared config/credentials profile.
	Profile string `hcl:"profile,optional"`
	// Static keys; when empty the SDK's default chain is used.
	AccessKeyID     string `hcl:"access_key_id,optional"`
	SecretAccessKey string `hcl:"secret_access_key,optional"`
	SessionToken    string `hcl:"session_token,optional"`
	// RoleARN is assumed (STS AssumeRole) with the credentials above.
	RoleARN     string `hcl:"role_arn,optional"`
	ExternalID  string `hcl:"external_id,optional"`
	SessionName string `hcl:"session_name,optional"`
}

var (
	queueNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	accountIDRE   = regexp.MustCompile(`^[0-9]{12}$`)
	roleSessionRE = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
)

// checkQueueURL checks that field's value raw is an http(s) queue URL.
func checkQueueURL(field, raw string) error {
	if err := checkNoCredentials(field, raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || queueNameOf(raw) == "" {
		return adaptercfg.Errorf(field, "%q is not an http(s) queue URL such as https://sqs.REGION.amazonaws.com/ACCOUNT/NAME", raw)
	}
	return nil
}

// checkNoCredentials refuses a URL with a user part (an '@'), redacted:
// SQS does not read one, and a queue URL or endpoint is quoted whole in
// messages, identities and migrate's checkpoints.
func checkNoCredentials(field, raw string) error {
	if strings.Contains(raw, "@") {
		return adaptercfg.Errorf(field, "%q: a user or password in the URL is not used by SQS (set access_key_id and secret_access_key, or use a profile or role_arn)", adaptercfg.RedactURL(raw))
	}
	return nil
}

// validate checks the connection fields.
func (c *ConnConfig) validate() error {
	switch {
	case c.QueueURL == "" && c.QueueName == "":
		return adaptercfg.Errorf("queue_url", "required (or set queue_name)")
	case c.QueueURL != "" && c.QueueName != "":
		return adaptercfg.Fields("queue_url", "queue_url and queue_name", "set one")
	case c.QueueURL != "" && c.AccountID != "":
		return adaptercfg.Errorf("account_id", "only used with queue_name (queue_url names the account)")
	}
	if c.QueueURL != "" {
		if err := checkQueueURL("queue_url", c.QueueURL); err != nil {
			return err
		}
	}
	if c.QueueName != "" {
		base := strings.TrimSuffix(c.QueueName, ".fifo")
		if !queueNameRE.MatchString(base) {
			return adaptercfg.Errorf("queue_name", "%q must be 1-80 characters of A-Z a-z 0-9 _ - (plus .fifo for a FIFO queue)", c.QueueName)
		}
	}
	if c.AccountID != "" && !accountIDRE.MatchString(c.AccountID) {
		return adaptercfg.Errorf("account_id", "%q must be 12 digits", c.AccountID)
	}
	if c.Endpoint != "" {
		if err := checkNoCredentials("endpoint", c.Endpoint); err != nil {
			return err
		}
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return adaptercfg.Errorf("endpoint", "%q is not an http(s) URL", c.Endpoint)
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return adaptercfg.Fields("access_key_id", "access_key_id and secret_access_key", "set both or neither")
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		return adaptercfg.Errorf("session_token", "set without access_key_id")
	}
	if c.Profile != "" && c.AccessKeyID != "" {
		return adaptercfg.Fields("profile", "profile and access_key_id", "set one (static keys or a shared profile)")
	}
	if c.RoleARN == "" && c.ExternalID != "" {
		return adaptercfg.Errorf("external_id", "only used with role_arn")
	}
	if c.RoleARN == "" && c.SessionName != "" {
		return adaptercfg.Errorf("session_name", "only used with role_arn")
	}
	if c.RoleARN != "" && !strings.HasPrefix(c.RoleARN, "arn:") {
		return adaptercfg.Errorf("role_arn", "%q is not an ARN (arn:aws:iam::ACCOUNT:role/NAME)", c.RoleARN)
	}
	if c.SessionName != "" && !roleSessionRE.MatchString(c.SessionName) {
		return adaptercfg.Errorf("session_name", "%q must be 2-64 characters of letters, digits and +=,.@_-", c.SessionName)
	}
	return nil
}

// queueNameOf returns the last path segment of a queue URL.
func queueNameOf(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	p := strings.TrimSuffix(u.Path, "/")
	return p[strings.LastIndexByte(p, '/')+1:]
}

// sourceSettings is SourceConfig resolved: defaults applied, durations parsed.
type sourceSettings struct {
	waitTime      time.Duration
	maxMessages   int
	visibility    time.Duration // 0: the queue's
	pollers       int
	systemAttrs   []string
	messageAttrs  []string
	nackBackoff   time.Duration
	heartbeat     time.Duration // deprecated: only warned about
	linger        time.Duration
	hasVisibility bool
}

// Validate checks the configuration; messages name the offending field.
func (c *SourceConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SourceConfig) resolve() (*sourceSettings, error) {
	if err := c.ConnConfig.validate(); err != nil {
		return nil, err
	}
	if c.DeadLetterQueueURL != "" {
		if err := checkQueueURL("dead_letter_queue_url", c.DeadLetterQueueURL); err != nil {
			return nil, err
		}
	}
	s := &sourceSettings{maxMessages: c.MaxMessages, pollers: c.Pollers}
	var err error
	if s.waitTime, err = adaptercfg.Duration("wait_time", c.WaitTime, DefaultWaitTime); err != nil {
		return nil, err
	}
	if s.waitTime > 20*time.Second || s.waitTime%time.Second != 0 {
		return nil, adaptercfg.Errorf("wait_time", "%s must be whole seconds from 0s to 20s", s.waitTime)
	}
	if c.VisibilityTimeout != "" {
		if s.visibility, err = adaptercfg.Duration("visibility_timeout", c.VisibilityTimeout, 0); err != nil {
			return nil, err
		}
		if s.visibility > maxVisibility || s.visibility%time.Second != 0 {
			return nil, adaptercfg.Errorf("visibility_timeout", "%s must be whole seconds from 0s to 12h", s.visibility)
		}
		s.hasVisibility = true
	}
	switch {
	case s.maxMessages == 0:
		s.maxMessages = DefaultMaxMessages
	case s.maxMessages < 1 || s.maxMessages > 10:
		return nil, adaptercfg.Errorf("max_messages", "%d must be 1 to 10", s.maxMessages)
	}
	switch {
	case s.pollers == 0:
		s.pollers = DefaultPollers
	case s.pollers < 1 || s.pollers > 64:
		return nil, adaptercfg.Errorf("pollers", "%d must be 1 to 64", s.pollers)
	}
	s.systemAttrs = append([]string(nil), c.AttributeNames...)
	if len(s.systemAttrs) == 0 {
		s.systemAttrs = []string{"All"}
	}
	for i, n := range s.systemAttrs {
		if !knownSystemAttr(n) {
			return nil, adaptercfg.Errorf(fmt.Sprintf("attribute_names[%d]", i), "%q is not All or a message system attribute (%s)", n, strings.Join(systemAttrNames, ", "))
		}
	}
	s.messageAttrs = append([]string(nil), c.MessageAttributeNames...)
	if len(s.messageAttrs) == 0 {
		s.messageAttrs = []string{"All"}
	}
	all := false
	for i, n := range s.messageAttrs {
		if err := checkAttrFilter(n); err != nil {
			return nil, adaptercfg.Errorf(fmt.Sprintf("message_attribute_names[%d]", i), "%w", err)
		}
		all = all || n == "All" || n == ".*" || n == mapping.EnvelopeName || n == "qbridge.*"
	}
	if !all {
		// The carry envelope holds types and fields the other attributes
		// need: always ask for it.
		s.messageAttrs = append(s.messageAttrs, mapping.EnvelopeName)
	}
	if s.nackBackoff, err = adaptercfg.Duration("nack_backoff", c.NackBackoff, DefaultNackBackoff); err != nil {
		return nil, err
	}
	if s.nackBackoff > maxVisibility {
		return nil, adaptercfg.Errorf("nack_backoff", "%s exceeds SQS's 12h visibility limit", s.nackBackoff)
	}
	if s.heartbeat, err = adaptercfg.Duration("heartbeat", c.Heartbeat, 0); err != nil {
		return nil, err
	}
	if s.linger, err = adaptercfg.Duration("linger", c.Linger, DefaultAckLinger); err != nil {
		return nil, err
	}
	if s.linger > time.Second {
		return nil, adaptercfg.Errorf("linger", "%s is too long (at most 1s)", s.linger)
	}
	return s, nil
}

var systemAttrNames = []string{
	"All", "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader", "DeadLetterQueueSourceArn",
}

func knownSystemAttr(n string) bool {
	for _, k := range systemAttrNames {
		if n == k {
			return true
		}
	}
	return false
}

var attrFilterRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,256}$`)

// checkAttrFilter checks a MessageAttributeNames entry: All, .*, a name or a
// prefix such as "bar.*".
func checkAttrFilter(n string) error {
	if n == "All" || n == ".*" {
		return nil
	}
	name := strings.TrimSuffix(n, ".*")
	if !attrFilterRE.MatchString(name) || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("%q is not All, .*, an attribute name or a prefix such as bar.*", n)
	}
	return nil
}

// sinkSettings is SinkConfig resolved.
type sinkSettings struct {
	maxMessageSize int
	defaultGroup   string
	linger         time.Duration
	senders        int
}

// Validate checks the configuration; messages name the offending field.
func (c *SinkConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SinkConfig) resolve() (*sinkSettings, error) {
	if err := c.ConnConfig.validate(); err != nil {
		return nil, err
	}
	s := &sinkSettings{maxMessageSize: c.MaxMessageSize, defaultGroup: c.DefaultGroup, senders: c.Senders}
	switch {
	case s.maxMessageSize == 0:
		s.maxMessageSize = DefaultMaxMessageSize
	case s.maxMessageSize < 1024 || s.maxMessageSize > MaxMessageSizeLimit:
		return nil, adaptercfg.Errorf("max_message_size", "%d must be 1,024 to 1,048,576 bytes", s.maxMessageSize)
	}
	if s.defaultGroup == "" {
		s.defaultGroup = DefaultGroup
	}
	if len(s.defaultGroup) > 128 || !groupIDRE.MatchString(s.defaultGroup) {
		return nil, adaptercfg.Errorf("default_group", "%q must be 1-128 characters of a-z A-Z 0-9 and punctuation", s.defaultGroup)
	}
	var err error
	if s.linger, err = adaptercfg.Duration("linger", c.Linger, DefaultSendLinger); err != nil {
		return nil, err
	}
	if s.linger > time.Second {
		return nil, adaptercfg.Errorf("linger", "%s is too long (at most 1s)", s.linger)
	}
	switch {
	case s.senders == 0:
		s.senders = DefaultSenders
	case s.senders < 1 || s.senders > 64:
		return nil, adaptercfg.Errorf("senders", "%d must be 1 to 64", s.senders)
	}
	if _, err := mapping.ParsePolicy(c.Policy.String()); err != nil {
		return nil, adaptercfg.Errorf("policy", "%w", err)
	}
	return s, nil
}

// groupIDRE: MessageGroupId is 1-128 characters of alphanumerics and
// punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
var groupIDRE = regexp.MustCompile("^[A-Za-z0-9!-/:-@\\[-`{-~]+$")
