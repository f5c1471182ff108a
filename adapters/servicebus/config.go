package servicebus

import (
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
	"github.com/qbridge/qbridge/mapping/sbmap"
	"github.com/qbridge/qbridge/mapping/sbrest"
)

// Defaults applied to fields left at their zero value.
const (
	DefaultMaxMessages      = 16 // AMQP: messages per receive call
	DefaultHTTPSReceivers   = 4  // HTTPS: concurrent peek-lock requests
	DefaultReceiveWait      = 60 * time.Second
	DefaultLockRenewal      = 10 * time.Second
	DefaultMaxNackDelay     = 5 * time.Minute
	DefaultMaxSessions      = 8
	DefaultSessionIdle      = 10 * time.Second
	DefaultSendTimeout      = 60 * time.Second
	DefaultMaxSenders       = 16
	DefaultMaxMessageSize   = sbmap.DefaultMaxMessageSize // 256 KiB: Standard tier
	MaxAMQPMessageSize      = 100 << 20                   // Premium over AMQP
	MaxHTTPSMessageSize     = 1 << 20                     // Premium over HTTPS
	DefaultBackoff          = 500 * time.Millisecond
	DefaultBackoffMax       = 30 * time.Second
	maxHTTPSReceiveWait     = 10 * time.Minute
	defaultSessionName      = "default"
	subQueueDeadLetter      = "deadletter"
	subQueueTransferDL      = "transfer_deadletter"
	transportAMQP           = "amqp"
	transportHTTPS          = "https"
	credentialDefault       = "default"
	credentialWorkload      = "workload"
	credentialManaged       = "managed"
	credentialEnvironment   = "environment"
	credentialCLI           = "cli"
	guardScan, guardFull    = "scan", "full"
	guardOff                = "off"
	defaultGuard            = guardScan
	defaultSASTokenValidity = time.Hour
)

// CredentialConfig is the `credential { ... }` block: Microsoft Entra ID
// authentication for `namespace`.
type CredentialConfig struct {
	// Kind: "default" (DefaultAzureCredential, the default), "workload"
	// (WorkloadIdentityCredential), "managed" (ManagedIdentityCredential),
	// "environment" (EnvironmentCredential) or "cli" (AzureCLICredential).
	Kind string `hcl:"kind,optional"`
	// ClientID selects a user-assigned managed identity (managed) or the
	// application (workload); default: AZURE_CLIENT_ID.
	ClientID string `hcl:"client_id,optional"`
	// ResourceID selects a user-assigned managed identity by resource id.
	ResourceID string `hcl:"resource_id,optional"`
	// TenantID (default, workload, cli); default: AZURE_TENANT_ID.
	TenantID string `hcl:"tenant_id,optional"`
	// TokenFile is the workload identity's federated token file; default:
	// AZURE_FEDERATED_TOKEN_FILE.
	TokenFile string `hcl:"token_file,optional"`
}

// ConnConfig is the connection part shared by source and sink.
type ConnConfig struct {
	// ConnectionString authenticates with a shared access key or a shared
	// access signature (Endpoint=sb://...;SharedAccessKeyName=...;
	// SharedAccessKey=... or ...;SharedAccessSignature=...). Set it or
	// Namespace.
	ConnectionString string `hcl:"connection_string,optional"`
	// Namespace is the fully qualified namespace
	// (myns.servicebus.windows.net), authenticated with Microsoft Entra ID
	// (Credential).
	Namespace  string            `hcl:"namespace,optional"`
	Credential *CredentialConfig `hcl:"credential,block"`
	// Endpoint overrides where to connect (a TCP proxy, a private
	// endpoint, a test server): amqps://host[:port] or amqp://host[:port]
	// (no TLS) for AMQP, https://host[:port] or http://host[:port] for
	// HTTPS. Authentication still names the namespace.
	Endpoint string `hcl:"endpoint,optional"`
	// Transport is "amqp" (default: the Azure SDK over AMQP 1.0, port
	// 5671) or "https" (the REST API, port 443).
	Transport string `hcl:"transport,optional"`
	// ApplicationID is added to the SDK's user agent.
	ApplicationID string `hcl:"application_id,optional"`
	// MaxRetries, RetryDelay and RetryDelayMax tune the SDK's retries of
	// one operation (AMQP); 0 / empty keep the SDK's (3, 4s, 2m). -1: no
	// retries.
	MaxRetries    int    `hcl:"max_retries,optional"`
	RetryDelay    string `hcl:"retry_delay,optional"`
	RetryDelayMax string `hcl:"retry_delay_max,optional"`
	// ManagementEndpoint is where qbridge migrate asks for an entity's
	// message counts (the management API, https://host[:port] or
	// http://host[:port]); empty: the REST endpoint with transport =
	// "https", else https://<namespace>. A test server or emulator that
	// serves management on a port of its own needs it with AMQP.
	ManagementEndpoint string `hcl:"management_endpoint,optional"`
}

