package servicebus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/qbridge/qbridge/internal/sbtestserver"
	"github.com/qbridge/qbridge/internal/testenv"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// The broker tests run against one of:
//   - a real namespace, when QBRIDGE_SERVICEBUS_CONNECTION_STRING is set (a
//     connection string with Manage rights: the tests create their entities
//     with a random prefix and delete them afterwards);
//   - qbridge's Service Bus test server (e2e/sbserver, Node and rhea),
//     started here on 127.0.0.1; its npm packages come from
//     `bash e2e/sbserver/install.sh`. Without them the broker tests skip,
//     unless QBRIDGE_E2E_REQUIRED is set.

const (
	testKeyName = "RootManageSharedAccessKey"
	testKey     = "qbridge-adapter-test-key-0123456789abcdef="
)

var (
	brokerSkip   string // why the broker tests skip
	brokerConn   string // connection string of the broker under test
	brokerHTTP   string // the test server's REST endpoint ("": the namespace's own)
	realNS       bool   // a real namespace
	entityPrefix string // real namespace: the run's entity prefix
)

// entitySpec is one entity the tests use.
type entitySpec struct {
	name        string
	lock        time.Duration
	sessions    bool
	maxDelivery int32
	maxSizeKB   int
	subs        []string // a topic's subscriptions
}

// Every test gets its own entities, so tests run in parallel without
// seeing each other's messages. Short locks keep lock tests fast.
var testEntities = []entitySpec{
	{name: "roundtrip"},
	{name: "settle", maxDelivery: 20},
	{name: "renew", lock: 2 * time.Second},
	{name: "nackdelay", lock: 2 * time.Second, maxDelivery: 20},
	{name: "nackdelay-close", lock: time.Minute, maxDelivery: 20},
	{name: "sched"},
	{name: "poison"},
	{name: "batch"},
	{name: "big", maxSizeKB: 64},
	{name: "big-limit", maxSizeKB: 64}, // TestSinkAtTheSizeLimit's own: the two ran in parallel on one queue and took each other's messages
	{name: "dlq-replay"},
	{name: "sess", sessions: true, lock: 3 * time.Second},
	{name: "sess-idle", sessions: true, lock: 3 * time.Second},
	{name: "sess-default", sessions: true},
	{name: "sess-order", sessions: true, lock: 3 * time.Second},
	{name: "sess-quiet", sessions: true, lock: 3 * time.Second},
	{name: "migrate-sess", sessions: true},
	{name: "events", subs: []string{"audit", "billing"}},
	{name: "template-a"},
	{name: "template-b"},
	{name: "sastoken"},
	{name: "tls"},
	{name: "interop"},
	{name: "rest-gone"},
	{name: "rest-gone-raw"},
	{name: "rest-settle", lock: 2 * time.Second},
	{name: "migrate-count"},
}

// entity names a test entity as the broker knows it.
func entity(name string) string { return entityPrefix + name }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if cs := os.Getenv("QBRIDGE_SERVICEBUS_CONNECTION_STRING"); cs != "" {
		cleanup, err := setupRealNamespace(cs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "servicebus tests: real namespace:", err)
			return 1
		}
		defer cleanup()
		return m.Run()
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if msg := sbtestserver.Missing(root); msg != "" {
		msg += " (or set QBRIDGE_SERVICEBUS_CONNECTION_STRING for a real namespace)"
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			fmt.Fprintln(os.Stderr, "servicebus tests: "+msg)
			return 1
		}
		brokerSkip = msg
		testenv.Report("adapters/servicebus", "the tests that need a Service Bus skip: "+msg)
		return m.Run()
	}
	logf, err := os.CreateTemp("", "sbadapter-server-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "servicebus tests:", err)
		return 1
	}
	defer os.Remove(logf.Name())
	defer logf.Close()
	srv, err := sbtestserver.Start(root, serverConfig(), logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "servicebus tests: starting the test server:", err)
		return 1
	}
	brokerHTTP, brokerConn = srv.HTTP, srv.ConnectionString(testKeyName, testKey)
	code := m.Run()
	srv.Stop()
	if code != 0 {
		if b, err := os.ReadFile(logf.Name()); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 150 {
				lines = lines[len(lines)-150:]
			}
			fmt.Fprintf(os.Stderr, "---- sbserver log (last %d lines) ----\n%s\n", len(lines), strings.Join(lines, "\n"))
		}
	}
	return code
}

