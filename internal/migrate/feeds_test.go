package migrate

import (
	"context"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/internal/config"
)

// -include-dead-letters reads the source's dead-letter queue into the
// pipeline's dead-letter sink: when that sink is the same queue, the
// pipeline is refused before anything of it runs, and reported as failed
// (the queue is named in the configuration, so no broker is asked).
func TestDeadLetterJobFeedingItsSourceIsRefused(t *testing.T) {
	const dlq = "http://127.0.0.1:1/000000000000/orders-dlq"
	cfg, diags := config.NewLoader().LoadBytes("t.hcl", []byte(`pipeline "move" {
  source "sqs" {
    queue_url             = "http://127.0.0.1:1/000000000000/orders"
    dead_letter_queue_url = "`+dlq+`"
  }
  sink "sqs" { queue_url = "http://127.0.0.1:1/000000000000/orders-new" }
  dead_letter {
    sink "sqs" { queue_url = "`+dlq+`" }
  }
}
`))
	if diags.HasErrors() {
		t.Fatalf("the daemon's configuration is fine: %s", diags.Error())
	}
	opt := fastOptions(ModeMove)
	opt.IncludeDeadLetters = true
	rep := Run(context.Background(), cfg.Pipelines, opt, nil)
	if rep.Outcome != OutcomeFailed || len(rep.Jobs) != 1 || rep.Jobs[0].Outcome != OutcomeFailed || rep.Jobs[0].Read != 0 || !strings.Contains(rep.Reason, "sends to queue "+dlq) || !strings.Contains(rep.Reason, "circulate") {
		t.Fatalf("outcome %s, %d jobs: %s", rep.Outcome, len(rep.Jobs), rep.Reason)
	}

}
