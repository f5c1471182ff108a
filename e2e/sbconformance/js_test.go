package sbconformance

import (
	"context"
	"fmt"
	"github.com/qbridge/qbridge/internal/sbtestserver"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestJavaScriptSDK runs js/conformance.mjs: the official @azure/service-bus
// SDK (pinned in js/package.json) against the same server.
func TestJavaScriptSDK(t *testing.T) {
	requireServer(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := filepath.Join(repoRoot, "e2e/sbconformance/js")
	cmd := exec.CommandContext(ctx, sbtestserver.Node(), "conformance.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"SB_CONNECTION_STRING="+connStr(keyVal),
		fmt.Sprintf("SB_PORT=%d", serverPort),
		"SB_KEY_NAME="+keyName,
		"SB_KEY="+keyVal,
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("node conformance.mjs (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("conformance.mjs: %v", err)
	}
}