func serverConfig() map[string]any {
	props := func(e entitySpec) map[string]any {
		p := map[string]any{"name": e.name, "lockDuration": max(e.lock, 5*time.Second).Milliseconds()}
		if e.lock > 0 {
			p["lockDuration"] = e.lock.Milliseconds()
		}
		if e.sessions {
			p["requiresSession"] = true
		}
		if e.maxDelivery > 0 {
			p["maxDeliveryCount"] = e.maxDelivery
		}
		if e.maxSizeKB > 0 {
			p["maxMessageSizeInKilobytes"] = e.maxSizeKB
		}
		return p
	}
	var queues, topics []any
	for _, e := range testEntities {
		if e.subs == nil {
			queues = append(queues, props(e))
			continue
		}
		var subs []any
		for _, s := range e.subs {
			subs = append(subs, props(entitySpec{name: s, lock: e.lock}))
		}
		t := props(e)
		t["subscriptions"] = subs
		topics = append(topics, t)
	}
	return map[string]any{
		"namespace":            "qbridgetest",
		"sharedAccessPolicies": []any{map[string]any{"name": testKeyName, "key": testKey, "rights": []string{"Manage", "Send", "Listen"}}},
		"queues":               queues,
		"topics":               topics,
	}
}

// setupRealNamespace creates the test entities (prefixed) in a real
// namespace and returns what deletes them.
func setupRealNamespace(cs string) (func(), error) {
	realNS, brokerConn = true, cs
	var b [3]byte
	_, _ = rand.Read(b[:])
	entityPrefix = "qbt-" + hex.EncodeToString(b[:]) + "-"
	ac, err := admin.NewClientFromConnectionString(cs, nil)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var queues, topics []string
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, q := range queues {
			_, _ = ac.DeleteQueue(ctx, q, nil)
		}
		for _, t := range topics {
			_, _ = ac.DeleteTopic(ctx, t, nil)
		}
	}
	iso := func(d time.Duration) *string {
		if d == 0 {
			return nil
		}
		return to.Ptr(fmt.Sprintf("PT%dS", int(d/time.Second)))
	}
	for _, e := range testEntities {
		name := entity(e.name)
		var maxDC *int32
		if e.maxDelivery > 0 {
			maxDC = to.Ptr(e.maxDelivery)
		}
		if e.subs == nil {
			_, err := ac.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
				LockDuration: iso(max(e.lock, 5*time.Second)), RequiresSession: to.Ptr(e.sessions), MaxDeliveryCount: maxDC}})
			if err != nil {
				cleanup()
				return nil, fmt.Errorf("create queue %s: %w", name, err)
			}
			queues = append(queues, name)
			continue
		}
		if _, err := ac.CreateTopic(ctx, name, nil); err != nil {
			cleanup()
			return nil, fmt.Errorf("create topic %s: %w", name, err)
		}
		topics = append(topics, name)
		for _, s := range e.subs {
			if _, err := ac.CreateSubscription(ctx, name, s, nil); err != nil {
				cleanup()
				return nil, fmt.Errorf("create subscription %s/%s: %w", name, s, err)
			}
		}
	}
	return cleanup, nil
}

// needBroker skips a broker test when no broker is available.
func needBroker(t *testing.T) {
	t.Helper()
	if brokerSkip != "" {
		t.Skip(brokerSkip)
	}
}

// needTestServer skips a test that needs what only the test server does
// (e.g. a 2 s lock or a 64 KB size limit, which a real namespace does not
// offer).
func needTestServer(t *testing.T) {
	t.Helper()
	needBroker(t)
	if realNS {
		t.Skip("needs the test server's entity settings")
	}
}
