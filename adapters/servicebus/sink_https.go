package servicebus

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbrest"
)

// httpsSink sends over the REST API: one message as POST {entity}/messages
// with BrokerProperties and one header per custom property; several of one
// entity and partition as a batch (a JSON array, content type
// application/vnd.microsoft.servicebus.json) within max_message_size.
type httpsSink struct {
	*sinkCommon
	c *restClient
}

var (
	_ driver.Sink         = (*httpsSink)(nil)
	_ driver.ReadyChecker = (*httpsSink)(nil)
)

func newHTTPSSink(common *sinkCommon, cred azcore.TokenCredential) *httpsSink {
	set := common.set
	common.log.Info("servicebus sink: ready", "namespace", set.conn.description, set.entityField, set.entity.String(),
		"max_message_size", set.maxMessageSize)
	return &httpsSink{sinkCommon: common, c: newRESTClient(set.conn, cred)}
}

type restOutgoing struct {
	idx    int
	entity string
	m      *mapping.Message
}

// Send sends msgs; errors are per message.
func (s *httpsSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	var items []restOutgoing
	for i, m := range msgs {
		entity, mm, err := s.target(m)
		if err != nil {
			errs[i] = err
			continue
		}
		items = append(items, restOutgoing{idx: i, entity: entity, m: mm})
	}
	order, groups := groupBy(items, func(o restOutgoing) batchKey { return batchKey{o.entity, partitionOf(o.m)} })
	eachGroup(order, groups, func(k batchKey, items []restOutgoing) { s.sendBatch(ctx, k.entity, items, errs) })
	for _, err := range errs {
		if err != nil {
			s.record(err)
			return errs
		}
	}
	s.record(nil)
	return errs
}

// sendBatch sends items as one batch; a message the codec refuses is left
// out with its error, a batch over the size limit is split in two, and a
// batch the service refuses is sent one by one to find the culprit.
func (s *httpsSink) sendBatch(ctx context.Context, entity string, items []restOutgoing, errs []error) {
	for len(items) > 0 {
		if len(items) == 1 {
			s.sendOne(ctx, entity, items[0], errs)
			return
		}
		ms := make([]*mapping.Message, len(items))
		for i, it := range items {
			ms[i] = it.m
		}
		body, err := sbrest.EncodeBatch(ms, s.set.opt)
		var be *sbrest.BatchError
		switch {
		case errors.As(err, &be):
			errs[items[be.Index].idx] = be.Err
			items = append(items[:be.Index:be.Index], items[be.Index+1:]...)
			continue
		case errors.Is(err, sbrest.ErrBatchTooLarge):
			half := len(items) / 2
			s.sendBatch(ctx, entity, items[:half], errs)
			items = items[half:]
			continue
		case err != nil:
			for _, it := range items {
				errs[it.idx] = err
			}
			return
		}
		err = s.post(ctx, entity, http.Header{"Content-Type": {sbrest.BatchContentType}}, body, "send batch")
		if err != nil && restPermanent(err) && statusOf(err) != http.StatusUnauthorized && statusOf(err) != http.StatusNotFound && statusOf(err) != http.StatusGone {
			s.log.Warn("servicebus sink: a batch was refused; sending its messages one by one", "entity", entity, "messages", len(items), "error", err)
			for _, it := range items {
				s.sendOne(ctx, entity, it, errs)
			}
			return
		}
		for _, it := range items {
			errs[it.idx] = s.restSendErr(entity, err)
		}
		return
	}
}

func (s *httpsSink) sendOne(ctx context.Context, entity string, it restOutgoing, errs []error) {
	req, err := sbrest.Encode(it.m, s.set.opt)
	if err != nil {
		errs[it.idx] = err
		return
	}
	errs[it.idx] = s.restSendErr(entity, s.post(ctx, entity, req.Header, req.Body, "send"))
}

func (s *httpsSink) post(ctx context.Context, entity string, h http.Header, body []byte, op string) error {
	ctx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
	defer cancel()
	u := s.c.base + "/" + escapePath(entity) + "/messages?timeout=" + timeoutParam(s.set.sendTimeout)
	_, _, err := s.c.do(ctx, op, http.MethodPost, u, entity, h, body, http.StatusCreated)
	return err
}

// Close releases idle connections.
func (s *httpsSink) Close(context.Context) error {
	s.c.http.CloseIdleConnections()
	return nil
}
