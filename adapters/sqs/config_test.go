package sqs

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func decodeHCL(t *testing.T, src string, into any) hcl.Diagnostics {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return gohcl.DecodeBody(f.Body, nil, into)
}

func TestConfigFromHCL(t *testing.T) {
	var src SourceConfig
	if diags := decodeHCL(t, `
region             = "eu-west-1"
queue_name         = "orders.fifo"
account_id         = "123456789012"
role_arn           = "arn:aws:iam::123456789012:role/bridge"
external_id        = "ext"
session_name       = "qb"
wait_time          = "10s"
max_messages       = 5
visibility_timeout = "45s"
pollers            = 3
attribute_names    = ["All"]
message_attribute_names = ["bar.*", "x"]
nack_backoff       = "2s"
heartbeat          = "15s"
linger             = "20ms"
`, &src); diags.HasErrors() {
		t.Fatal(diags)
	}
	set, err := src.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if src.QueueName != "orders.fifo" || src.AccountID != "123456789012" || src.RoleARN == "" || set.waitTime != 10*time.Second ||
		set.maxMessages != 5 || set.visibility != 45*time.Second || set.pollers != 3 || set.nackBackoff != 2*time.Second ||
		set.heartbeat != 15*time.Second || set.linger != 20*time.Millisecond || len(set.messageAttrs) != 3 {
		t.Fatalf("%+v %+v", src, set)
	}

	var snk SinkConfig
	if diags := decodeHCL(t, `
queue_url           = "https://sqs.eu-west-1.amazonaws.com/123456789012/out"
access_key_id       = "AKIA"
secret_access_key   = "secret"
max_message_size    = 1048576
default_group       = "all"
linger              = "1ms"
content_based_dedup = true
carry_source        = true
senders             = 2
`, &snk); diags.HasErrors() {
		t.Fatal(diags)
	}
	if err := snk.Validate(); err != nil {
		t.Fatal(err)
	}
	if snk.ContentBasedDedup == nil || !*snk.ContentBasedDedup || snk.MaxMessageSize != 1<<20 || !snk.CarrySource {
		t.Fatalf("%+v", snk)
	}

	var bad SinkConfig
	diags := decodeHCL(t, `queue_url = "https://x/1/q"
quue_name = "typo"`, &bad)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "quue_name") {
		t.Fatalf("unknown attribute: %v", diags)
	}
}

