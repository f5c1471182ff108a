package amqp

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/go-amqp"
)

// lockedSettler records settlements made from a timer's goroutine.
type lockedSettler struct {
	mu sync.Mutex
	fakeSettler
}

func (l *lockedSettler) ReleaseMessage(ctx context.Context, m *amqp.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fakeSettler.ReleaseMessage(ctx, m)
}

func (l *lockedSettler) released() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// A Nack's delay is kept: the delivery stays unsettled for it and is
// handed back then. It was handed back at once: a message nothing takes
// came straight back thousands of times a second, an error logged each
// time, and on RabbitMQ it held back the queue behind it. A source that
// closes first leaves the hand-back to the link's end.
func TestNackKeepsItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol, _ := testPolicy(nackRelease)
		var later delayedReleases
		st := &lockedSettler{}
		d := &delivery{st: st, msg: &amqp.Message{}, pol: pol, later: &later}
		if err := d.Nack(context.Background(), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := st.released(); n != 0 {
			t.Fatalf("handed back at once (%d)", n)
		}
		time.Sleep(1999 * time.Millisecond)
		synctest.Wait()
		if n := st.released(); n != 0 {
			t.Fatalf("handed back before its delay (%d)", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := st.released(); n != 1 {
			t.Fatalf("handed back %d times after its delay, want 1", n)
		}

		st2 := &lockedSettler{}
		d2 := &delivery{st: st2, msg: &amqp.Message{}, pol: pol, later: &later}
		if err := d2.Nack(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		later.close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := st2.released(); n != 0 {
			t.Errorf("handed back after the source closed (%d)", n)
		}
		// Closed: a Nack hands back at once.
		st3 := &lockedSettler{}
		if err := (&delivery{st: st3, msg: &amqp.Message{}, pol: pol, later: &later}).Nack(context.Background(), time.Second); err != nil || st3.released() != 1 {
			t.Errorf("after close: %v, %d hand-backs", err, st3.released())
		}
	})
}
