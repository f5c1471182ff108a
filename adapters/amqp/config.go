package amqp

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

// Defaults applied to fields left at their zero value.
const (
	// DefaultCredit is the receiver link credit for brokers that manage
	// credit correctly. RabbitMQ 3.x (detected from the connection's
	// product/version properties) gets RabbitMQ3Credit instead.
	DefaultCredit         = 64
	RabbitMQ3Credit       = 1
	DefaultIdleTimeout    = 60 * time.Second
	DefaultMaxFrameSize   = 65536
	DefaultConnectTimeout = 15 * time.Second
	DefaultBackoff        = 500 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultCloseTimeout   = time.Second
	DefaultSendTimeout    = 30 * time.Second
	DefaultMaxLinks       = 64
	// DefaultRejectCondition is the error condition of DeadLetter's Reject.
	DefaultRejectCondition = "amqp:internal-error"
)

// SASLConfig is the `sasl { ... }` block.
type SASLConfig struct {
	// Mechanism: PLAIN, ANONYMOUS, EXTERNAL or NONE (no SASL layer at all).
	// Default: PLAIN when a username is set (here or in the URL), else
	// ANONYMOUS.
	Mechanism string `hcl:"mechanism,optional"`
	Username  string `hcl:"username,optional"`
	Password  string `hcl:"password,optional"`
	// Identity is the EXTERNAL authorization identity (usually empty: the
	// broker takes the identity from the client certificate).
	Identity string `hcl:"identity,optional"`
}

// TLSConfig is the `tls { ... }` block; it requires amqps:// URLs.
type TLSConfig = adaptercfg.TLS

// FilterConfig is one `filter "NAME" { ... }` block: a described value in
// the source's filter set. NAME is the filter-set key (a symbol).
type FilterConfig struct {
	Name string `hcl:"name,label"`
	// Descriptor is the symbolic descriptor; default NAME. Code, when set,
	// is the numeric descriptor instead, as hex "0x0000468C00000004" or
	// "0x0000468C:0x00000004" (domain:id).
	Descriptor string `hcl:"descriptor,optional"`
	Code       string `hcl:"code,optional"`
	Value      string `hcl:"value,optional"`
	// Type of Value: string (default), symbol, boolean, byte, short, int,
	// long, ubyte, ushort, uint, ulong, double, null.
	Type string `hcl:"type,optional"`
}

// ConnConfig is the connection part of a source or sink block: the broker
// URL(s), authentication, TLS and the connection's timeouts.
type ConnConfig struct {
	URL               string      `hcl:"url,optional"`
	URLs              []string    `hcl:"urls,optional"`
	SASL              *SASLConfig `hcl:"sasl,block"`
	TLS               *TLSConfig  `hcl:"tls,block"`
	ContainerID       string      `hcl:"container_id,optional"`
	Hostname          string      `hcl:"hostname,optional"`
	IdleTimeout       string      `hcl:"idle_timeout,optional"`
	MaxFrameSize      int         `hcl:"max_frame_size,optional"`
	ConnectTimeout    string      `hcl:"connect_timeout,optional"`
	ReconnectBackoff  string      `hcl:"reconnect_backoff,optional"`
	ReconnectBackoffM string      `hcl:"reconnect_backoff_max,optional"`
	CloseTimeout      string      `hcl:"close_timeout,optional"`
}