func TestSourceConfigDefaults(t *testing.T) {
	c := SourceConfig{ConnConfig: ConnConfig{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q"}}
	set, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if set.waitTime != DefaultWaitTime || set.maxMessages != 10 || set.pollers != DefaultPollers || set.hasVisibility ||
		set.nackBackoff != DefaultNackBackoff || set.heartbeat != 0 || set.linger != DefaultAckLinger ||
		set.systemAttrs[0] != "All" || set.messageAttrs[0] != "All" {
		t.Fatalf("%+v", set)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	url := "https://sqs.us-east-1.amazonaws.com/123456789012/q"
	src := func(f func(*SourceConfig)) error {
		c := SourceConfig{ConnConfig: ConnConfig{QueueURL: url}}
		f(&c)
		return c.Validate()
	}
	snk := func(f func(*SinkConfig)) error {
		c := SinkConfig{ConnConfig: ConnConfig{QueueURL: url}}
		f(&c)
		return c.Validate()
	}
	for _, c := range []struct {
		field string
		err   error
	}{
		{"queue_url", src(func(c *SourceConfig) { c.QueueURL = "" })},
		{"queue_url and queue_name", src(func(c *SourceConfig) { c.QueueName = "q" })},
		{"queue_url", src(func(c *SourceConfig) { c.QueueURL = "sqs/q" })},
		{"dead_letter_queue_url", src(func(c *SourceConfig) { c.DeadLetterQueueURL = "sqs/dlq" })},
		{"dead_letter_queue_url", src(func(c *SourceConfig) { c.DeadLetterQueueURL = "https://sqs.us-east-1.amazonaws.com/" })},
		{"queue_name", src(func(c *SourceConfig) { c.QueueURL, c.QueueName = "", "bad name" })},
		{"account_id", src(func(c *SourceConfig) { c.AccountID = "123" })},
		{"account_id", src(func(c *SourceConfig) { c.QueueURL, c.QueueName, c.AccountID = "", "q", "12" })},
		{"endpoint", src(func(c *SourceConfig) { c.Endpoint = "localhost:4566" })},
		{"access_key_id and secret_access_key", src(func(c *SourceConfig) { c.AccessKeyID = "A" })},
		{"session_token", src(func(c *SourceConfig) { c.SessionToken = "t" })},
		{"profile and access_key_id", src(func(c *SourceConfig) { c.Profile, c.AccessKeyID, c.SecretAccessKey = "p", "a", "s" })},
		{"external_id", src(func(c *SourceConfig) { c.ExternalID = "x" })},
		{"role_arn", src(func(c *SourceConfig) { c.RoleARN = "bridge" })},
		{"session_name", src(func(c *SourceConfig) { c.RoleARN, c.SessionName = "arn:aws:iam::1:role/r", "a b" })},
		{"wait_time", src(func(c *SourceConfig) { c.WaitTime = "21s" })},
		{"wait_time", src(func(c *SourceConfig) { c.WaitTime = "1.5s" })},
		{"wait_time", src(func(c *SourceConfig) { c.WaitTime = "soon" })},
		{"max_messages", src(func(c *SourceConfig) { c.MaxMessages = 11 })},
		{"visibility_timeout", src(func(c *SourceConfig) { c.VisibilityTimeout = "13h" })},
		{"pollers", src(func(c *SourceConfig) { c.Pollers = -1 })},
		{"attribute_names[0]", src(func(c *SourceConfig) { c.AttributeNames = []string{"Color"} })},
		{"message_attribute_names[1]", src(func(c *SourceConfig) { c.MessageAttributeNames = []string{"a", "..x"} })},
		{"nack_backoff", src(func(c *SourceConfig) { c.NackBackoff = "-1s" })},
		{"heartbeat", src(func(c *SourceConfig) { c.Heartbeat = "soon" })},
		{"linger", src(func(c *SourceConfig) { c.Linger = "2s" })},
		{"max_message_size", snk(func(c *SinkConfig) { c.MaxMessageSize = 2 << 20 })},
		{"default_group", snk(func(c *SinkConfig) { c.DefaultGroup = "with space" })},
		{"senders", snk(func(c *SinkConfig) { c.Senders = 100 })},
		{"policy", snk(func(c *SinkConfig) { c.Policy = 9 })},
		{"linger", snk(func(c *SinkConfig) { c.Linger = "x" })},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.field+":") {
			t.Errorf("want an error starting with %q, got %v", c.field+":", c.err)
		}
	}
}

// A user part in a queue URL or endpoint is refused, and not shown: SQS
// does not read one, and the URLs are quoted in messages and identities.
func TestURLCredentialsRefusedUnshown(t *testing.T) {
	for _, c := range []struct {
		field string
		cfg   SourceConfig
	}{
		{"queue_url", SourceConfig{ConnConfig: ConnConfig{QueueURL: "https://AKIA:SECRETX@sqs.us-east-1.amazonaws.com/123456789012/q"}}},
		{"queue_url", SourceConfig{ConnConfig: ConnConfig{QueueURL: "http://u:1234/SECRETX@localhost:4566/000000000000/q"}}},
		{"endpoint", SourceConfig{ConnConfig: ConnConfig{QueueName: "q", Endpoint: "http://u:SECRETX#x@localhost:4566"}}},
		{"dead_letter_queue_url", SourceConfig{ConnConfig: ConnConfig{QueueName: "q"}, DeadLetterQueueURL: "https://u:1234?SECRETX@sqs.us-east-1.amazonaws.com/1/dlq"}},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.field+":") || strings.Contains(err.Error(), "SECRETX") || !strings.Contains(err.Error(), "xxxxx@") {
			t.Errorf("%s: %v", c.field, err)
		}
	}
}

func TestRegionAndEndpointFromQueueURL(t *testing.T) {
	for _, c := range []struct {
		url, region string
		aws         bool
	}{
		{"https://sqs.eu-central-1.amazonaws.com/123456789012/q", "eu-central-1", true},
		{"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q", "cn-north-1", true},
		{"https://message-queue.api.cloud.yandex.net/b1g/dj6/q", "", false},
		{"http://127.0.0.1:4566/000000000000/q", "", false},
	} {
		if got := regionOf(c.url); got != c.region {
			t.Errorf("regionOf(%s) = %q", c.url, got)
		}
		if got := isAWSHost(c.url); got != c.aws {
			t.Errorf("isAWSHost(%s) = %v", c.url, got)
		}
	}
	if n := queueNameOf("https://sqs.eu-central-1.amazonaws.com/123456789012/q.fifo"); n != "q.fifo" {
		t.Errorf("queueNameOf = %q", n)
	}
}
