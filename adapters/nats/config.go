package nats

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/pbnjay/memory"

	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

// Defaults applied by NewSource/NewSink to fields left at their zero value.
const (
	DefaultGroupHeader = "Qbridge-Group"
	DefaultGroupToken  = "_"
	// Core subscriptions hold what the pipeline has not taken yet in the
	// client: core NATS has no flow control, so this buffer is all that
	// stands between a burst and a loss (the slow-consumer limit). Messages:
	// at least nats.go's default (AutoBufferSize). Bytes: see AutoBufferBytes.
	DefaultBufferSize = nats.DefaultSubPendingMsgsLimit
	// MinAutoBufferBytes and MaxAutoBufferBytes bound the automatic
	// buffer_bytes: nats.go's default (64 MiB) and 1 GiB; without a memory
	// limit it is at least MinHostBufferBytes.
	MinAutoBufferBytes    = nats.DefaultSubPendingBytesLimit
	MaxAutoBufferBytes    = 1 << 30
	MinHostBufferBytes    = 256 << 20
	DefaultConnectTimeout = 5 * time.Second
	DefaultReconnectWait  = 2 * time.Second
	// DefaultPingInterval: nats.go pings every 2 minutes and gives up after
	// two unanswered, so a server that stalls with the connection open
	// (a process stopped, packets dropped) looked connected for 4 to 6
	// minutes; at 20 s it is found within a minute.
	DefaultPingInterval      = 20 * time.Second
	DefaultAckWait           = 30 * time.Second
	DefaultMaxAckPending     = 1000
	DefaultFetchBatch        = 64
	DefaultFetchWait         = 5 * time.Second
	DefaultPublishMaxPending = 4000
	DefaultAckTimeout        = 10 * time.Second
	DefaultDuplicateWindow   = 2 * time.Minute
	DefaultPriorityGroup     = "qbridge"
	// MinPinTimeout: a pinned client that receives pulls again within
	// maxPullWait; the timeout must leave it room.
	MinPinTimeout = 2 * time.Second
)

// AutoBufferBytes is a core source's buffer_bytes when none is set. Under a
// memory limit (GOMEMLIMIT, which qbridge derives from the container's
// limit) it is a quarter of it, between MinAutoBufferBytes and
// MaxAutoBufferBytes: the process owns that memory, and a full buffer peaks
// at 1.2 – 2.4 times its size in resident memory. Without one it is an eighth
// of the host's memory (hostMemory; 0 when unknown), between
// MinHostBufferBytes and MaxAutoBufferBytes: the host is shared. The buffer
// fills only during a burst the pipeline cannot keep up with; at 256 MiB the
// benchmark lost 4 – 19 % of a 1,000,000-message burst of 1 KiB that 1 GiB
// held whole (docs/benchmarks.md). It is one budget for the process: the
// core sources that leave buffer_bytes out share it (autoBuffers).
func AutoBufferBytes(memoryLimit int64, hostMemory uint64) int {
	if memoryLimit <= 0 || memoryLimit == math.MaxInt64 {
		return int(min(max(int64(min(hostMemory/8, math.MaxInt64)), MinHostBufferBytes), MaxAutoBufferBytes))
	}
	return int(min(max(memoryLimit/4, MinAutoBufferBytes), MaxAutoBufferBytes))
}

// AutoBufferSize is a core source's buffer_size when none is set: as many
// 1 KiB messages as bufferBytes holds, and at least nats.go's default, so
// that for messages of 1 KiB or more the byte budget is the limit.
func AutoBufferSize(bufferBytes int) int {
	return max(DefaultBufferSize, bufferBytes>>10)
}

// TLSConfig is the `tls { ... }` block.
type TLSConfig = adaptercfg.TLS

