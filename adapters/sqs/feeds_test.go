package sqs

import (
	"strings"
	"testing"
)

func TestSinkFeedsSource(t *testing.T) {
	const q = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
	src := func(c ConnConfig) SourceConfig { return SourceConfig{ConnConfig: c} }
	sink := func(c ConnConfig) SinkConfig { return SinkConfig{ConnConfig: c} }
	tests := []struct {
		name     string
		src, dst ConnConfig
		loops    bool
		why      string
	}{
		{"same queue URL", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: q}, true, "sends to queue " + q + ", the queue the source receives from"},
		{"same queue URL, host case and port", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: "https://SQS.eu-west-1.amazonaws.com:443/123456789012/orders"}, true,
			"sends to queue https://SQS.eu-west-1.amazonaws.com:443/123456789012/orders, the queue the source receives from as " + q},
		{"FIFO queue", ConnConfig{QueueURL: q + ".fifo"}, ConnConfig{QueueURL: q + ".fifo"}, true, ""},
		{"other queue", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: q + "-dlq"}, false, ""},
		{"queue name case", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: strings.Replace(q, "orders", "Orders", 1)}, false, ""},
		{"other account", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: strings.Replace(q, "123456789012", "210987654321", 1)}, false, ""},
		{"trailing slash not normalized", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: q + "/"}, false, ""},
		{"same URL, other endpoint", ConnConfig{QueueURL: "http://127.0.0.1:4566/000000000000/q", Endpoint: "http://127.0.0.1:4566"},
			ConnConfig{QueueURL: "http://127.0.0.1:4566/000000000000/q", Endpoint: "http://127.0.0.1:9324"}, false, ""},
		{"same URL, endpoint default port and root", ConnConfig{QueueURL: "http://h/000000000000/q", Endpoint: "http://h"},
			ConnConfig{QueueURL: "http://h:80/000000000000/q", Endpoint: "http://H:80/"}, true, ""},
		{"same URL, region set on one side", ConnConfig{QueueURL: q}, ConnConfig{QueueURL: q, Region: "eu-west-1"}, false, ""},
		{"same URL, other profile", ConnConfig{QueueURL: q, Profile: "a"}, ConnConfig{QueueURL: q, Profile: "b"}, false, ""},
		{"same URL, other keys", ConnConfig{QueueURL: q, AccessKeyID: "A", SecretAccessKey: "s"}, ConnConfig{QueueURL: q}, true, ""},
		{"URL and name", ConnConfig{QueueURL: q}, ConnConfig{QueueName: "orders", Region: "eu-west-1"}, false, ""},

		{"same name and region", ConnConfig{QueueName: "orders", Region: "eu-west-1"}, ConnConfig{QueueName: "orders", Region: "eu-west-1"}, true, `sends to queue "orders" (region eu-west-1)`},
		{"same name, default region", ConnConfig{QueueName: "orders"}, ConnConfig{QueueName: "orders"}, true, "the default region"},
		{"same name, other region", ConnConfig{QueueName: "orders", Region: "eu-west-1"}, ConnConfig{QueueName: "orders", Region: "us-east-1"}, false, ""},
		{"same name, other endpoint", ConnConfig{QueueName: "orders", Endpoint: "http://127.0.0.1:4566"}, ConnConfig{QueueName: "orders", Endpoint: "http://127.0.0.1:9324"}, false, ""},
		{"same name and endpoint", ConnConfig{QueueName: "orders", Endpoint: "http://127.0.0.1:4566"}, ConnConfig{QueueName: "orders", Endpoint: "http://127.0.0.1:4566/"}, true, "endpoint http://127.0.0.1:4566"},
		{"other name", ConnConfig{QueueName: "orders"}, ConnConfig{QueueName: "orders-dlq"}, false, ""},
		{"standard and FIFO", ConnConfig{QueueName: "orders"}, ConnConfig{QueueName: "orders.fifo"}, false, ""},
		{"same name, other account", ConnConfig{QueueName: "orders", AccountID: "123456789012"}, ConnConfig{QueueName: "orders", AccountID: "210987654321"}, false, ""},
		{"same name, account and one side", ConnConfig{QueueName: "orders", AccountID: "123456789012"}, ConnConfig{QueueName: "orders"}, false, ""},
		{"same name, other keys (maybe another account)", ConnConfig{QueueName: "orders", AccessKeyID: "A", SecretAccessKey: "s"}, ConnConfig{QueueName: "orders", AccessKeyID: "B", SecretAccessKey: "s"}, false, ""},
		{"same name, other role", ConnConfig{QueueName: "orders", RoleARN: "arn:aws:iam::1:role/a"}, ConnConfig{QueueName: "orders", RoleARN: "arn:aws:iam::2:role/a"}, false, ""},
		{"same name and account, other keys", ConnConfig{QueueName: "orders", AccountID: "123456789012", AccessKeyID: "A", SecretAccessKey: "s"},
			ConnConfig{QueueName: "orders", AccountID: "123456789012"}, true, "account 123456789012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, d := src(tt.src), sink(tt.dst)
			if err := s.Validate(); err != nil {
				t.Fatalf("source: %v", err)
			}
			if err := d.Validate(); err != nil {
				t.Fatalf("sink: %v", err)
			}
			why, loops := SinkFeedsSource(s, d)
			if loops != tt.loops {
				t.Fatalf("loops = %v (%s), want %v", loops, why, tt.loops)
			}
			if loops && !strings.Contains(why, tt.why) {
				t.Errorf("why = %s\nwant it to contain %s", why, tt.why)
			}
		})
	}
	if _, loops := SinkFeedsSource(SourceConfig{}, sink(ConnConfig{QueueURL: q})); loops {
		t.Error("an invalid source loops")
	}
}