// SessionsConfig is the `sessions { ... }` block of a source: the entity
// is session-enabled and is consumed session by session.
type SessionsConfig struct {
	// MaxConcurrent is the number of sessions held at once (default 8);
	// each delivers one message at a time, in order.
	MaxConcurrent int `hcl:"max_concurrent,optional"`
	// IdleTimeout releases a session that has had no message for this
	// long, so another can be accepted (default 10s).
	IdleTimeout string `hcl:"idle_timeout,optional"`
}

// SourceConfig is the body of `source "servicebus" { ... }`.
type SourceConfig struct {
	ConnConfig `hcl:",remain"`

	// Queue, or Topic and Subscription, name the entity. A connection
	// string's EntityPath stands for Queue (or Topic) when they are empty.
	Queue        string `hcl:"queue,optional"`
	Topic        string `hcl:"topic,optional"`
	Subscription string `hcl:"subscription,optional"`
	// SubQueue reads a sub-queue instead: "deadletter" (replay
	// dead-lettered messages) or "transfer_deadletter".
	SubQueue string `hcl:"sub_queue,optional"`
	// Sessions makes the source a session receiver (session-enabled
	// entities; AMQP only).
	Sessions *SessionsConfig `hcl:"sessions,block"`
	// MaxMessages bounds one receive: the link credit of one receive call
	// over AMQP (default 16); the number of concurrent peek-lock requests
	// over HTTPS (default 4).
	MaxMessages int `hcl:"max_messages,optional"`
	// ReceiveWait is how long one request waits for a message: the
	// peek-lock timeout over HTTPS, the wait for a free session with
	// sessions (default 60s).
	ReceiveWait string `hcl:"receive_wait,optional"`
	// LockRenewal is how often the adapter renews the locks it holds on
	// its own: session locks, and messages held for a Nack delay (default
	// 10s; also never later than half the remaining lock time). Message
	// locks of deliveries in flight are renewed by the engine (Extend).
	LockRenewal string `hcl:"lock_renewal,optional"`
	// MaxNackDelay caps the delay a Nack is held for before the message
	// is abandoned (Service Bus has no abandon delay); "0s": abandon at
	// once (default 5m).
	MaxNackDelay string `hcl:"max_nack_delay,optional"`
	// DecodeGuard protects the AMQP receiver from messages the Go AMQP
	// library cannot decode (.NET decimal and char properties): "scan"
	// (default), "full" (decode every message twice) or "off".
	DecodeGuard string `hcl:"decode_guard,optional"`

	// Policy is set by the config layer (untagged: gohcl reads `hcl:"-"`
	// as an attribute named "-"); decoding has no policy.
	Policy mapping.Policy

	// Set by Browse (qbridge migrate): peek after sequence number
	// browseAfter instead of receiving.
	browse      bool
	browseAfter uint64
}