// JetStreamSourceConfig is the source's `jetstream { ... }` block. Its
// presence switches the source from core NATS to a durable pull consumer.
type JetStreamSourceConfig struct {
	Stream string `hcl:"stream,optional"`
	// Durable is the durable consumer name; Consumer is an alias for it.
	Durable  string `hcl:"durable,optional"`
	Consumer string `hcl:"consumer,optional"`
	// Bind only binds to an existing consumer and never creates one.
	Bind           bool     `hcl:"bind,optional"`
	FilterSubjects []string `hcl:"filter_subjects,optional"`
	AckWait        string   `hcl:"ack_wait,optional"`
	MaxDeliver     int      `hcl:"max_deliver,optional"`
	MaxAckPending  int      `hcl:"max_ack_pending,optional"`
	FetchBatch     int      `hcl:"fetch_batch,optional"`
	FetchWait      string   `hcl:"fetch_wait,optional"`
	CreateStream   bool     `hcl:"create_stream,optional"`
	StreamSubjects []string `hcl:"stream_subjects,optional"`
	// Pinned (default true) creates the consumer with a priority group and
	// the pinned-client policy: one client receives at a time, the others
	// stand by and take over after PinTimeout (nats-server 2.11+).
	Pinned        *bool  `hcl:"pinned,optional"`
	PriorityGroup string `hcl:"priority_group,optional"`
	PinTimeout    string `hcl:"pin_timeout,optional"`
	// Partitions is how many partitions the stream's partition(N, ...)
	// subject transform makes; Partition (0-based) is the one this source
	// reads: "{partition}" in durable and filter_subjects stands for it.
	Partitions int  `hcl:"partitions,optional"`
	Partition  *int `hcl:"partition,optional"`
	// The stream_* limits of a stream create_stream makes.
	StreamLimitsConfig `hcl:",remain"`
}

// JetStreamSinkConfig is the sink's `jetstream { ... }` block. Its presence
// switches the sink from core publish+flush to JetStream publish with ack.
type JetStreamSinkConfig struct {
	// Stream, when set, must exist at start (or is created with
	// create_stream). Publishes are not pinned to it: Nats-Expected-Stream
	// would be stored with every message and travel on as an annotation.
	Stream          string   `hcl:"stream,optional"`
	CreateStream    bool     `hcl:"create_stream,optional"`
	StreamSubjects  []string `hcl:"stream_subjects,optional"`
	DuplicateWindow string   `hcl:"duplicate_window,optional"`
	MaxPending      int      `hcl:"max_pending,optional"`
	AckTimeout      string   `hcl:"ack_timeout,optional"`
	// The stream_* limits of a stream create_stream makes.
	StreamLimitsConfig `hcl:",remain"`
}

// ConnConfig is the connection part of a source or sink block: the server
// URL (or the embedded server), credentials, TLS and timeouts.
type ConnConfig struct {
	URL            string     `hcl:"url,optional"`
	User           string     `hcl:"user,optional"`
	Password       string     `hcl:"password,optional"`
	Token          string     `hcl:"token,optional"`
	NKeySeedFile   string     `hcl:"nkey_seed_file,optional"`
	CredsFile      string     `hcl:"creds_file,optional"`
	TLS            *TLSConfig `hcl:"tls,block"`
	ConnectTimeout string     `hcl:"connect_timeout,optional"`
	ReconnectWait  string     `hcl:"reconnect_wait,optional"`
	PingInterval   string     `hcl:"ping_interval,optional"`
	Name           string     `hcl:"name,optional"`

	Embedded bool   `hcl:"embedded,optional"`
	StoreDir string `hcl:"store_dir,optional"`
	Port     int    `hcl:"port,optional"`
}

// SourceConfig is the body of `source "nats" { ... }`.
type SourceConfig struct {
	ConnConfig  `hcl:",remain"`
	Subject     string `hcl:"subject,optional"`
	QueueGroup  string `hcl:"queue_group,optional"`
	BufferSize  int    `hcl:"buffer_size,optional"`
	BufferBytes int    `hcl:"buffer_bytes,optional"`

	JetStream *JetStreamSourceConfig `hcl:"jetstream,block"`

	GroupHeader           string `hcl:"group_header,optional"`
	GroupFromSubjectToken int    `hcl:"group_from_subject_token,optional"`

	// Set by Browse (qbridge migrate), not from HCL: read the stream
	// without acknowledging, after this stream sequence.
	browse      bool
	browseAfter uint64
	// Set by ForMigration (qbridge migrate), not from HCL: never create
	// the stream, whatever create_stream says.
	migrating bool
}

