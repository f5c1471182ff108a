package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate, and migrate before it touches a broker, refuse a pipeline whose
// sink writes into its own source (config's checkFeeds): exit 1 with the
// diagnostic at the sink block.
func TestSinkFeedingItsSourceRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loop.hcl")
	src := `pipeline "loop" {
  source "sqs" { queue_url = "http://127.0.0.1:1/000000000000/orders" }
  sink "sqs" { queue_url = "http://127.0.0.1:1/000000000000/orders" }
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"validate", path}, {"migrate", "-yes", "-progress", "off", path}} {
		code, out, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, "Sink feeds its own source") || !strings.Contains(errOut, path+":3:3") {
			t.Errorf("%s = %d, want 1 with the diagnostic at %s:3:3\n%s%s", args[0], code, path, out, errOut)
		}
	}
}
