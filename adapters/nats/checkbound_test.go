package nats

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
)

// An existing durable that filters other subjects than the configuration:
// the daemon binds to it as it is (its owner's settings), with a warning;
// a migration refuses it, since it would move other messages than the
// configuration names (it moved src.other for a configuration of
// src.orders, and said complete).
func TestCheckBoundFilters(t *testing.T) {
	have := jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "src.>"}
	want := jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "src.orders"}
	for _, migrating := range []bool{false, true} {
		s := &jsSource{set: &sourceSettings{js: &jsSourceSettings{noCreate: migrating}}, log: slog.New(slog.DiscardHandler)}
		err := s.checkBound(have, want)
		switch {
		case !migrating && err != nil:
			t.Errorf("daemon: %v, want it bound", err)
		case migrating && (err == nil || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "[src.>]")):
			t.Errorf("migration: %v, want a permanent refusal naming the durable's filter", err)
		}
	}
	same := want
	s := &jsSource{set: &sourceSettings{js: &jsSourceSettings{noCreate: true}}, log: slog.New(slog.DiscardHandler)}
	if err := s.checkBound(same, want); err != nil {
		t.Errorf("the same filter: %v", err)
	}
}
