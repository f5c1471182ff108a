package sbtestserver

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test binary killed at its -timeout (SIGKILL: no cleanup runs) used to
// leave its Service Bus test server running. The child below starts one,
// prints its PID and is killed; the server must go with it.
func TestServerEndsWithItsStarter(t *testing.T) {
	if os.Getenv("SBTESTSERVER_CHILD") == "1" {
		s, err := Start(repoRoot(), map[string]any{"queues": []any{map[string]any{"name": "q"}}}, os.Stderr)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("PID", s.cmd.Process.Pid)
		select {} // until killed
	}
	root := repoRoot()
	if why := Missing(root); why != "" {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestServerEndsWithItsStarter$")
	child.Env = append(os.Environ(), "SBTESTSERVER_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	pid := 0
	for pid == 0 && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "PID "); ok {
			pid, _ = strconv.Atoi(rest)
		} else if strings.HasPrefix(sc.Text(), "ERROR") {
			t.Fatal(sc.Text())
		}
	}
	if pid == 0 {
		_ = child.Process.Kill()
		t.Fatalf("the child printed no server PID (%v)", sc.Err())
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ours: the child started it
			t.Fatalf("the server (pid %d) outlived its starter by 30 s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs and is not a zombie waiting for its
// parent (here init, which reaps it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && !strings.HasPrefix(rest, "Z")
}

// repoRoot is two folders above this file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