// SinkConfig is the body of `sink "servicebus" { ... }`.
type SinkConfig struct {
	ConnConfig `hcl:",remain"`

	// Queue or Topic names the entity; either may be a template such as
	// "orders-{attr.region}" (see mapping/rules.Template).
	Queue string `hcl:"queue,optional"`
	Topic string `hcl:"topic,optional"`
	// DefaultSession is the SessionId of messages without a group key. Set
	// it for a session-enabled entity, which refuses a message without
	// SessionId.
	DefaultSession string `hcl:"default_session,optional"`
	// MaxMessageSize is the largest encoded message in bytes: default
	// 262,144 (Standard); Premium takes up to 100 MB over AMQP and 1 MB
	// over HTTPS.
	MaxMessageSize int `hcl:"max_message_size,optional"`
	// SendTimeout bounds one send or batch (default 60s).
	SendTimeout string `hcl:"send_timeout,optional"`
	// MaxSenders caps the cached senders (one per entity a template
	// yields; default 16).
	MaxSenders int `hcl:"max_senders,optional"`

	// Set by the config layer from the pipeline's mapping block (untagged).
	// The drop callback is not configuration: NewSink takes it.
	Policy      mapping.Policy
	CarrySource bool
	Envelope    mapping.EnvelopeMode
}

// connSettings is ConnConfig resolved.
type connSettings struct {
	cs          *connString // nil with Entra ID
	namespace   string      // FQDN[:port] that authentication names
	cred        CredentialConfig
	https       bool
	dialHost    string // where to connect
	dialPort    string
	plain       bool   // no TLS (emulator, amqp:// or http:// endpoint)
	baseURL     string // HTTPS: scheme://host[:port]
	appID       string
	maxRetries  int32
	retryDelay  time.Duration
	retryMax    time.Duration
	backoff     time.Duration
	backoffMax  time.Duration
	tokenTTL    time.Duration
	mgmtURL     string         // management API: scheme://host[:port]; "": unknown
	description string         // for logs: namespace and transport, no secrets
	rootCAs     *x509.CertPool // nil: the system's (tests set their own)
}

