package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/internal/wholebody"
)

// TestChaosSQSFIFO: two replicas on one FIFO queue of fauxqs. SQS hands
// out no message of a group while another of that group is in flight, so
// the replicas share the groups and each group stays in order; a killed
// replica's messages come back after the visibility timeout, ahead of the
// rest of their group. fauxqs keeps its queues in memory and is shared by
// the other tests: no broker restart.
func TestChaosSQSFIFO(t *testing.T) {
	p := runPlan()
	endpoint := testenv.Require(t, "QBRIDGE_SQS_ENDPOINT")
	region := os.Getenv("QBRIDGE_SQS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	c := awssqs.New(awssqs.Options{
		Region: region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		// As the adapter does (internal/wholebody).
		HTTPClient: wholebody.Wrap(awshttp.NewBuildableClient()),
	})
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "chaos-" + hex.EncodeToString(b[:]) + ".fifo"
	out, err := c.CreateQueue(ctxFor(t, 10*time.Second), &awssqs.CreateQueueInput{
		QueueName: aws.String(name), Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "4"},
	})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	snk := startSink(t)
	runChaos(t, p, kind{
		name:     "sqs-fifo",
		replicas: 2,
		source: fmt.Sprintf(`  source "sqs" {
    queue_url          = %q
    endpoint           = %q
    region             = %q
    access_key_id      = "test"
    secret_access_key  = "test"
    wait_time          = "1s"
    visibility_timeout = "4s"
  }
`, url, endpoint, region),
		send: func(ctx context.Context, msgs []msgRef) error {
			entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
			for k, r := range msgs {
				entries[k] = types.SendMessageBatchRequestEntry{
					Id: aws.String(fmt.Sprint(k)), MessageBody: aws.String(body(r.g, r.i)),
					MessageGroupId: aws.String(group(r.g)), MessageDeduplicationId: aws.String(dedupID(r.g, r.i)),
				}
			}
			res, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
			if err != nil {
				return err
			}
			if len(res.Failed) > 0 {
				return fmt.Errorf("%d of %d entries failed: %s", len(res.Failed), len(entries), aws.ToString(res.Failed[0].Message))
			}
			return nil
		},
	}, snk)
}
