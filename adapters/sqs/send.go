package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// sendEntries sends a batch: one entry alone with SendMessage, more with
// SendMessageBatch. A batch SQS finds too long as a whole (its accounting may
// differ from ours) is sent again one message at a time.
func (s *Sink) sendEntries(ctx context.Context, batch []*entry) []error {
	if len(batch) == 1 {
		return []error{s.sendOne(ctx, batch[0])}
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, e := range batch {
		entries[i] = e.out.BatchEntry(strconv.Itoa(i))
	}
	out, err := s.api.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &s.queue.url, Entries: entries})
	if err != nil {
		if isBatchTooLong(err) {
			s.log.Debug("sqs: batch too long for the queue; sending its messages one at a time", "entries", len(batch))
			return s.sendSingly(ctx, batch)
		}
		errs := make([]error, len(batch))
		cerr := callError("SendMessageBatch", err)
		for i := range errs {
			errs[i] = cerr
		}
		return errs
	}
	errs := make([]error, len(batch))
	seen := make([]bool, len(batch))
	for _, r := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(r.Id))
		if err != nil || i < 0 || i >= len(batch) {
			continue
		}
		seen[i] = true
		errs[i] = verifySent(batch[i].out, r.MD5OfMessageBody, r.MD5OfMessageAttributes, r.MD5OfMessageSystemAttributes, aws.ToString(r.MessageId))
		if errs[i] == nil {
			s.ids.sent(aws.ToString(r.MessageId))
		}
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(batch) {
			continue
		}
		seen[i] = true
		errs[i] = entryError("SendMessageBatch", f)
	}
	for i := range seen {
		if !seen[i] {
			errs[i] = errors.New("sqs: SendMessageBatch: the answer has no result for this entry")
		}
	}
	return errs
}

// sendSingly sends entries one by one, in order; with FIFO, once an entry of
// a group fails, the later ones of that group are not sent.
func (s *Sink) sendSingly(ctx context.Context, batch []*entry) []error {
	errs := make([]error, len(batch))
	failed := map[string]bool{}
	for i, e := range batch {
		if e.group != "" && failed[e.group] {
			errs[i] = fmt.Errorf("sqs: not sent: an earlier message of group %q failed", e.group)
			continue
		}
		errs[i] = s.sendOne(ctx, e)
		if errs[i] != nil && e.group != "" {
			failed[e.group] = true
		}
	}
	return errs
}

func (s *Sink) sendOne(ctx context.Context, e *entry) error {
	out, err := s.api.SendMessage(ctx, e.out.SendMessageInput(s.queue.url))
	if err != nil {
		return callError("SendMessage", err)
	}
	err = verifySent(e.out, out.MD5OfMessageBody, out.MD5OfMessageAttributes, out.MD5OfMessageSystemAttributes, aws.ToString(out.MessageId))
	if err == nil {
		s.ids.sent(aws.ToString(out.MessageId))
	}
	return err
}

// verifySent compares the digests SQS computed of what it stored with ours.
// A mismatch means the message was altered on the way: SQS stored something
// else, so the send is reported failed (retryable; with FIFO the dedup id
// keeps a resend from duplicating).
func verifySent(o *sqsmap.Outbound, md5Body, md5Attrs, md5Sys *string, messageID string) error {
	if md5Body != nil {
		if want := sqsmap.MD5OfBody(o.Body); !strings.EqualFold(want, *md5Body) {
			return fmt.Errorf("sqs: message %s: SQS stored a body with MD5 %s, sent %s", messageID, *md5Body, want)
		}
	}
	if md5Attrs != nil && len(o.Attributes) > 0 {
		if want := sqsmap.MD5OfAttributes(o.Attributes); !strings.EqualFold(want, *md5Attrs) {
			return fmt.Errorf("sqs: message %s: SQS stored message attributes with MD5 %s, sent %s", messageID, *md5Attrs, want)
		}
	}
	if md5Sys != nil && len(o.SystemAttributes) > 0 {
		if want := md5OfSystemAttributes(o.SystemAttributes); !strings.EqualFold(want, *md5Sys) {
			return fmt.Errorf("sqs: message %s: SQS stored system attributes with MD5 %s, sent %s", messageID, *md5Sys, want)
		}
	}
	return nil
}

// md5OfSystemAttributes: system attributes are digested like message
// attributes (docs/wire-sqs.md §2).
func md5OfSystemAttributes(sys map[string]types.MessageSystemAttributeValue) string {
	as := make(map[string]types.MessageAttributeValue, len(sys))
	for k, v := range sys {
		as[k] = types.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return sqsmap.MD5OfAttributes(as)
}

// isBatchTooLong reports SQS's BatchRequestTooLong.
func isBatchTooLong(err error) bool {
	var tl *types.BatchRequestTooLong
	if errors.As(err, &tl) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), "BatchRequestTooLong")
}