// SourceConfig is the body of `source "amqp" { ... }`.
type SourceConfig struct {
	ConnConfig `hcl:",remain"`
	// Address is the source node, e.g. "/queue/orders" on RabbitMQ,
	// "orders" on Artemis or Qpid.
	Address string `hcl:"address,optional"`
	// Credit is the receiver's link credit. 0: DefaultCredit, or
	// RabbitMQ3Credit on RabbitMQ 3.x.
	Credit int `hcl:"credit,optional"`

	LinkName string `hcl:"link_name,optional"`
	// Durable asks for a durable source terminus (unsettled-state
	// durability, expiry "never" unless expiry_policy says otherwise): a
	// durable subscription identified by container_id and link_name, both
	// then required. Durable links are never detached on close.
	Durable       bool     `hcl:"durable,optional"`
	ExpiryPolicy  string   `hcl:"expiry_policy,optional"` // link-detach, session-end, connection-close, never
	ExpiryTimeout string   `hcl:"expiry_timeout,optional"`
	Capabilities  []string `hcl:"capabilities,optional"` // source capabilities, e.g. ["topic"] or ["shared", "global"]

	// Selector is a JMS-style selector (apache.org:selector-filter:string).
	Selector string         `hcl:"selector,optional"`
	Filters  []FilterConfig `hcl:"filter,block"`

	// Nack is how Nack settles: "modify" (delivery-failed), "release", or
	// "auto" (the default): modify, falling back to release for good once
	// the broker ends a session over a Modify; release at once on RabbitMQ 3.x.
	Nack string `hcl:"nack,optional"`
	// RejectCondition is the AMQP error condition DeadLetter sends with its
	// Reject. Default amqp:internal-error.
	RejectCondition string `hcl:"reject_condition,optional"`
	// DecodeGuard inspects incoming transfers before go-amqp decodes them
	// (see internal/amqpguard): "scan" (default), "full" or "off".
	DecodeGuard string `hcl:"decode_guard,optional"`
	// SingleActiveConsumer says the queue lets one consumer receive at a
	// time (RabbitMQ's x-single-active-consumer queue argument, declared
	// with the queue): replicas then keep group order (see order.go).
	SingleActiveConsumer bool `hcl:"single_active_consumer,optional"`

	// Policy is set by the config layer from the pipeline's mapping block.
	// Decoding has no policy; it is kept for symmetry with SinkConfig. It
	// carries no hcl tag: gohcl reads `hcl:"-"` as a required attribute
	// named "-", while untagged fields are skipped.
	Policy mapping.Policy

	// browse is set by Browse (qbridge migrate): attach with
	// distribution-mode copy and settle nothing.
	browse bool
	// migrating is set by ForMigration (qbridge migrate): do not create
	// the queue read (see attachAddress).
	migrating bool
}

// SinkConfig is the body of `sink "amqp" { ... }`.
type SinkConfig struct {
	ConnConfig `hcl:",remain"`
	// Address is the target node, a template (see mapping/rules.Template):
	// "/queue/{group}", "/exchange/events/{subject}", "orders".
	Address string `hcl:"address,optional"`
	// Durable sends every message with header durable=true (the default).
	// false keeps the durable flag the message came with.
	Durable *bool `hcl:"durable,optional"`
	// TargetDurable asks for a durable target terminus (unsettled-state).
	// On RabbitMQ 3.x this makes /queue/NAME declare a durable queue (and
	// must then match the source's durable setting).
	TargetDurable bool `hcl:"target_durable,optional"`
	// MaxMessageSize limits the encoded message (bytes); the sender link's
	// max-message-size, when the broker announces one, still applies if it
	// is smaller.
	MaxMessageSize int `hcl:"max_message_size,optional"`
	// SendTimeout bounds one Send call (transfer and settlement).
	SendTimeout string `hcl:"send_timeout,optional"`
	// MaxLinks caps the cached sender links (one per target address).
	MaxLinks int `hcl:"max_links,optional"`

	// Set by the config layer from the pipeline's mapping block (untagged:
	// see SourceConfig.Policy). The drop callback is not configuration:
	// NewSink takes it.
	Policy      mapping.Policy
	CarrySource bool
	Envelope    mapping.EnvelopeMode
}

// endpoint is one broker URL, parsed.
type endpoint struct {
	host, port string
	tls        bool
	user, pass string // from the URL's userinfo
	hasUser    bool
	redacted   string // for logs
}

type saslSettings struct {
	mech, user, pass, identity string
}

// connSettings is the resolved connection part shared by source and sink.
type connSettings struct {
	endpoints      []endpoint
	sasl           saslSettings
	tls            *tls.Config // nil: plain TCP
	containerID    string
	hostname       string
	idleTimeout    time.Duration // < 0: disabled
	maxFrameSize   uint32
	connectTimeout time.Duration
	backoff        time.Duration
	backoffMax     time.Duration
	closeTimeout   time.Duration
}

type nackMode uint8

const (
	nackAuto nackMode = iota
	nackModify
	nackRelease
)

func (n nackMode) String() string { return [...]string{"auto", "modify", "release"}[n] }

type guardMode uint8

const (
	guardScan guardMode = iota
	guardFull
	guardOff
)

func (g guardMode) String() string { return [...]string{"scan", "full", "off"}[g] }

type sourceSettings struct {
	conn         connSettings
	address      string
	credit       int // 0: auto
	linkName     string
	durable      bool
	expiry       amqp.ExpiryPolicy
	expiryTO     uint32
	capabilities []string
	filters      []amqp.LinkFilter
	filterDesc   []string // for logs
	filterKeys   []string // filter-set keys the broker must echo (null-valued ones cannot be checked)
	nack         nackMode
	rejectCond   amqp.ErrCond
	guard        guardMode
	browse       bool // distribution-mode copy, pre-settled, no settlement
	singleActive bool
	noCreate     bool // a migration: the queue must exist (attachAddress)
}