// SinkConfig is the body of `sink "nats" { ... }`.
type SinkConfig struct {
	ConnConfig `hcl:",remain"`
	// Subject is a template: literal text with {group}, {id}, {subject}
	// and {attr.NAME} placeholders.
	Subject           string `hcl:"subject,optional"`
	DefaultGroupToken string `hcl:"default_group_token,optional"`
	GroupHeader       string `hcl:"group_header,optional"`

	JetStream *JetStreamSinkConfig `hcl:"jetstream,block"`

	// Set by the caller from the pipeline's mapping block, not from HCL.
	// They carry no hcl tag because gohcl reads `hcl:"-"` as a required
	// attribute named "-"; untagged fields are skipped. The drop callback
	// is not configuration: NewSink takes it.
	Policy         mapping.Policy
	MaxMessageSize int
	CarrySource    bool
	Envelope       mapping.EnvelopeMode
}

// connConfig is the resolved connection part shared by source and sink.
type connConfig struct {
	URL, User, Password, Token, NKeySeedFile, CredsFile string
	TLS                                                 *TLSConfig
	ConnectTimeout, ReconnectWait, PingInterval         time.Duration
	Name                                                string
	Embedded                                            bool
	StoreDir                                            string
	Port                                                int
	// NoReconnectBuffer makes a publish during a reconnect fail instead of
	// waiting in nats.go's reconnect buffer (sinks: see conn.options).
	NoReconnectBuffer bool
}

// resolve checks the connection fields and applies their defaults.
func (c *ConnConfig) resolve() (connConfig, error) {
	cc := connConfig{
		URL: c.URL, User: c.User, Password: c.Password, Token: c.Token, NKeySeedFile: c.NKeySeedFile, CredsFile: c.CredsFile,
		TLS: c.TLS, Name: c.Name, Embedded: c.Embedded, StoreDir: c.StoreDir, Port: c.Port,
	}
	var err error
	if cc.ConnectTimeout, err = adaptercfg.PositiveDuration("connect_timeout", c.ConnectTimeout, DefaultConnectTimeout); err != nil {
		return cc, err
	}
	if cc.ReconnectWait, err = adaptercfg.PositiveDuration("reconnect_wait", c.ReconnectWait, DefaultReconnectWait); err != nil {
		return cc, err
	}
	if cc.PingInterval, err = adaptercfg.PositiveDuration("ping_interval", c.PingInterval, DefaultPingInterval); err != nil {
		return cc, err
	}
	if cc.Name == "" {
		cc.Name = "qbridge"
	}
	if c.User == "" && c.Password != "" {
		return cc, adaptercfg.Errorf("password", "set without user")
	}
	if c.User != "" && c.Password == "" {
		return cc, adaptercfg.Errorf("user", "set without password")
	}
	methods := 0
	for _, set := range []bool{c.User != "", c.Token != "", c.NKeySeedFile != "", c.CredsFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return cc, adaptercfg.Fields("user", "user/password, token, nkey_seed_file and creds_file", "set at most one")
	}
	if c.Port < 0 || c.Port > 65535 {
		return cc, adaptercfg.Errorf("port", "%d out of range", c.Port)
	}
	if c.Embedded {
		switch {
		case c.URL != "":
			return cc, adaptercfg.Errorf("url", "must be empty when embedded = true (the client connects to the embedded server)")
		case c.NKeySeedFile != "" || c.CredsFile != "":
			return cc, adaptercfg.Fields("nkey_seed_file", "nkey_seed_file/creds_file", "not supported with embedded = true (use user/password or token)")
		case c.TLS != nil:
			return cc, adaptercfg.Errorf("tls", "not supported with embedded = true (it listens on 127.0.0.1 only)")
		}
		if cc.StoreDir == "" {
			cc.StoreDir = filepath.Join(os.TempDir(), "qbridge-nats")
		}
		abs, err := filepath.Abs(cc.StoreDir)
		if err != nil {
			return cc, adaptercfg.Errorf("store_dir", "%w", err)
		}
		cc.StoreDir = abs
		return cc, nil
	}
	if c.StoreDir != "" {
		return cc, adaptercfg.Errorf("store_dir", "only valid with embedded = true")
	}
	if c.Port != 0 {
		return cc, adaptercfg.Errorf("port", "only valid with embedded = true (put the port in url)")
	}
	if c.URL == "" {
		return cc, adaptercfg.Errorf("url", "required (or set embedded = true)")
	}
	if _, err := serverURLs(c.URL); err != nil {
		return cc, adaptercfg.Wrap("url", err)
	}
	if c.TLS != nil && (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return cc, adaptercfg.Fields("tls.cert_file", "tls.cert_file and tls.key_file", "set both or neither")
	}
	return cc, nil
}