func (c *ConnConfig) resolve() (*connSettings, error) {
	s := &connSettings{backoff: DefaultBackoff, backoffMax: DefaultBackoffMax, tokenTTL: defaultSASTokenValidity}
	switch strings.ToLower(c.Transport) {
	case "", transportAMQP:
	case transportHTTPS:
		s.https = true
	default:
		return nil, adaptercfg.Errorf("transport", "%q: want amqp or https", c.Transport)
	}
	switch {
	case c.ConnectionString == "" && c.Namespace == "":
		return nil, adaptercfg.Errorf("connection_string", "required (or set namespace for Microsoft Entra ID)")
	case c.ConnectionString != "" && c.Namespace != "":
		return nil, adaptercfg.Fields("connection_string", "connection_string and namespace", "set one")
	case c.ConnectionString != "" && c.Credential != nil:
		return nil, adaptercfg.Errorf("credential", "only used with namespace (a connection string carries its own key)")
	}
	if c.ConnectionString != "" {
		cs, err := parseConnString(c.ConnectionString)
		if err != nil {
			return nil, adaptercfg.Errorf("connection_string", "%w", err)
		}
		s.cs, s.namespace = cs, cs.fqdn
		s.plain = cs.emulator
	} else {
		ns := c.Namespace
		if strings.Contains(ns, "://") {
			u, err := url.Parse(ns)
			if err != nil || u.Host == "" {
				return nil, adaptercfg.Errorf("namespace", "%q: want the fully qualified name, e.g. myns.servicebus.windows.net", adaptercfg.RedactURL(ns))
			}
			ns = u.Host
		}
		if h, _ := hostPort(ns, ""); !strings.Contains(h, ".") && h != "localhost" {
			return nil, adaptercfg.Errorf("namespace", "%q: want the fully qualified name, e.g. %s.servicebus.windows.net", adaptercfg.RedactURL(c.Namespace), h)
		}
		s.namespace = ns
		if c.Credential != nil {
			s.cred = *c.Credential
		}
		if err := validateCredential(&s.cred); err != nil {
			return nil, err
		}
	}
	host, port := hostPort(s.namespace, "")
	s.dialHost, s.dialPort = host, port
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, adaptercfg.Errorf("endpoint", "%q: want scheme://host[:port]", adaptercfg.RedactURL(c.Endpoint))
		}
		want := map[bool][2]string{false: {"amqps", "amqp"}, true: {"https", "http"}}[s.https]
		switch u.Scheme {
		case want[0]:
			s.plain = false
		case want[1]:
			s.plain = true
		default:
			return nil, adaptercfg.Errorf("endpoint", "%q: want %s:// or %s:// with transport %q", adaptercfg.RedactURL(c.Endpoint), want[0], want[1], map[bool]string{false: transportAMQP, true: transportHTTPS}[s.https])
		}
		s.dialHost, s.dialPort = u.Hostname(), u.Port()
	}
	if s.dialPort == "" {
		s.dialPort = map[[2]bool]string{{false, false}: "5671", {false, true}: "5672", {true, false}: "443", {true, true}: "80"}[[2]bool{s.https, s.plain}]
	}
	scheme, defPort := "https", "443"
	if s.plain {
		scheme, defPort = "http", "80"
	}
	s.baseURL = scheme + "://" + net.JoinHostPort(s.dialHost, s.dialPort)
	if s.dialPort == defPort { // the URL leaves the scheme's port out
		s.baseURL = scheme + "://" + strings.TrimSuffix(net.JoinHostPort(s.dialHost, ""), ":")
	}
	switch {
	case c.ManagementEndpoint != "":
		u, err := url.Parse(c.ManagementEndpoint)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, adaptercfg.Errorf("management_endpoint", "%q: want https://host[:port] or http://host[:port]", adaptercfg.RedactURL(c.ManagementEndpoint))
		}
		s.mgmtURL = u.Scheme + "://" + u.Host
	case s.https:
		s.mgmtURL = s.baseURL
	case s.plain:
		// An emulator over AMQP: where it serves management, if anywhere,
		// is not known (mgmtURL stays empty: counts are unsupported).
	default:
		s.mgmtURL = "https://" + s.namespace
	}
	s.appID = c.ApplicationID
	switch {
	case c.MaxRetries < -1:
		return nil, adaptercfg.Errorf("max_retries", "%d: want -1 (none), 0 (the SDK's default) or more", c.MaxRetries)
	case c.MaxRetries > 100:
		return nil, adaptercfg.Errorf("max_retries", "%d: at most 100", c.MaxRetries)
	}
	s.maxRetries = int32(c.MaxRetries)
	var err error
	if s.retryDelay, err = adaptercfg.PositiveDuration("retry_delay", c.RetryDelay, 0); err != nil {
		return nil, err
	}
	if s.retryMax, err = adaptercfg.PositiveDuration("retry_delay_max", c.RetryDelayMax, 0); err != nil {
		return nil, err
	}
	if s.retryDelay > 0 {
		s.backoff = s.retryDelay
	}
	if s.retryMax > 0 {
		s.backoffMax = s.retryMax
	}
	auth := "entra-id/" + s.cred.Kind
	if s.cs != nil {
		auth = "sas-key"
		if s.cs.sas != "" {
			auth = "sas-token"
		}
	}
	s.description = fmt.Sprintf("%s (%s, %s)", s.namespace, map[bool]string{false: transportAMQP, true: transportHTTPS}[s.https], auth)
	return s, nil
}

