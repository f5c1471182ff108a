package servicebus

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"unicode/utf8"

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
//
// Each message goes in the form that carries it as it is, whatever else
// was sent with it: a body that is not UTF-8 text as a single send (a
// batch's JSON would need base64), text an HTTP header cannot hold as a
// batch, of one if need be (sendOne). So whether a message is accepted,
// and what a consumer reads, does not depend on how many messages the
// engine handed over at once. Order is kept: a message sent alone splits
// the batch around it.
func (s *httpsSink) sendBatch(ctx context.Context, entity string, items []restOutgoing, errs []error) {
	for len(items) > 0 {
		if i := slices.IndexFunc(items, func(it restOutgoing) bool { return !utf8.Valid(it.m.Body) }); i >= 0 && len(items) > 1 {
			if i > 0 {
				s.sendBatch(ctx, entity, items[:i], errs)
			}
			s.sendOne(ctx, entity, items[i], errs)
			items = items[i+1:]
			continue
		}
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

// sendOne sends one message (restRequest).
func (s *httpsSink) sendOne(ctx context.Context, entity string, it restOutgoing, errs []error) {
	h, body, err := restRequest(it.m, s.set.opt)
	if err != nil {
		errs[it.idx] = err
		return
	}
	errs[it.idx] = s.restSendErr(entity, s.post(ctx, entity, h, body, "send"))
}

// restRequest encodes one message as a single send, or as a batch of one
// when only a batch carries it as it is (text an HTTP header cannot hold):
// the policy applies only where neither form can. The dry sink encodes
// with it too, so a dry run's verdict is the send's.
func restRequest(m *mapping.Message, opt mapping.Options) (http.Header, []byte, error) {
	strict := opt
	strict.Policy, strict.OnDrop = mapping.Reject, nil
	req, err := sbrest.Encode(m, strict)
	if err != nil {
		if body, berr := sbrest.EncodeBatch([]*mapping.Message{m}, strict); berr == nil {
			return http.Header{"Content-Type": {sbrest.BatchContentType}}, body, nil
		}
		if opt.Policy == mapping.Reject {
			return nil, nil, err
		}
		if req, err = sbrest.Encode(m, opt); err != nil {
			return nil, nil, err
		}
	}
	return req.Header, req.Body, nil
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
