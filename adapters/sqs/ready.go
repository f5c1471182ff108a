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

// readyCheckTimeout bounds one check.
const readyCheckTimeout = 5 * time.Second

// readyCache runs check at most once per readyTTL and shares the answer.
// The check runs in the background: a probe or a metrics scrape gets the
// last answer at once and never waits for the broker, except for the
// first answer (until its own deadline). With an endpoint that hung,
// every /readyz and /metrics took the check's 5 s, and a probe or scrape
// with a shorter timeout saw nothing at all during the incident.
type readyCache struct {
	check func(ctx context.Context) error

	mu      sync.Mutex
	at      time.Time     // when err was found; zero before the first answer
	err     error         // the last answer
	running chan struct{} // closed when the running check ends; nil when none runs
	closed  bool
	stop    context.CancelFunc // ends the running check (close)
}

func (r *readyCache) get(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errClosed
	}
	if !r.at.IsZero() && time.Since(r.at) < readyTTL {
		defer r.mu.Unlock()
		return r.err
	}
	done := r.running
	if done == nil {
		// One check at a time; it ends within readyCheckTimeout, or
		// when the adapter closes.
		done = make(chan struct{})
		r.running = done
		cctx, cancel := context.WithTimeout(context.Background(), readyCheckTimeout)
		r.stop = cancel
		go r.refresh(cctx, done)
	}
	known, err := !r.at.IsZero(), r.err
	r.mu.Unlock()
	if known {
		return err // the last answer while the next one comes
	}
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *readyCache) refresh(ctx context.Context, done chan struct{}) {
	err := r.check(ctx)
	r.mu.Lock()
	r.stop() // releases the context's timer
	r.at, r.err, r.running, r.stop = time.Now(), err, nil, nil
	r.mu.Unlock()
	close(done)
}

// close ends a running check; later calls answer errClosed.
func (r *readyCache) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.stop != nil {
		r.stop()
	}
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
