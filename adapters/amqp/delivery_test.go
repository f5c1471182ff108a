package amqp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/amqpguard"
	"github.com/qbridge/qbridge/mapping"
)

// fakeSettler records settlements; modifyErr is what ModifyMessage returns.
type fakeSettler struct {
	calls     []string
	modifyErr error
	rejectErr *amqp.Error
	modOpts   *amqp.ModifyMessageOptions
}

func (f *fakeSettler) AcceptMessage(context.Context, *amqp.Message) error {
	f.calls = append(f.calls, "accept")
	return nil
}

func (f *fakeSettler) RejectMessage(_ context.Context, _ *amqp.Message, e *amqp.Error) error {
	f.calls = append(f.calls, "reject")
	f.rejectErr = e
	return nil
}

func (f *fakeSettler) ReleaseMessage(context.Context, *amqp.Message) error {
	f.calls = append(f.calls, "release")
	return nil
}

func (f *fakeSettler) ModifyMessage(_ context.Context, _ *amqp.Message, o *amqp.ModifyMessageOptions) error {
	f.calls = append(f.calls, "modify")
	f.modOpts = o
	return f.modifyErr
}

func testPolicy(mode nackMode) (*settlePolicy, *bytes.Buffer) {
	var buf bytes.Buffer
	return &settlePolicy{mode: mode, rejectCond: DefaultRejectCondition, log: slog.New(slog.NewTextHandler(&buf, nil))}, &buf
}

func newTestDelivery(st settler, pol *settlePolicy, modSent *atomic.Bool) *delivery {
	return &delivery{st: st, msg: &amqp.Message{}, pol: pol, modSent: modSent}
}

// RabbitMQ 3.x answers a Modify with end(amqp:invalid-field) on the session.
var rabbitModifyRefusal = &amqp.SessionError{RemoteErr: &amqp.Error{
	Condition:   amqp.ErrCondInvalidField,
	Description: "Unrecognised state: {'v1_0.modified',true,undefined,undefined}",
}}

func TestNackModes(t *testing.T) {
	for _, tc := range []struct {
		mode nackMode
		want string
	}{{nackAuto, "modify"}, {nackModify, "modify"}, {nackRelease, "release"}} {
		pol, _ := testPolicy(tc.mode)
		st := &fakeSettler{}
		if err := newTestDelivery(st, pol, nil).Nack(context.Background(), 5); err != nil {
			t.Fatal(err)
		}
		if strings.Join(st.calls, ",") != tc.want {
			t.Errorf("%s: calls %v, want %s", tc.mode, st.calls, tc.want)
		}
		if tc.want == "modify" && (st.modOpts == nil || !st.modOpts.DeliveryFailed || st.modOpts.UndeliverableHere) {
			t.Errorf("%s: modify options %+v", tc.mode, st.modOpts)
		}
	}
}

// A broker that refuses Modify synchronously (the disposition fails with the
// session end): auto mode reports the message handed back, and releases
// from then on.
func TestNackAutoFallbackSync(t *testing.T) {
	pol, logs := testPolicy(nackAuto)
	var modSent atomic.Bool
	st := &fakeSettler{modifyErr: rabbitModifyRefusal}
	if err := newTestDelivery(st, pol, &modSent).Nack(context.Background(), 0); err != nil {
		t.Fatalf("Nack = %v, want nil (the session end returns the message)", err)
	}
	if !modSent.Load() {
		t.Error("modify not recorded on the link")
	}
	st2 := &fakeSettler{}
	if err := newTestDelivery(st2, pol, &modSent).Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(st.calls, st2.calls...), ","); got != "modify,release" {
		t.Fatalf("calls %s, want modify,release", got)
	}
	if !strings.Contains(logs.String(), "Nack releases from now on") {
		t.Errorf("no warning logged: %s", logs)
	}
}

// RabbitMQ's real behaviour: ModifyMessage returns nil (mode first: the
// disposition is only written) and the session ends a moment later; the
// source sees it as the link's failure and tells the policy.
func TestNackAutoFallbackAsync(t *testing.T) {
	pol, _ := testPolicy(nackAuto)
	var modSent atomic.Bool
	st := &fakeSettler{}
	if err := newTestDelivery(st, pol, &modSent).Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if !pol.linkEnded(modSent.Load(), rabbitModifyRefusal) {
		t.Fatal("session end after a Modify not taken as a refusal")
	}
	if pol.useModify() {
		t.Fatal("auto mode still modifies")
	}
}