// sourceSettings is SourceConfig with defaults applied and durations parsed.
type sourceSettings struct {
	conn        connConfig
	subject     string
	queue       string
	bufferSize  int
	bufferBytes int
	groupHeader string
	groupToken  int
	js          *jsSourceSettings
	// autoBufferBytes, autoBufferSize: left out; the automatic buffer is
	// shared by the process's core sources (autoBuffers).
	autoBufferBytes, autoBufferSize bool
}

type jsSourceSettings struct {
	stream         string
	durable        string
	bind           bool
	filterSubjects []string
	ackWait        time.Duration
	maxDeliver     int
	maxAckPending  int
	fetchBatch     int
	fetchWait      time.Duration
	createStream   bool
	noCreate       bool // a migration: the stream must exist (ForMigration)
	streamSubjects []string
	limits         jetstream.StreamConfig // retention and limits of a created stream
	// pinned: create the consumer with a pinned priority group.
	pinned           bool
	priorityGroup    string
	priorityGroupSet bool // set in the configuration, not defaulted
	pinTimeout       time.Duration
	// partitions > 0: the stream is partitioned and this source reads
	// partition (durable and filterSubjects have it filled in);
	// transform is the stream's subject transform create_stream makes.
	partitions int
	partition  int
	transform  *partitionTransform
}

