package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/internal/migrate"
)

// What the summary says, against the real brokers: the notes an audit of
// qbridge migrate found naming the wrong cause.

// A Service Bus sink without management_endpoint on the test server (the
// emulator's form, plain AMQP) cannot be counted because the block does not
// say where the management API is: the verification's note says so, and
// how to count it. It said "its broker offers no message count", which
// Service Bus does.
func TestMigrateServiceBusSinkWithoutManagementEndpointSaysWhy(t *testing.T) {
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"orders","lockDuration":"PT30S"}]}`)
	src := e.createQueue(t, "src", false, nil)
	dlq := e.createQueue(t, "dlq", false, nil)
	sbSetAWSEnv(t)
	t.Setenv("QBRIDGE_SERVICEBUS_CONNECTION_STRING", srv.Conn)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_QUEUE_URL", src)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_DLQ_URL", dlq)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_ENDPOINT", e.endpoint)
	t.Setenv("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", "") // not set
	var entries []types.SendMessageBatchRequestEntry
	for i := range 20 {
		entries = append(entries, migSQSTyped(i, ""))
	}
	e.sendBatch(t, src, entries)
	cfg := filepath.Join(sbRepoRoot(), "configs", "sqs-to-servicebus.hcl")
	code, rep, m := migRun(t, 2*time.Minute, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete || rep.Jobs[0].Written != 20 {
		t.Fatalf("exit %d, outcome %s, written %d: %s", code, rep.Outcome, rep.Jobs[0].Written, rep.Reason)
	}
	v := rep.Jobs[0].Verification
	if v == nil || v.Checked || !strings.Contains(v.Note, "management API is not known") || !strings.Contains(v.Note, "set management_endpoint") ||
		strings.Contains(v.Note, "offers no message count") || strings.Contains(v.Note, "unsupported operation") {
		t.Errorf("verification %+v: want a note naming management_endpoint", v)
	}
	if out := m.out.String(); !strings.Contains(out, "not checked: the sink cannot be counted: servicebus: where") {
		t.Errorf("summary:\n%s", out)
	}
}