func validateCredential(c *CredentialConfig) error {
	if c.Kind == "" {
		c.Kind = credentialDefault
	}
	switch c.Kind {
	case credentialDefault, credentialCLI:
		if c.ClientID != "" || c.ResourceID != "" || c.TokenFile != "" {
			return adaptercfg.Errorf("credential", "kind %q takes only tenant_id (set AZURE_CLIENT_ID for the client)", c.Kind)
		}
	case credentialWorkload:
		if c.ResourceID != "" {
			return adaptercfg.Errorf("credential.resource_id", "only used with kind \"managed\"")
		}
	case credentialManaged:
		if c.TenantID != "" || c.TokenFile != "" {
			return adaptercfg.Errorf("credential", "kind \"managed\" takes client_id or resource_id only")
		}
		if c.ClientID != "" && c.ResourceID != "" {
			return adaptercfg.Fields("credential.client_id", "credential.client_id and credential.resource_id", "set one")
		}
	case credentialEnvironment:
		if *c != (CredentialConfig{Kind: c.Kind}) {
			return adaptercfg.Errorf("credential", "kind \"environment\" reads AZURE_* variables only; remove the other fields")
		}
	default:
		return adaptercfg.Errorf("credential.kind", "%q: want default, workload, managed, environment or cli", c.Kind)
	}
	return nil
}

// sourceSettings is SourceConfig resolved.
type sourceSettings struct {
	conn         *connSettings
	queue        string
	topic        string
	subscription string
	subQueue     string
	sessions     bool
	maxSessions  int
	sessionIdle  time.Duration
	maxMessages  int
	receiveWait  time.Duration
	lockRenewal  time.Duration
	maxNackDelay time.Duration
	guard        string
	browse       bool   // peek, settle nothing (Browse)
	browseAfter  int64  // the last sequence number already read
	entityPath   string // as the SDK names it (Source.Address)
	restPath     string // as the REST API names it
}