// Validate checks the configuration; messages name the offending field.
func (c *SourceConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SourceConfig) resolve() (*sourceSettings, error) {
	cc, err := c.ConnConfig.resolve()
	if err != nil {
		return nil, err
	}
	s := &sourceSettings{
		conn: cc, subject: c.Subject, queue: c.QueueGroup, bufferSize: c.BufferSize, bufferBytes: c.BufferBytes,
		groupHeader: c.GroupHeader, groupToken: c.GroupFromSubjectToken,
	}
	if s.groupHeader == "" {
		s.groupHeader = DefaultGroupHeader
	}
	if err := checkHeaderName("group_header", s.groupHeader); err != nil {
		return nil, err
	}
	if s.groupToken < 0 {
		return nil, adaptercfg.Errorf("group_from_subject_token", "%d must be >= 1 (1 is the first token) or 0 (off)", s.groupToken)
	}
	if s.bufferSize < 0 {
		return nil, adaptercfg.Errorf("buffer_size", "%d must be positive", s.bufferSize)
	}
	if s.bufferBytes < 0 {
		return nil, adaptercfg.Errorf("buffer_bytes", "%d must be positive", s.bufferBytes)
	}
	if s.bufferBytes == 0 {
		s.autoBufferBytes = true
		s.bufferBytes = AutoBufferBytes(debug.SetMemoryLimit(-1), memory.TotalMemory())
	}
	if s.bufferSize == 0 {
		s.autoBufferSize = true
		s.bufferSize = AutoBufferSize(s.bufferBytes)
	}
	if s.subject != "" {
		if err := checkSubject("subject", s.subject, true); err != nil {
			return nil, err
		}
	}
	if c.JetStream == nil {
		if s.subject == "" {
			return nil, adaptercfg.Errorf("subject", "required for a core NATS source")
		}
		if s.groupToken > 0 {
			if err := checkGroupToken(s.subject, s.groupToken); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	if s.queue != "" {
		return nil, adaptercfg.Errorf("queue_group", "not used with jetstream (consumers of one durable share its messages already)")
	}
	j := c.JetStream
	js := &jsSourceSettings{
		stream: j.Stream, durable: j.Durable, bind: j.Bind, maxDeliver: j.MaxDeliver,
		maxAckPending: j.MaxAckPending, fetchBatch: j.FetchBatch, createStream: j.CreateStream,
		noCreate: c.migrating,
	}
	if js.stream == "" {
		return nil, adaptercfg.Errorf("jetstream.stream", "required")
	}
	if err := checkName("jetstream.stream", js.stream); err != nil {
		return nil, err
	}
	switch {
	case j.Durable != "" && j.Consumer != "" && j.Durable != j.Consumer:
		return nil, adaptercfg.Fields("jetstream.durable", "jetstream.durable and jetstream.consumer", "set one (consumer is an alias of durable)")
	case j.Durable == "":
		js.durable = j.Consumer
	}
	if js.durable == "" {
		return nil, adaptercfg.Errorf("jetstream.durable", "required (the durable consumer name)")
	}
	filterTemplates, err := js.resolvePartition(j, s.subject)
	if err != nil {
		return nil, err
	}
	if err := checkName("jetstream.durable", js.durable); err != nil {
		return nil, err
	}
	js.filterSubjects = make([]string, len(filterTemplates))
	for i, f := range filterTemplates {
		js.filterSubjects[i] = fillPartition(f, js.partition)
	}
	for i, f := range js.filterSubjects {
		if err := checkSubject(fmt.Sprintf("jetstream.filter_subjects[%d]", i), f, true); err != nil {
			return nil, err
		}
	}
	if js.ackWait, err = adaptercfg.PositiveDuration("jetstream.ack_wait", j.AckWait, DefaultAckWait); err != nil {
		return nil, err
	}
	if js.fetchWait, err = adaptercfg.PositiveDuration("jetstream.fetch_wait", j.FetchWait, DefaultFetchWait); err != nil {
		return nil, err
	}
	if js.maxDeliver < -1 {
		return nil, adaptercfg.Errorf("jetstream.max_deliver", "%d must be -1 (unlimited), 0 (default: unlimited) or positive", js.maxDeliver)
	}
	if js.maxAckPending < -1 {
		return nil, adaptercfg.Errorf("jetstream.max_ack_pending", "%d must be -1 (unlimited) or positive", js.maxAckPending)
	}
	if js.maxAckPending == 0 {
		js.maxAckPending = DefaultMaxAckPending
	}
	if js.fetchBatch < 0 {
		return nil, adaptercfg.Errorf("jetstream.fetch_batch", "%d must be positive", js.fetchBatch)
	}
	if js.fetchBatch == 0 {
		js.fetchBatch = DefaultFetchBatch
	}
	if js.createStream {
		if js.bind {
			return nil, adaptercfg.Errorf("jetstream.create_stream", "conflicts with jetstream.bind = true")
		}
		js.streamSubjects = append([]string(nil), j.StreamSubjects...)
		if js.partitions > 0 {
			if js.transform, err = newPartitionTransform(filterTemplates, js.streamSubjects, js.partitions); err != nil {
				return nil, err
			}
			js.streamSubjects = []string{js.transform.source}
		}
		if len(js.streamSubjects) == 0 {
			js.streamSubjects = js.filterSubjects
		}
		if len(js.streamSubjects) == 0 {
			return nil, adaptercfg.Errorf("jetstream.stream_subjects", "required with create_stream (or set subject / filter_subjects)")
		}
		for i, f := range js.streamSubjects {
			if err := checkSubject(fmt.Sprintf("jetstream.stream_subjects[%d]", i), f, true); err != nil {
				return nil, err
			}
		}
	} else if len(j.StreamSubjects) > 0 {
		return nil, adaptercfg.Errorf("jetstream.stream_subjects", "only used with create_stream = true")
	}
	if err := j.StreamLimitsConfig.apply(js.createStream, &js.limits); err != nil {
		return nil, err
	}
	if s.groupToken > 0 {
		for _, f := range js.filterSubjects {
			if err := checkGroupToken(f, s.groupToken); err != nil {
				return nil, err
			}
		}
		if js.partitions > 0 {
			if err := checkPartitionGroupToken(filterTemplates, s.groupToken); err != nil {
				return nil, err
			}
		}
	}
	if err := js.resolvePinned(j); err != nil {
		return nil, err
	}
	s.js = js
	return s, nil
}

// resolvePinned applies the failover settings: pinned by default, the
// pin timeout defaulting to ack_wait, at least MinPinTimeout (by then a
// dead client's messages are back, so the next one starts at once).
func (js *jsSourceSettings) resolvePinned(j *JetStreamSourceConfig) error {
	js.pinned = j.Pinned == nil || *j.Pinned
	js.priorityGroup, js.priorityGroupSet = j.PriorityGroup, j.PriorityGroup != ""
	if js.priorityGroup == "" {
		js.priorityGroup = DefaultPriorityGroup
	}
	if !validPriorityGroup(js.priorityGroup) {
		return adaptercfg.Errorf("jetstream.priority_group", "%q must be 1 to 16 of A-Z a-z 0-9 / _ = -", js.priorityGroup)
	}
	var err error
	if js.pinTimeout, err = adaptercfg.PositiveDuration("jetstream.pin_timeout", j.PinTimeout, max(js.ackWait, MinPinTimeout)); err != nil {
		return err
	}
	if js.pinTimeout < MinPinTimeout {
		return adaptercfg.Errorf("jetstream.pin_timeout", "%s is below %s (a receiving client pulls again within 1 s, and a slow engine must not lose the pin at every pause)", js.pinTimeout, MinPinTimeout)
	}
	if !js.pinned && (j.PinTimeout != "" || j.PriorityGroup != "") {
		return adaptercfg.Fields("jetstream.pinned", "jetstream.pin_timeout/priority_group", "only used with pinned = true")
	}
	return nil
}

// validPriorityGroup applies nats-server's rule for group names.
func validPriorityGroup(g string) bool {
	if len(g) == 0 || len(g) > 16 {
		return false
	}
	for _, r := range g {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/_=-", r)) {
			return false
		}
	}
	return true
}

// sinkSettings is SinkConfig with defaults applied and durations parsed.
type sinkSettings struct {
	conn        connConfig
	subject     *subjectTemplate
	groupToken  string
	groupHeader string
	js          *jsSinkSettings
}

type jsSinkSettings struct {
	stream          string
	createStream    bool
	streamSubjects  []string
	limits          jetstream.StreamConfig // retention and limits of a created stream
	duplicateWindow time.Duration
	maxPending      int
	ackTimeout      time.Duration
}

// Validate checks the configuration; messages name the offending field.
func (c *SinkConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *SinkConfig) resolve() (*sinkSettings, error) {
	cc, err := c.ConnConfig.resolve()
	if err != nil {
		return nil, err
	}
	s := &sinkSettings{conn: cc, groupToken: c.DefaultGroupToken, groupHeader: c.GroupHeader}
	if s.groupHeader == "" {
		s.groupHeader = DefaultGroupHeader
	}
	if err := checkHeaderName("group_header", s.groupHeader); err != nil {
		return nil, err
	}
	if s.groupToken == "" {
		s.groupToken = DefaultGroupToken
	}
	if !validToken(s.groupToken) {
		return nil, adaptercfg.Errorf("default_group_token", "%q is not a valid subject token (no '.', '*', '>' or white space)", s.groupToken)
	}
	if c.Subject == "" {
		return nil, adaptercfg.Errorf("subject", "required")
	}
	if s.subject, err = compileSubject(c.Subject); err != nil {
		return nil, adaptercfg.Errorf("subject", "%w", err)
	}
	if c.Policy > mapping.Encode {
		return nil, adaptercfg.Errorf("policy", "invalid value %d", c.Policy)
	}
	if c.MaxMessageSize < 0 {
		return nil, adaptercfg.Errorf("max_message_size", "%d must be positive", c.MaxMessageSize)
	}
	if c.JetStream == nil {
		return s, nil
	}
	j := c.JetStream
	js := &jsSinkSettings{stream: j.Stream, createStream: j.CreateStream, maxPending: j.MaxPending}
	if js.stream != "" {
		if err := checkName("jetstream.stream", js.stream); err != nil {
			return nil, err
		}
	}
	if js.duplicateWindow, err = adaptercfg.PositiveDuration("jetstream.duplicate_window", j.DuplicateWindow, DefaultDuplicateWindow); err != nil {
		return nil, err
	}
	if js.ackTimeout, err = adaptercfg.PositiveDuration("jetstream.ack_timeout", j.AckTimeout, DefaultAckTimeout); err != nil {
		return nil, err
	}
	if js.maxPending < 0 {
		return nil, adaptercfg.Errorf("jetstream.max_pending", "%d must be positive", js.maxPending)
	}
	if js.maxPending == 0 {
		js.maxPending = DefaultPublishMaxPending
	}
	if js.createStream {
		if js.stream == "" {
			return nil, adaptercfg.Errorf("jetstream.stream", "required with create_stream = true")
		}
		js.streamSubjects = append([]string(nil), j.StreamSubjects...)
		if len(js.streamSubjects) == 0 {
			subj, ok := s.subject.streamSubject()
			if !ok {
				return nil, adaptercfg.Errorf("jetstream.stream_subjects", "required with create_stream when subject has {subject} before its last token")
			}
			js.streamSubjects = []string{subj}
		}
		for i, f := range js.streamSubjects {
			if err := checkSubject(fmt.Sprintf("jetstream.stream_subjects[%d]", i), f, true); err != nil {
				return nil, err
			}
		}
	} else if len(j.StreamSubjects) > 0 || j.DuplicateWindow != "" {
		return nil, adaptercfg.Fields("jetstream.stream_subjects", "jetstream.stream_subjects/duplicate_window", "only used with create_stream = true")
	}
	if err := j.StreamLimitsConfig.apply(js.createStream, &js.limits); err != nil {
		return nil, err
	}
	s.js = js
	return s, nil
}

// checkSubject validates a NATS subject; wildcards only when allowed.
func checkSubject(field, s string, wildcards bool) error {
	if s == "" {
		return adaptercfg.Errorf(field, "empty subject")
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		if t == "" {
			return adaptercfg.Errorf(field, "%q has an empty token", s)
		}
		if strings.ContainsAny(t, " \t\r\n") {
			return adaptercfg.Errorf(field, "%q contains white space", s)
		}
		if t == "*" || t == ">" {
			if !wildcards {
				return adaptercfg.Errorf(field, "%q: wildcards are not allowed here", s)
			}
			if t == ">" && i != len(tokens)-1 {
				return adaptercfg.Errorf(field, "%q: '>' must be the last token", s)
			}
			continue
		}
		if strings.ContainsAny(t, "*>") {
			return adaptercfg.Errorf(field, "%q: '*' and '>' must be whole tokens", s)
		}
	}
	return nil
}

// checkGroupToken refuses a group token position that a subject cannot have.
func checkGroupToken(subject string, n int) error {
	tokens := strings.Split(subject, ".")
	if tokens[len(tokens)-1] == ">" {
		return nil
	}
	if n > len(tokens) {
		return adaptercfg.Errorf("group_from_subject_token", "%d but subject %q has %d tokens", n, subject, len(tokens))
	}
	return nil
}

// checkName validates a stream or consumer name.
func checkName(field, s string) error {
	if strings.ContainsAny(s, ".*> \t\r\n/\\") {
		return adaptercfg.Errorf(field, "%q must not contain '.', '*', '>', '/', '\\' or white space", s)
	}
	return nil
}

// checkHeaderName applies natsmap's rule for header names.
func checkHeaderName(field, s string) error {
	if !natsmap.ValidHeaderName(s) {
		return adaptercfg.Errorf(field, "%q is not a valid header name (printable ASCII without ':' and \"()/,;<=>?@[\\]{})", s)
	}
	return nil
}