type sinkSettings struct {
	conn        connSettings
	address     *rules.Template
	static      string // the address when the template has no placeholder
	isStatic    bool
	durable     bool
	targetDur   bool
	maxMsgSize  int
	sendTimeout time.Duration
	maxLinks    int
	opt         mapping.Options
}

// Validate checks the configuration; errors name the field.
func (c SourceConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// Validate checks the configuration; errors name the field.
func (c SinkConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c SourceConfig) resolve() (sourceSettings, error) {
	var s sourceSettings
	var err error
	s.conn, err = c.ConnConfig.resolve()
	if err != nil {
		return s, err
	}
	if c.Address == "" {
		return s, adaptercfg.Errorf("address", "required (e.g. \"/queue/orders\" on RabbitMQ)")
	}
	s.address = c.Address
	if c.Credit < 0 || c.Credit > math.MaxInt32 {
		return s, adaptercfg.Errorf("credit", "%d out of range (0 = automatic, else 1..%d)", c.Credit, math.MaxInt32)
	}
	s.credit = c.Credit
	s.linkName = c.LinkName
	s.durable = c.Durable
	s.capabilities = c.Capabilities
	if c.Durable {
		if c.LinkName == "" {
			return s, adaptercfg.Errorf("link_name", "required with durable = true (a durable subscription is named by container_id and link_name)")
		}
		if c.ContainerID == "" {
			return s, adaptercfg.Errorf("container_id", "required with durable = true (a durable subscription is named by container_id and link_name)")
		}
		s.expiry = amqp.ExpiryPolicyNever
	} else {
		s.expiry = amqp.ExpiryPolicySessionEnd
	}
	switch c.ExpiryPolicy {
	case "":
	case "link-detach":
		s.expiry = amqp.ExpiryPolicyLinkDetach
	case "session-end":
		s.expiry = amqp.ExpiryPolicySessionEnd
	case "connection-close":
		s.expiry = amqp.ExpiryPolicyConnectionClose
	case "never":
		s.expiry = amqp.ExpiryPolicyNever
	default:
		return s, adaptercfg.Errorf("expiry_policy", "%q: want link-detach, session-end, connection-close or never", c.ExpiryPolicy)
	}
	if c.ExpiryTimeout != "" {
		d, err := adaptercfg.Duration("expiry_timeout", c.ExpiryTimeout, 0)
		if err != nil {
			return s, err
		}
		if d < 0 || d/time.Second > math.MaxUint32 {
			return s, adaptercfg.Errorf("expiry_timeout", "%s out of range", c.ExpiryTimeout)
		}
		s.expiryTO = uint32(d / time.Second)
	}
	if c.Selector != "" {
		s.filters = append(s.filters, amqp.NewSelectorFilter(c.Selector))
		s.filterDesc = append(s.filterDesc, "selector "+strconv.Quote(c.Selector))
		s.filterKeys = append(s.filterKeys, "apache.org:selector-filter:string")
	}
	seen := map[string]bool{}
	if c.Selector != "" {
		seen["apache.org:selector-filter:string"] = true
	}
	for i, f := range c.Filters {
		// The path names this filter block and, where the error is about
		// one, its field: a diagnostic points at the value, and validate
		// knows which value the error is about.
		path := fmt.Sprintf("filter[%d]", i)
		lf, err := f.linkFilter()
		if err != nil {
			if p, ok := adaptercfg.PathOf(err); ok {
				path += "." + p
			}
			return s, adaptercfg.Fields(path, fmt.Sprintf("filter %q", f.Name), "%w", err)
		}
		if seen[f.Name] {
			return s, adaptercfg.Fields(path, fmt.Sprintf("filter %q", f.Name), "defined twice (filter #%d; selector counts as apache.org:selector-filter:string)", i+1)
		}
		seen[f.Name] = true
		s.filters = append(s.filters, lf)
		s.filterDesc = append(s.filterDesc, "filter "+strconv.Quote(f.Name))
		if f.Type != "null" {
			s.filterKeys = append(s.filterKeys, f.Name)
		}
	}
	switch c.Nack {
	case "", "auto":
		s.nack = nackAuto
	case "modify":
		s.nack = nackModify
	case "release":
		s.nack = nackRelease
	default:
		return s, adaptercfg.Errorf("nack", "%q: want auto, modify or release", c.Nack)
	}
	s.rejectCond = DefaultRejectCondition
	if c.RejectCondition != "" {
		if strings.ContainsAny(c.RejectCondition, " \t\n") {
			return s, adaptercfg.Errorf("reject_condition", "%q: a symbol such as amqp:internal-error, without spaces", c.RejectCondition)
		}
		s.rejectCond = amqp.ErrCond(c.RejectCondition)
	}
	switch c.DecodeGuard {
	case "", "scan":
		s.guard = guardScan
	case "full":
		s.guard = guardFull
	case "off":
		s.guard = guardOff
	default:
		return s, adaptercfg.Errorf("decode_guard", "%q: want scan, full or off", c.DecodeGuard)
	}
	s.browse = c.browse
	s.noCreate = c.migrating
	s.singleActive = c.SingleActiveConsumer
	return s, nil
}

func (c SinkConfig) resolve() (sinkSettings, error) {
	var s sinkSettings
	var err error
	s.conn, err = c.ConnConfig.resolve()
	if err != nil {
		return s, err
	}
	if c.Address == "" {
		return s, adaptercfg.Errorf("address", "required (a template such as \"/queue/{group}\" or a fixed address)")
	}
	if s.address, err = rules.Parse(c.Address); err != nil {
		return s, adaptercfg.Errorf("address", "%w", err)
	}
	s.static, s.isStatic = s.address.Literal()
	s.durable = c.Durable == nil || *c.Durable
	s.targetDur = c.TargetDurable
	if c.MaxMessageSize < 0 {
		return s, adaptercfg.Errorf("max_message_size", "%d: must be >= 0 (0 = the link's limit)", c.MaxMessageSize)
	}
	s.maxMsgSize = c.MaxMessageSize
	if s.sendTimeout, err = adaptercfg.PositiveDuration("send_timeout", c.SendTimeout, DefaultSendTimeout); err != nil {
		return s, err
	}
	switch {
	case c.MaxLinks < 0:
		return s, adaptercfg.Errorf("max_links", "%d: must be >= 0 (0 = %d)", c.MaxLinks, DefaultMaxLinks)
	case c.MaxLinks == 0:
		s.maxLinks = DefaultMaxLinks
	default:
		s.maxLinks = c.MaxLinks
	}
	if c.Policy > mapping.Encode {
		return s, adaptercfg.Errorf("policy", "invalid value %d", c.Policy)
	}
	s.opt = mapping.Options{Policy: c.Policy, MaxMessageSize: c.MaxMessageSize, CarrySource: c.CarrySource, Envelope: c.Envelope}
	return s, nil
}

// resolve checks the connection fields and applies their defaults.
func (c *ConnConfig) resolve() (connSettings, error) {
	var cs connSettings
	raw := c.URLs
	if c.URL != "" {
		raw = append([]string{c.URL}, c.URLs...)
	}
	if len(raw) == 0 {
		return cs, adaptercfg.Errorf("url", "required (or urls = [...] for fail-over), e.g. \"amqp://guest:guest@127.0.0.1:5672\"")
	}
	anyTLS := false
	for i, r := range raw {
		field := "url"
		if c.URL == "" || i > 0 {
			field = fmt.Sprintf("urls[%d]", i)
			if c.URL != "" {
				field = fmt.Sprintf("urls[%d]", i-1)
			}
		}
		ep, err := parseEndpoint(r)
		if err != nil {
			return cs, adaptercfg.Errorf(field, "%w", err)
		}
		if ep.hasUser && c.SASL != nil && (c.SASL.Username != "" || c.SASL.Password != "") {
			return cs, adaptercfg.Errorf(field, "holds credentials and sasl sets username/password too: use one")
		}
		anyTLS = anyTLS || ep.tls
		cs.endpoints = append(cs.endpoints, ep)
	}
	if c.SASL != nil {
		s := c.SASL
		cs.sasl = saslSettings{mech: strings.ToUpper(s.Mechanism), user: s.Username, pass: s.Password, identity: s.Identity}
		switch cs.sasl.mech {
		case "":
		case "PLAIN":
			if s.Username == "" {
				hasURLUser := false
				for _, ep := range cs.endpoints {
					hasURLUser = hasURLUser || ep.hasUser
				}
				if !hasURLUser {
					return cs, adaptercfg.Errorf("sasl.username", "required with mechanism PLAIN")
				}
			}
		case "ANONYMOUS", "EXTERNAL", "NONE":
			if s.Username != "" || s.Password != "" {
				return cs, adaptercfg.Fields("sasl.username", "sasl.username/password", "not used by mechanism %s", cs.sasl.mech)
			}
		default:
			return cs, adaptercfg.Errorf("sasl.mechanism", "%q: want PLAIN, ANONYMOUS, EXTERNAL or NONE", s.Mechanism)
		}
		if s.Password != "" && s.Username == "" {
			return cs, adaptercfg.Errorf("sasl.password", "set without sasl.username")
		}
		if s.Identity != "" && cs.sasl.mech != "EXTERNAL" {
			return cs, adaptercfg.Errorf("sasl.identity", "only used by mechanism EXTERNAL")
		}
		if cs.sasl.mech == "EXTERNAL" && (c.TLS == nil || c.TLS.CertFile == "") {
			return cs, adaptercfg.Errorf("sasl.mechanism", "EXTERNAL authenticates with the TLS client certificate: set tls.cert_file and tls.key_file")
		}
	}
	if c.TLS != nil {
		for i, ep := range cs.endpoints {
			if !ep.tls {
				return cs, adaptercfg.Errorf("tls", "set, but URL #%d (%s) is amqp://: use amqps://", i+1, ep.redacted)
			}
		}
	}
	if c.TLS != nil || anyTLS {
		// amqps:// without a tls block: the shared defaults (system roots,
		// TLS 1.2 at least), as any other adapter's.
		t := c.TLS
		if t == nil {
			t = &TLSConfig{}
		}
		tc, err := t.Config()
		if err != nil {
			return cs, err
		}
		cs.tls = tc
	}
	cs.containerID = c.ContainerID
	cs.hostname = c.Hostname
	var err error
	if cs.idleTimeout, err = adaptercfg.Duration("idle_timeout", c.IdleTimeout, DefaultIdleTimeout); err != nil {
		return cs, err
	}
	if cs.idleTimeout == 0 {
		cs.idleTimeout = -1 // an explicit "0s" disables it
	}
	switch {
	case c.MaxFrameSize == 0:
		cs.maxFrameSize = DefaultMaxFrameSize
	case c.MaxFrameSize < 512 || int64(c.MaxFrameSize) > math.MaxUint32:
		return cs, adaptercfg.Errorf("max_frame_size", "%d: must be 512..%d", c.MaxFrameSize, uint32(math.MaxUint32))
	default:
		cs.maxFrameSize = uint32(c.MaxFrameSize)
	}
	for _, d := range []struct {
		name string
		src  string
		def  time.Duration
		dst  *time.Duration
	}{
		{"connect_timeout", c.ConnectTimeout, DefaultConnectTimeout, &cs.connectTimeout},
		{"reconnect_backoff", c.ReconnectBackoff, DefaultBackoff, &cs.backoff},
		{"reconnect_backoff_max", c.ReconnectBackoffM, DefaultBackoffMax, &cs.backoffMax},
		{"close_timeout", c.CloseTimeout, DefaultCloseTimeout, &cs.closeTimeout},
	} {
		if *d.dst, err = adaptercfg.PositiveDuration(d.name, d.src, d.def); err != nil {
			return cs, err
		}
	}
	if cs.backoffMax < cs.backoff {
		return cs, adaptercfg.Errorf("reconnect_backoff_max", "%s is below reconnect_backoff %s", cs.backoffMax, cs.backoff)
	}
	return cs, nil
}

func parseEndpoint(raw string) (endpoint, error) {
	var ep endpoint
	u, err := adaptercfg.ParseURL(raw)
	if err != nil {
		return ep, err
	}
	switch u.Scheme {
	case "amqp":
	case "amqps", "amqp+ssl":
		ep.tls = true
	default:
		return ep, fmt.Errorf("%q: scheme must be amqp or amqps", adaptercfg.RedactURL(raw))
	}
	if u.Hostname() == "" {
		return ep, fmt.Errorf("%q: no host", adaptercfg.RedactURL(raw))
	}
	ep.host, ep.port = u.Hostname(), u.Port()
	if ep.port == "" {
		ep.port = "5672"
		if ep.tls {
			ep.port = "5671"
		}
	} else if p, err := strconv.Atoi(ep.port); err != nil || p < 1 || p > 65535 {
		return ep, fmt.Errorf("%q: bad port", adaptercfg.RedactURL(raw))
	}
	if u.Path != "" && u.Path != "/" {
		return ep, fmt.Errorf("%q: a path is not used by AMQP 1.0: put the node in address (and a RabbitMQ vhost in hostname = \"vhost:NAME\")", adaptercfg.RedactURL(raw))
	}
	if u.User != nil {
		ep.hasUser = true
		ep.user = u.User.Username()
		ep.pass, _ = u.User.Password()
	}
	ep.redacted = adaptercfg.RedactURL(raw)
	return ep, nil
}

func (ep endpoint) addr() string { return net.JoinHostPort(ep.host, ep.port) }