// Validate checks the configuration; messages name the offending field.
func (c *SourceConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SourceConfig) resolve() (*sourceSettings, error) {
	conn, err := c.ConnConfig.resolve()
	if err != nil {
		return nil, err
	}
	s := &sourceSettings{conn: conn, queue: c.Queue, topic: c.Topic, subscription: c.Subscription}
	if conn.cs != nil && conn.cs.entityPath != "" {
		switch {
		case s.queue == "" && s.topic == "" && s.subscription == "":
			s.queue = conn.cs.entityPath
		case s.queue == "" && s.topic == "":
			s.topic = conn.cs.entityPath
		case s.queue != "" && s.queue != conn.cs.entityPath, s.topic != "" && s.topic != conn.cs.entityPath:
			return nil, adaptercfg.Errorf("connection_string", "EntityPath %q differs from the queue or topic configured", conn.cs.entityPath)
		}
	}
	switch {
	case s.queue != "" && (s.topic != "" || s.subscription != ""):
		return nil, adaptercfg.Fields("queue", "queue and topic/subscription", "set one")
	case s.subscription != "" && s.topic == "":
		return nil, adaptercfg.Errorf("topic", "required with subscription")
	case s.queue == "" && s.topic == "":
		return nil, adaptercfg.Errorf("queue", "required (or topic and subscription)")
	case s.topic != "" && s.subscription == "":
		return nil, adaptercfg.Errorf("subscription", "required with topic")
	}
	for field, v := range map[string]string{"queue": s.queue, "topic": s.topic, "subscription": s.subscription} {
		if err := entityName(field, v, false); err != nil {
			return nil, err
		}
	}
	switch c.SubQueue {
	case "", subQueueDeadLetter, subQueueTransferDL:
		s.subQueue = c.SubQueue
	default:
		return nil, adaptercfg.Errorf("sub_queue", "%q: want deadletter or transfer_deadletter", c.SubQueue)
	}
	if c.Sessions != nil {
		switch {
		case conn.https:
			return nil, adaptercfg.Errorf("sessions", "the HTTPS transport cannot receive from sessions (the REST API has no session receiver); use transport = \"amqp\"")
		case s.subQueue != "":
			return nil, adaptercfg.Errorf("sessions", "a sub-queue has no sessions; remove the sessions block to read the dead-letter queue")
		}
		s.sessions = true
		s.maxSessions = c.Sessions.MaxConcurrent
		switch {
		case s.maxSessions == 0:
			s.maxSessions = DefaultMaxSessions
		case s.maxSessions < 1 || s.maxSessions > 1000:
			return nil, adaptercfg.Errorf("sessions.max_concurrent", "%d: want 1 to 1000", s.maxSessions)
		}
		if s.sessionIdle, err = adaptercfg.PositiveDuration("sessions.idle_timeout", c.Sessions.IdleTimeout, DefaultSessionIdle); err != nil {
			return nil, err
		}
	}
	s.maxMessages = c.MaxMessages
	switch {
	case s.maxMessages == 0 && conn.https:
		s.maxMessages = DefaultHTTPSReceivers
	case s.maxMessages == 0:
		s.maxMessages = DefaultMaxMessages
	case s.maxMessages < 1 || s.maxMessages > 5000:
		return nil, adaptercfg.Errorf("max_messages", "%d: want 1 to 5000", s.maxMessages)
	case conn.https && s.maxMessages > 64:
		return nil, adaptercfg.Errorf("max_messages", "%d: at most 64 concurrent requests over HTTPS", s.maxMessages)
	}
	if s.receiveWait, err = adaptercfg.PositiveDuration("receive_wait", c.ReceiveWait, DefaultReceiveWait); err != nil {
		return nil, err
	}
	if conn.https && (s.receiveWait%time.Second != 0 || s.receiveWait > maxHTTPSReceiveWait) {
		return nil, adaptercfg.Errorf("receive_wait", "%s: whole seconds up to %s over HTTPS", s.receiveWait, maxHTTPSReceiveWait)
	}
	if s.lockRenewal, err = adaptercfg.PositiveDuration("lock_renewal", c.LockRenewal, DefaultLockRenewal); err != nil {
		return nil, err
	}
	if s.maxNackDelay, err = adaptercfg.Duration("max_nack_delay", c.MaxNackDelay, DefaultMaxNackDelay); err != nil {
		return nil, err
	}
	if s.maxNackDelay < 0 {
		return nil, adaptercfg.Errorf("max_nack_delay", "%s: must not be negative", s.maxNackDelay)
	}
	switch c.DecodeGuard {
	case "":
		s.guard = defaultGuard
	case guardScan, guardFull, guardOff:
		s.guard = c.DecodeGuard
	default:
		return nil, adaptercfg.Errorf("decode_guard", "%q: want scan, full or off", c.DecodeGuard)
	}
	if conn.https && c.DecodeGuard != "" {
		return nil, adaptercfg.Errorf("decode_guard", "only used with transport = \"amqp\"")
	}
	s.entityPath, s.restPath = entityPaths(s.queue, s.topic, s.subscription, s.subQueue)
	if c.browse {
		if c.browseAfter > math.MaxInt64 {
			return nil, fmt.Errorf("browse position %d: beyond Service Bus sequence numbers (int64)", c.browseAfter)
		}
		s.browse, s.browseAfter = true, int64(c.browseAfter)
	}
	return s, nil
}

// entityPaths names the entity as the SDK does (Source.Address, AMQP
// node) and as the REST API does.
func entityPaths(queue, topic, sub, subQueue string) (sdk, rest string) {
	if queue != "" {
		sdk, rest = queue, queue
	} else {
		sdk, rest = topic+"/Subscriptions/"+sub, topic+"/subscriptions/"+sub
	}
	switch subQueue {
	case subQueueDeadLetter:
		sdk, rest = sdk+"/$DeadLetterQueue", rest+"/$DeadLetterQueue"
	case subQueueTransferDL:
		sdk, rest = sdk+"/$Transfer/$DeadLetterQueue", rest+"/$Transfer/$DeadLetterQueue"
	}
	return sdk, rest
}

