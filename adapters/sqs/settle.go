package sqs

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// settleAttempts is how often an entry that failed for a passing reason
// (server fault, throttling) is tried in all.
const settleAttempts = 3

// visItem is one ChangeMessageVisibilityBatch entry.
type visItem struct {
	handle string
	secs   int32
}

// deleteBatch deletes messages by receipt handle with DeleteMessageBatch
// (the coalescer gives at most 10), one error per handle.
func (s *Source) deleteBatch(ctx context.Context, handles []string) []error {
	return runEntries(ctx, len(handles), settleAttempts, func(ctx context.Context, idx []int) ([]error, []bool) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(idx))
		for k, i := range idx {
			entries[k] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), ReceiptHandle: aws.String(handles[i])}
		}
		out, err := s.api.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &s.queue.url, Entries: entries})
		if err != nil {
			return batchResults("DeleteMessageBatch", len(idx), nil, nil, err)
		}
		ok := make([]string, len(out.Successful))
		for k, e := range out.Successful {
			ok[k] = aws.ToString(e.Id)
		}
		return batchResults("DeleteMessageBatch", len(idx), ok, out.Failed, nil)
	})
}

// visibilityBatch changes visibility timeouts with
// ChangeMessageVisibilityBatch, one error per item.
func (s *Source) visibilityBatch(ctx context.Context, items []visItem) []error {
	return runEntries(ctx, len(items), settleAttempts, func(ctx context.Context, idx []int) ([]error, []bool) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(idx))
		for k, i := range idx {
			entries[k] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(k)), ReceiptHandle: aws.String(items[i].handle), VisibilityTimeout: items[i].secs,
			}
		}
		out, err := s.api.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &s.queue.url, Entries: entries})
		if err != nil {
			return batchResults("ChangeMessageVisibilityBatch", len(idx), nil, nil, err)
		}
		ok := make([]string, len(out.Successful))
		for k, e := range out.Successful {
			ok[k] = aws.ToString(e.Id)
		}
		return batchResults("ChangeMessageVisibilityBatch", len(idx), ok, out.Failed, nil)
	})
}

// batchResults maps a batch call's answer back to its n entries (ids "0" to
// "n-1"): an error per entry and whether repeating the entry may help. A
// whole-call error applies to every entry and is not repeated here (the SDK
// has retried it already).
func batchResults(op string, n int, ok []string, failed []types.BatchResultErrorEntry, callErr error) ([]error, []bool) {
	errs := make([]error, n)
	again := make([]bool, n)
	if callErr != nil {
		err := callError(op, callErr)
		for i := range errs {
			errs[i] = err
		}
		return errs, again
	}
	seen := make([]bool, n)
	for _, id := range ok {
		if i, err := strconv.Atoi(id); err == nil && i >= 0 && i < n {
			seen[i] = true
		}
	}
	for _, f := range failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= n {
			continue
		}
		seen[i] = true
		errs[i] = entryError(op, f)
		var ee *EntryError
		if errors.As(errs[i], &ee) {
			again[i] = !ee.SenderFault || throttleCodes[ee.Code]
		}
	}
	for i := range seen {
		if !seen[i] {
			errs[i] = errors.New("sqs: " + op + ": the answer has no result for this entry")
			again[i] = true
		}
	}
	return errs, again
}

// visibilitySeconds converts a duration to a VisibilityTimeout: whole
// seconds rounded up, within SQS's 0 to 12 hours.
func visibilitySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d > maxVisibility {
		d = maxVisibility
	}
	return int32((d + time.Second - 1) / time.Second)
}
