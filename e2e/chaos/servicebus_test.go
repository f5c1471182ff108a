package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/sbtestserver"
)

const (
	sbKeyName = "RootManageSharedAccessKey"
	sbKey     = "qbridge-chaos-sb-key-0123456789abcdef="
)

// repoRoot is the repository root (this file is in e2e/chaos/).
func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(here), "..", ".."))
}

// startServiceBus starts the project's Service Bus test server with the
// entities of entitiesJSON; it is killed by PID at cleanup.
func startServiceBus(t *testing.T, entitiesJSON string) string {
	t.Helper()
	if msg := sbtestserver.Missing(repoRoot()); msg != "" {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal([]byte(entitiesJSON), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["namespace"] = "qbridgechaos"
	cfg["sharedAccessPolicies"] = []any{map[string]any{"name": sbKeyName, "key": sbKey, "rights": []string{"Manage", "Send", "Listen"}}}
	logf, err := os.Create(filepath.Join(t.TempDir(), "sbserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sbtestserver.Start(repoRoot(), cfg, logf)
	if err != nil {
		logf.Close()
		t.Fatalf("sbserver: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("sbserver log, last lines:\n%s", e2etest.Tail(string(b), 40))
			}
		}
	})
	return s.ConnectionString(sbKeyName, sbKey)
}

// TestChaosServiceBusSessions: two replicas on a session queue of the
// Service Bus test server. A session (a group) is locked to one receiver,
// so the replicas share the sessions and each stays in order; a killed
// replica's sessions are released when its connection goes (the test
// server releases a session when its link closes) and taken by the other
// one. The server keeps its state in memory: no broker restart.
func TestChaosServiceBusSessions(t *testing.T) {
	p := runPlan()
	conn := startServiceBus(t, `{"queues":[{"name":"in","requiresSession":true,"lockDuration":"PT5S"}]}`)
	c, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 3, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	sender, err := c.NewSender("in", nil)
	if err != nil {
		t.Fatal(err)
	}
	snk := startSink(t)
	runChaos(t, p, kind{
		name:     "servicebus-sessions",
		replicas: 2,
		source: fmt.Sprintf(`  source "servicebus" {
    connection_string = %q
    queue             = "in"
    max_retries       = 3
    retry_delay       = "100ms"
    retry_delay_max   = "1s"
    receive_wait      = "1s"
    lock_renewal      = "1s"
    sessions {
      max_concurrent = 8
      idle_timeout   = "1s"
    }
  }
`, conn),
		send: func(ctx context.Context, msgs []msgRef) error {
			batch, err := sender.NewMessageBatch(ctx, nil)
			if err != nil {
				return err
			}
			for _, r := range msgs {
				m := &azservicebus.Message{
					Body: []byte(body(r.g, r.i)), MessageID: ptr(dedupID(r.g, r.i)), SessionID: ptr(group(r.g)),
				}
				if err := batch.AddMessage(m, nil); err != nil {
					return err
				}
			}
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				if strings.Contains(err.Error(), "closed") {
					return fmt.Errorf("%w (the sender reconnects)", err)
				}
				return err
			}
			return nil
		},
	}, snk)
}

func ptr[T any](v T) *T { return &v }