func TestLinkEndedRefusals(t *testing.T) {
	for _, e := range []*amqp.Error{
		{Condition: amqp.ErrCondNotImplemented},
		{Condition: amqp.ErrCondNotAllowed, Description: "x"},
		{Condition: "vendor:odd", Description: "Outcome Modified not supported"},
	} {
		pol, _ := testPolicy(nackAuto)
		if !pol.linkEnded(true, &amqp.LinkError{RemoteErr: e}) || pol.useModify() {
			t.Errorf("%+v not taken as a refusal", e)
		}
	}
}

func TestLinkEndedIgnoresOtherFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		modSent bool
		err     error
	}{
		"no modify sent":   {false, rabbitModifyRefusal},
		"network":          {true, &amqp.ConnError{}},
		"local link close": {true, &amqp.LinkError{}},
		"broker shutdown":  {true, &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondConnectionForced}}},
		"detach forced":    {true, &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondDetachForced}}},
		"rabbit shutdown":  {true, &amqp.SessionError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondInternalError, Description: "shutdown"}}},
		"context":          {true, context.Canceled},
	} {
		pol, _ := testPolicy(nackAuto)
		if pol.linkEnded(tc.modSent, tc.err) || !pol.useModify() {
			t.Errorf("%s: taken as a Modify refusal", name)
		}
	}
}

// An explicit nack = "modify" keeps modifying; a session the peer ends over
// it still hands the message back (nil).
func TestNackExplicitModifyKeepsModifying(t *testing.T) {
	pol, _ := testPolicy(nackModify)
	st := &fakeSettler{modifyErr: rabbitModifyRefusal}
	d := newTestDelivery(st, pol, nil)
	if err := d.Nack(context.Background(), 0); err != nil {
		t.Fatalf("Nack = %v", err)
	}
	st2 := &fakeSettler{}
	_ = newTestDelivery(st2, pol, nil).Nack(context.Background(), 0)
	if st2.calls[0] != "modify" {
		t.Fatal("explicit modify mode switched to release")
	}
}

