//go:build unix

package migrate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// One reader of a source at a time on this machine: a second lock fails
// and names the holder; released, the source can be locked again; another
// source is not affected.
func TestLockSource(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	release, err := lockSource("amqp amqp://127.0.0.1:5672 /queue/orders main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockSource("amqp amqp://127.0.0.1:5672 /queue/orders main"); err == nil || !strings.Contains(err.Error(), "another qbridge migrate on this machine reads this source") || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lock: %v", err)
	}
	other, err := lockSource("amqp amqp://127.0.0.1:5672 /queue/invoices main")
	if err != nil {
		t.Fatalf("another source: %v", err)
	}
	other()
	release()
	again, err := lockSource("amqp amqp://127.0.0.1:5672 /queue/orders main")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

// A move started while another one reads the same source fails at once
// instead of splitting its groups (audit: two runs on one RabbitMQ queue
// both said complete and verified, with groups out of order).
func TestSecondMoveOfOneSourceFails(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	b, pipes := setup(t, moveHCL)
	b.mu.Lock()
	b.queue("in").heldByOther = 1 // the first move never finds it drained
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan *Report, 1)
	opt := fastOptions(ModeMove)
	opt.Timeout = time.Minute
	go func() { first <- Run(ctx, pipes, opt, nil) }()
	// The first move holds the lock once its source opened (the lock is
	// taken before the pipeline starts).
	waitUntil(t, "the first move opened its source", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.openedForMigration
	})
	second := fastOptions(ModeMove)
	second.Timeout = 5 * time.Second // the guard: without the lock it would read on
	rep := Run(context.Background(), pipes, second, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "another qbridge migrate on this machine reads this source") {
		t.Fatalf("second move: %s: %s", rep.Outcome, rep.Reason)
	}
	cancel()
	if rep := <-first; rep.Outcome != OutcomeInterrupted {
		t.Errorf("first move: %s: %s", rep.Outcome, rep.Reason)
	}
}

// The second job stops at the lock before it touches the source at all:
// not even its count runs (here a count would fail first, the queue
// answering as missing). An embedded NATS server's store is opened by
// every phase of a job; a second job's count used to open it between the
// first job's phases.
func TestSourceLockComesBeforeTheCount(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	b, pipes := setup(t, moveHCL)
	b.mu.Lock()
	b.missing = true
	b.mu.Unlock()
	release, err := lockSource(pipes[0].SourceIdentity() + " main")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "another qbridge migrate on this machine reads this source") {
		t.Fatalf("a move of a locked source: %s: %s", rep.Outcome, rep.Reason)
	}
}

// The lock also holds by the broker's name for the source (the SQS
// QueueArn): one queue spelled two ways (localhost and 127.0.0.1 in an
// audit) let two moves consume it at once.
func TestSecondMoveOfOneEntityFails(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	b, pipes := setup(t, `
pipeline "by-name" {
  source "memqpar" {
    broker   = "%[1]s"
    queue    = "in"
    spelling = " by name"
  }
  sink "memqpar" {
    broker = "%[1]s"
    queue  = "out"
  }
}
pipeline "by-url" {
  source "memqpar" {
    broker   = "%[1]s"
    queue    = "in"
    spelling = " by URL"
  }
  sink "memqpar" {
    broker = "%[1]s"
    queue  = "out"
  }
}
`)
	first, second := pipes[:1], pipes[1:]
	if first[0].SourceIdentity() == second[0].SourceIdentity() {
		t.Fatal("the two spellings have one identity: the test's premise")
	}
	b.put("in", msgs(3, 0)...)
	b.mu.Lock()
	b.queue("in").heldByOther = 1 // the first move never finds it drained
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *Report, 1)
	opt := fastOptions(ModeMove)
	opt.Timeout = time.Minute
	go func() { done <- Run(ctx, first, opt, nil) }()
	waitUntil(t, "the first move consuming (its sink holds them: memqpar's gate)", func() bool {
		select {
		case rep := <-done:
			t.Fatalf("the first move ended: %s: %s", rep.Outcome, rep.Reason)
		default:
		}
		return b.backlog("in").InFlight == 4
	})
	o := fastOptions(ModeMove)
	o.Timeout = 5 * time.Second // the guard: without the lock it would read on
	rep := Run(context.Background(), second, o, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "another qbridge migrate on this machine reads this source") {
		t.Fatalf("second move: %s: %s", rep.Outcome, rep.Reason)
	}
	close(parStateOf(fmt.Sprintf("b%d", brokerSeq.Load())).gate) // let the first move end
	cancel()
	<-done
}

// waitUntil polls cond, a state another goroutine reaches, for at most 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
