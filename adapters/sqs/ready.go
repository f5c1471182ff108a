package sqs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// readyTTL is how long a Ready answer is reused: /readyz may be polled
// often and GetQueueAttributes is billed.
const readyTTL = 5 * time.Second

// readyCache runs check at most once per readyTTL and shares the answer.
type readyCache struct {
	check func(ctx context.Context) error

	mu  sync.Mutex
	at  time.Time
	err error
}

func (r *readyCache) get(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyTTL {
		return r.err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := r.check(cctx)
	if ctx.Err() != nil {
		return ctx.Err() // the caller gave up: do not cache that
	}
	r.at, r.err = time.Now(), err
	return err
}

// queueReady is the cheap call behind Ready.
func queueReady(ctx context.Context, client api, queueURL string) error {
	_, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("sqs: queue %s: %w", queueURL, err)
	}
	return nil
}