func TestDeadLetterAndOnce(t *testing.T) {
	pol, _ := testPolicy(nackAuto)
	pol.rejectCond = "x:custom"
	st := &fakeSettler{}
	d := newTestDelivery(st, pol, nil)
	var dl driver.DeadLetterer = d
	if err := dl.DeadLetter(context.Background(), "too-big", "over 1 MiB"); err != nil {
		t.Fatal(err)
	}
	if st.rejectErr == nil || st.rejectErr.Condition != "x:custom" || st.rejectErr.Description != "too-big: over 1 MiB" {
		t.Fatalf("reject error %+v", st.rejectErr)
	}
	for _, f := range []func() error{
		func() error { return d.Ack(context.Background()) },
		func() error { return d.Nack(context.Background(), 0) },
		func() error { return d.DeadLetter(context.Background(), "r", "") },
	} {
		if err := f(); !errors.Is(err, errSettled) {
			t.Fatalf("second settlement: %v", err)
		}
	}
	if len(st.calls) != 1 {
		t.Fatalf("calls %v", st.calls)
	}
	if err := d.Extend(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
}

func TestOutcome(t *testing.T) {
	for name, tc := range map[string]struct {
		state     amqp.DeliveryState
		ok, perm  bool
		errSubstr string
	}{
		"accepted":  {&amqp.StateAccepted{}, true, false, ""},
		"rejected":  {&amqp.StateRejected{Error: &amqp.Error{Condition: "amqp:not-allowed", Description: "nope"}}, false, true, "nope"},
		"rejected0": {&amqp.StateRejected{}, false, true, "no error given"},
		"released":  {&amqp.StateReleased{}, false, false, "released"},
		"modified":  {&amqp.StateModified{UndeliverableHere: true}, false, false, "undeliverable-here true"},
		"none":      {nil, false, false, "without an outcome"},
		"received":  {&amqp.StateReceived{}, false, false, "non-terminal"},
	} {
		err := outcome("/queue/q", tc.state)
		if (err == nil) != tc.ok || driver.IsPermanent(err) != tc.perm || err != nil && !strings.Contains(err.Error(), tc.errSubstr) {
			t.Errorf("%s: %v (permanent %v)", name, err, driver.IsPermanent(err))
		}
	}
}

func TestBrokerProduct(t *testing.T) {
	for _, tc := range []struct {
		props   map[string]any
		rabbit3 bool
	}{
		{map[string]any{"product": "RabbitMQ", "version": "3.10.8"}, true},
		{map[string]any{"product": "RabbitMQ", "version": "3.13.7"}, true},
		{map[string]any{"product": "RabbitMQ", "version": "4.0.5"}, false},
		{map[string]any{"product": "apache-activemq-artemis", "version": "2.31.2"}, false},
		{nil, false},
	} {
		if _, got := brokerProduct(tc.props); got != tc.rabbit3 {
			t.Errorf("%v: rabbit3 = %v", tc.props, got)
		}
	}
}

// A message that cannot be decoded comes out as a delivery whose
// DecodeError says why and whose Message holds the raw AMQP bytes; its
// settlement is any delivery's: DeadLetter rejects with reject_condition,
// Nack (the engine's fallback when the dead-letter copy failed) hands it
// back. A good message's DecodeError is nil.
func TestUndecodableDelivery(t *testing.T) {
	log, logs := testLog(t)
	pol, _ := testPolicy(nackRelease)
	s := &source{set: sourceSettings{address: "/queue/q"}, log: log, poison: amqpguard.NewLog(), pol: pol}
	l := &rlink{}

	good := s.deliver(l, &amqp.Message{Properties: &amqp.MessageProperties{MessageID: "ok"}, Data: [][]byte{[]byte("b")}})
	if err := good.(driver.DecodeErrorer).DecodeError(); err != nil || good.Message().ID != "ok" {
		t.Fatalf("good: %v %+v", err, good.Message())
	}

	bad := &amqp.Message{
		Header:                &amqp.MessageHeader{DeliveryCount: 2},
		Properties:            &amqp.MessageProperties{MessageID: uint64(7), GroupID: ptr("g"), ContentType: ptr("text/plain")},
		ApplicationProperties: map[string]any{mapping.EnvelopeName: "{not json"},
		Value:                 "v",
	}
	d := s.deliver(l, bad)
	err := d.(driver.DecodeErrorer).DecodeError()
	if err == nil || !strings.Contains(err.Error(), "malformed envelope") {
		t.Fatalf("decode error %v", err)
	}
	m := d.Message()
	if m.ID != "7" || m.IDKind != mapping.KindUint64 || m.GroupKey != "g" || m.ContentType != RawMessageContentType ||
		m.Source.DeliveryCount != 3 || m.Source.Address != "/queue/q" || m.Source.Protocol != "amqp" {
		t.Fatalf("message %+v", m)
	}
	var back amqp.Message
	if err := back.UnmarshalBinary(m.Body); err != nil || back.Value != "v" || back.ApplicationProperties[mapping.EnvelopeName] != "{not json" {
		t.Fatalf("raw body: %v %+v", err, back)
	}
	if s.undecodable.Load() != 1 || !strings.Contains(logs.String(), "cannot be decoded") {
		t.Fatalf("not counted or logged:\n%s", logs)
	}

	st := &fakeSettler{}
	d.(*delivery).st = st
	if err := d.(driver.DeadLetterer).DeadLetter(context.Background(), "corrupt", err.Error()); err != nil {
		t.Fatal(err)
	}
	if st.calls[0] != "reject" || st.rejectErr.Condition != DefaultRejectCondition || !strings.HasPrefix(st.rejectErr.Description, "corrupt: ") {
		t.Fatalf("%v %+v", st.calls, st.rejectErr)
	}
	d = s.deliver(l, bad)
	d.(*delivery).st = st
	if err := d.Nack(context.Background(), 0); err != nil || st.calls[1] != "release" {
		t.Fatalf("%v %v", err, st.calls)
	}
}

func ptr[T any](v T) *T { return &v }

// A disposition the broker sends on its own (go-amqp's
// OnDeliveryStateChanged) settles the delivery: the engine's later
// settlement sends nothing, and says what happened.
func TestPeerSettled(t *testing.T) {
	released, accepted := amqp.DeliveryState(&amqp.StateReleased{}), amqp.DeliveryState(&amqp.StateAccepted{})
	for _, tc := range []struct {
		name    string
		state   amqp.DeliveryState
		settle  func(*delivery) error
		wantErr bool // else nil
	}{
		{"ack after release", released, func(d *delivery) error { return d.Ack(context.Background()) }, true},
		{"nack after release", released, func(d *delivery) error { return d.Nack(context.Background(), 0) }, false},
		{"nack after modify", &amqp.StateModified{DeliveryFailed: true}, func(d *delivery) error { return d.Nack(context.Background(), 0) }, false},
		{"dead-letter after release", released, func(d *delivery) error { return d.DeadLetter(context.Background(), "r", "") }, true},
		{"nack after accept", accepted, func(d *delivery) error { return d.Nack(context.Background(), 0) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, _ := testPolicy(nackAuto)
			st := &fakeSettler{}
			log, buf := testPolicy(nackAuto)
			s := &source{set: sourceSettings{address: "/queue/q"}, log: log.log}
			peers := newPeerSettlements()
			d := &delivery{st: st, msg: &amqp.Message{DeliveryTag: []byte{1, 2}}, pol: pol}
			if got := s.track(&rlink{peers: peers}, d); got != driver.Delivery(d) {
				t.Fatalf("track = %v", got)
			}
			s.onPeerSettled(peers)(&amqp.Message{DeliveryTag: []byte{1, 2}}, tc.state)
			err := tc.settle(d)
			if (err != nil) != tc.wantErr || err != nil && !errors.Is(err, errPeerSettled) {
				t.Fatalf("settle: %v, want error %v", err, tc.wantErr)
			}
			if len(st.calls) != 0 {
				t.Errorf("sent %v for a delivery the broker settled", st.calls)
			}
			if n := s.peerSettled.Load(); n != 1 {
				t.Errorf("peerSettled = %d", n)
			}
			if !strings.Contains(buf.String(), "the broker settled a delivery on its own") || !strings.Contains(buf.String(), "held_by_engine=true") {
				t.Errorf("log: %s", buf)
			}
			if err := tc.settle(d); !errors.Is(err, errSettled) {
				t.Errorf("second settlement: %v", err)
			}
		})
	}
}

// A delivery the broker settled while it waited in the prefetch queue is
// not handed over; one it did not settle is, and settles normally.
func TestPeerSettledBeforeDelivery(t *testing.T) {
	pol, buf := testPolicy(nackAuto)
	s := &source{set: sourceSettings{address: "/queue/q"}, log: pol.log}
	peers := newPeerSettlements()
	l := &rlink{peers: peers}
	s.onPeerSettled(peers)(&amqp.Message{DeliveryTag: []byte{7}}, &amqp.StateReleased{})
	if got := s.track(l, &delivery{msg: &amqp.Message{DeliveryTag: []byte{7}}, pol: pol}); got != nil {
		t.Fatalf("handed over a delivery the broker took back: %v", got)
	}
	if !strings.Contains(buf.String(), "held_by_engine=false") || !strings.Contains(buf.String(), "dropped a prefetched delivery") {
		t.Errorf("log: %s", buf)
	}
	// received: not an outcome
	s.onPeerSettled(peers)(&amqp.Message{DeliveryTag: []byte{8}}, &amqp.StateReceived{})
	st := &fakeSettler{}
	d := &delivery{st: st, msg: &amqp.Message{DeliveryTag: []byte{8}}, pol: pol}
	if s.track(l, d) == nil {
		t.Fatal("a delivery the broker only marked received was dropped")
	}
	if err := d.Ack(context.Background()); err != nil || len(st.calls) != 1 || st.calls[0] != "accept" {
		t.Fatalf("ack: %v, calls %v", err, st.calls)
	}
	if len(peers.live) != 0 || len(peers.early) != 0 {
		t.Errorf("tracker keeps %d live, %d early", len(peers.live), len(peers.early))
	}
}