// entityName checks a queue, topic or subscription name (260 characters
// for queues and topics, 50 for subscriptions; templates are checked when
// rendered).
func entityName(field, v string, template bool) error {
	if v == "" || template {
		return nil
	}
	limit := 260
	if field == "subscription" {
		limit = 50
	}
	switch {
	case len(v) > limit:
		return adaptercfg.Errorf(field, "%q: longer than %d characters", v, limit)
	case strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/") || strings.Contains(v, "//"):
		return adaptercfg.Errorf(field, "%q: must not start or end with / or contain //", v)
	case strings.ContainsAny(v, "?#\\ \t\r\n"), strings.Contains(v, "$"):
		return adaptercfg.Errorf(field, "%q: must not contain spaces, $, ?, # or \\", v)
	}
	return nil
}

// sinkSettings is SinkConfig resolved.
type sinkSettings struct {
	conn           *connSettings
	entity         *rules.Template
	entityField    string
	defaultSession string
	maxMessageSize int
	maxConfigured  bool // max_message_size was set (else the queue's own limit may replace the default)
	sendTimeout    time.Duration
	maxSenders     int
	opt            mapping.Options
}

// Validate checks the configuration; messages name the offending field.
func (c *SinkConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SinkConfig) resolve() (*sinkSettings, error) {
	conn, err := c.ConnConfig.resolve()
	if err != nil {
		return nil, err
	}
	s := &sinkSettings{conn: conn}
	queue, topic := c.Queue, c.Topic
	if conn.cs != nil && conn.cs.entityPath != "" {
		switch {
		case queue == "" && topic == "":
			queue = conn.cs.entityPath
		case queue != conn.cs.entityPath && topic != conn.cs.entityPath:
			return nil, adaptercfg.Errorf("connection_string", "EntityPath %q differs from the queue or topic configured", conn.cs.entityPath)
		}
	}
	var src string
	switch {
	case queue != "" && topic != "":
		return nil, adaptercfg.Fields("queue", "queue and topic", "set one")
	case queue == "" && topic == "":
		return nil, adaptercfg.Errorf("queue", "required (or topic)")
	case queue != "":
		s.entityField, src = "queue", queue
	default:
		s.entityField, src = "topic", topic
	}
	if s.entity, err = rules.Parse(src); err != nil {
		return nil, adaptercfg.Errorf(s.entityField, "%q: %w", src, err)
	}
	if err := entityName(s.entityField, src, strings.Contains(src, "{")); err != nil {
		return nil, err
	}
	s.defaultSession = c.DefaultSession
	if n := len(s.defaultSession); n > sbmap.MaxIDLength {
		return nil, adaptercfg.Errorf("default_session", "%d characters, more than Service Bus's %d", n, sbmap.MaxIDLength)
	}
	limit := MaxAMQPMessageSize
	if conn.https {
		limit = MaxHTTPSMessageSize
	}
	s.maxMessageSize = c.MaxMessageSize
	s.maxConfigured = c.MaxMessageSize != 0
	switch {
	case s.maxMessageSize == 0:
		s.maxMessageSize = DefaultMaxMessageSize
	case s.maxMessageSize < 1024 || s.maxMessageSize > limit:
		return nil, adaptercfg.Errorf("max_message_size", "%d: want 1024 to %d over %s", s.maxMessageSize, limit, map[bool]string{false: "AMQP", true: "HTTPS"}[conn.https])
	}
	if s.sendTimeout, err = adaptercfg.PositiveDuration("send_timeout", c.SendTimeout, DefaultSendTimeout); err != nil {
		return nil, err
	}
	s.maxSenders = c.MaxSenders
	switch {
	case s.maxSenders == 0:
		s.maxSenders = DefaultMaxSenders
	case s.maxSenders < 1 || s.maxSenders > 1024:
		return nil, adaptercfg.Errorf("max_senders", "%d: want 1 to 1024", s.maxSenders)
	}
	s.opt = mapping.Options{Policy: c.Policy, MaxMessageSize: s.maxMessageSize, CarrySource: c.CarrySource, Envelope: c.Envelope}
	if conn.https && s.opt.MaxMessageSize == 0 {
		s.opt.MaxMessageSize = sbrest.DefaultMaxMessageSize
	}
	return s, nil
}
