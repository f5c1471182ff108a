package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// The hot-path benchmarks measure qbridge as a user sees it from outside:
// the built daemon (default engine configuration) runs as a child process
// between subject/stream "in" and "out" of an embedded nats-server, a load
// generator in the test process publishes b.N messages of 1 KiB as fast as
// it can and counts what arrives, and each bridge's CPU time comes from the
// kernel (getrusage of the child after it exits). The baseline, in the same
// run on the same server and publisher, is e2e/forwarder: the minimal
// hand-written nats.go forwarder. Reported per bridge: msg/s (received over
// the time from the first publish to the last receipt), lost, reordered
// (within a group; for ungrouped messages, against the publish order), CPU
// µs and minor page faults per message, the load side's CPU per message (the test process:
// publisher, server, counter; on shared cores what the bridge competes
// with), and the unloaded latency the bridge adds (p50/p99 of 500 messages
// sent one at a time). QBRIDGE_HOTPATH_BRIDGE_CPUS runs the bridges under
// taskset -c on the cores it names; QBRIDGE_HOTPATH_RATE offers that many
// messages per second instead of as many as the publisher can (the cost
// per message at a load both bridges keep up with, where neither holds a
// backlog); QBRIDGE_HOTPATH_QBRIDGE_ENV adds space-separated NAME=value
// pairs to qbridge's environment only (e.g. GOGC=200, to measure a runtime
// setting against the same forwarder); QBRIDGE_HOTPATH_QBRIDGE_LOG appends
// qbridge's output of each pass to the file it names.
//
//	go test -run '^$' -bench HotPath -benchtime 200000x ./e2e/

const (
	hotBody   = 1024
	hotGroups = 100
)

var (
	forwarderOnce sync.Once
	forwarderBin  string
	forwarderErr  error
)

func buildForwarder(b *testing.B) string {
	forwarderOnce.Do(func() {
		forwarderBin = filepath.Join(filepath.Dir(qbridgeBin), "forwarder")
		out, err := exec.Command("go", "build", "-o", forwarderBin, "./forwarder").CombinedOutput()
		if err != nil {
			forwarderErr = fmt.Errorf("building e2e/forwarder: %w\n%s", err, out)
		}
	})
	if forwarderErr != nil {
		b.Fatal(forwarderErr)
	}
	return forwarderBin
}

// hotBridge is a bridge process under measurement.
type hotBridge struct {
	name string
	cmd  *exec.Cmd
	logs testlog.Buffer
}

func startHotBridge(b *testing.B, name string, args ...string) *hotBridge {
	b.Helper()
	h := &hotBridge{name: name}
	if cpus := os.Getenv("QBRIDGE_HOTPATH_BRIDGE_CPUS"); cpus != "" {
		// taskset execs the bridge: the PID, its rusage and VmHWM stay the
		// bridge's own.
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	h.cmd = exec.Command(args[0], args[1:]...)
	if env := os.Getenv("QBRIDGE_HOTPATH_QBRIDGE_ENV"); env != "" && name == "qbridge" {
		h.cmd.Env = append(os.Environ(), strings.Fields(env)...)
	}
	h.cmd.Stdout, h.cmd.Stderr = &h.logs, &h.logs
	if err := h.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	})
	return h
}

// bridgeUsage is what a bridge's process used over its pass.
type bridgeUsage struct {
	cpu         time.Duration // user + system
	peakMiB     float64
	minorFaults int64 // pages the kernel mapped in: mostly the heap growing
}

// stop ends the bridge with SIGTERM and returns its CPU time (user + system),
// its peak resident memory in MiB and its minor page faults. The peak is the kernel's VmHWM of
// the running process: getrusage's ru_maxrss of a child counts the
// parent's memory it shared until exec, here the test process's.
func (h *hotBridge) stop(b *testing.B) bridgeUsage {
	b.Helper()
	peak := vmHWM(b, h.cmd.Process.Pid)
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b.Fatalf("%s exited with %v:\n%s", h.name, err, h.logs.String())
		}
	case <-time.After(time.Minute):
		_ = h.cmd.Process.Kill()
		b.Fatalf("%s did not stop within a minute", h.name)
	}
	if path := os.Getenv("QBRIDGE_HOTPATH_QBRIDGE_LOG"); path != "" && h.name == "qbridge" {
		keepLog(b, path, h.logs.String())
	}
	ru := h.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return bridgeUsage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), peakMiB: peak, minorFaults: ru.Minflt}
}

// keepLog appends a pass's qbridge output to path, under a line naming the
// benchmark: with GODEBUG=gctrace=1 in QBRIDGE_HOTPATH_QBRIDGE_ENV it shows
// the live heap at each collection of the burst.
func keepLog(b *testing.B, path, log string) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = fmt.Fprintf(f, "=== %s\n%s", b.Name(), log)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		b.Fatalf("QBRIDGE_HOTPATH_QBRIDGE_LOG: %v", err)
	}
}

// vmHWM is the peak resident memory of process pid in MiB (/proc/PID/status).
func vmHWM(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatalf("VmHWM in /proc/%d/status: %q: %v", pid, line, err)
			}
			return float64(kib) / 1024
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// hotResult is one measured pass.
type hotResult struct {
	rate           float64
	lost, reorder  int
	cpuPerMsg      float64 // µs
	loadCPUPerMsg  float64 // µs of the test process (publisher, server, counter) during the burst
	maxRSS         float64 // MiB, the bridge's peak resident memory
	faultsPerMsg   float64 // the bridge's minor page faults per received message
	p50, p99       time.Duration
	received, sent int
}

// measure records what the bridge's process used: CPU and minor page faults
// per received message, and peak memory.
func (r *hotResult) measure(u bridgeUsage) {
	n := float64(max(r.received, 1))
	r.cpuPerMsg = float64(u.cpu.Microseconds()) / n
	r.maxRSS = u.peakMiB
	r.faultsPerMsg = float64(u.minorFaults) / n
}

// hotCounter receives on "out" and checks the order.
type hotCounter struct {
	mu       sync.Mutex
	seen     []bool
	lastSeq  map[int]int // per group (or -1: ungrouped) the highest seq seen
	reorder  int
	got      atomic.Int64
	last     atomic.Int64 // unix ns of the last receipt
	ping     chan time.Duration
	grouped  bool
	warmedUp chan struct{}
	warmOnce sync.Once
}

func newHotCounter(n int, grouped bool) *hotCounter {
	return &hotCounter{seen: make([]bool, n), lastSeq: map[int]int{}, grouped: grouped,
		ping: make(chan time.Duration, 1), warmedUp: make(chan struct{})}
}

// body layout: "S%09d G%03d T%019d" then padding; S is the global seq, G the
// group, T the publish time (ns).
func hotMessage(buf []byte, seq, group int, ts int64) {
	copy(buf, fmt.Sprintf("S%09d G%03d T%019d", seq, group, ts))
}

func (c *hotCounter) receive(data []byte) {
	if len(data) >= 4 && string(data[:4]) == "WARM" {
		c.warmOnce.Do(func() { close(c.warmedUp) })
		return
	}
	if len(data) >= 4 && string(data[:4]) == "PING" {
		ts, _ := strconv.ParseInt(string(data[4:23]), 10, 64)
		select {
		case c.ping <- time.Since(time.Unix(0, ts)):
		default:
		}
		return
	}
	if len(data) < 35 {
		return
	}
	seq, err1 := strconv.Atoi(string(data[1:10]))
	g, err2 := strconv.Atoi(string(data[12:15]))
	if err1 != nil || err2 != nil {
		return
	}
	key := -1
	if c.grouped {
		key = g
	}
	c.mu.Lock()
	if seq < len(c.seen) && !c.seen[seq] {
		c.seen[seq] = true
		c.got.Add(1)
	}
	if last, ok := c.lastSeq[key]; ok && seq < last {
		c.reorder++
	} else {
		c.lastSeq[key] = seq
	}
	c.mu.Unlock()
	c.last.Store(time.Now().UnixNano())
}

// hotPass runs one measured pass: warm-up (until a probe crosses the
// bridge), n messages as fast as the publisher goes (or at
// QBRIDGE_HOTPATH_RATE), each with a Qbridge-Group header when header is
// set, the wait for the last one (or 3 s without progress), then 500 pings
// one at a time.
func hotPass(b *testing.B, n int, header bool, publish func(m *nats.Msg) error, flush func() error, c *hotCounter) hotResult {
	b.Helper()
	warm := time.NewTicker(50 * time.Millisecond)
	deadline := time.After(time.Minute)
warmup:
	for {
		if err := publish(&nats.Msg{Data: []byte("WARM")}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-c.warmedUp:
			break warmup
		case <-warm.C:
		case <-deadline:
			b.Fatal("no warm-up message crossed the bridge within a minute")
		}
	}
	warm.Stop()
	buf := make([]byte, hotBody)
	for i := range buf {
		buf[i] = 'x'
	}
	rate := hotRate(b)
	load0 := selfCPU(b)
	start := time.Now()
	for i := range n {
		if rate > 0 && i%64 == 0 {
			// Paced: message i is due at start + i/rate.
			if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
		}
		data := make([]byte, hotBody)
		copy(data, buf)
		g := i % hotGroups
		hotMessage(data, i, g, time.Now().UnixNano())
		m := &nats.Msg{Data: data}
		if header {
			m.Header = nats.Header{"Qbridge-Group": []string{"g" + strconv.Itoa(g)}}
		}
		if err := publish(m); err != nil {
			b.Fatal(err)
		}
	}
	if err := flush(); err != nil {
		b.Fatal(err)
	}
	// Wait for the last message, or for 3 s without progress (lost ones).
	for prev, still := int64(-1), 0; c.got.Load() < int64(n); {
		time.Sleep(100 * time.Millisecond)
		if got := c.got.Load(); got == prev {
			if still++; still == 30 {
				break
			}
		} else {
			prev, still = got, 0
		}
	}
	got := int(c.got.Load())
	elapsed := time.Duration(c.last.Load() - start.UnixNano())
	r := hotResult{sent: n, received: got, lost: n - got, rate: float64(got) / elapsed.Seconds(),
		loadCPUPerMsg: float64((selfCPU(b) - load0).Microseconds()) / float64(max(got, 1))}
	c.mu.Lock()
	r.reorder = c.reorder
	c.mu.Unlock()
	r.p50, r.p99 = hotPings(b, publish, c)
	return r
}

// hotRate is the offered rate in msg/s (QBRIDGE_HOTPATH_RATE), or 0: as
// fast as the publisher goes.
func hotRate(b *testing.B) float64 {
	v := os.Getenv("QBRIDGE_HOTPATH_RATE")
	if v == "" {
		return 0
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r <= 0 {
		b.Fatalf("QBRIDGE_HOTPATH_RATE=%q: want a positive number of messages per second", v)
	}
	return r
}

// selfCPU is the test process's CPU time so far (user + system, all
// threads): the load side of a pass, with the embedded server.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hotPings measures the latency of 500 messages sent one at a time.
func hotPings(b *testing.B, publish func(m *nats.Msg) error, c *hotCounter) (p50, p99 time.Duration) {
	b.Helper()
	lat := make([]time.Duration, 0, 500)
	for range 500 {
		if err := publish(&nats.Msg{Data: fmt.Appendf(nil, "PING%019d", time.Now().UnixNano())}); err != nil {
			b.Fatal(err)
		}
		select {
		case d := <-c.ping:
			lat = append(lat, d)
		case <-time.After(10 * time.Second):
			b.Fatal("a ping did not cross the bridge within 10 s")
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

func hotReport(b *testing.B, base, qb hotResult) {
	b.ReportMetric(qb.rate, "msg/s")
	b.ReportMetric(base.rate, "baseline-msg/s")
	b.ReportMetric(qb.rate/base.rate, "ratio")
	b.ReportMetric(float64(qb.lost), "lost")
	b.ReportMetric(float64(base.lost), "baseline-lost")
	b.ReportMetric(float64(qb.reorder), "reordered")
	b.ReportMetric(float64(base.reorder), "baseline-reordered")
	b.ReportMetric(qb.cpuPerMsg, "cpu-µs/msg")
	b.ReportMetric(base.cpuPerMsg, "baseline-cpu-µs/msg")
	b.ReportMetric(qb.cpuPerMsg/base.cpuPerMsg, "cpu-ratio")
	b.ReportMetric(qb.loadCPUPerMsg, "load-cpu-µs/msg")
	b.ReportMetric(base.loadCPUPerMsg, "baseline-load-cpu-µs/msg")
	b.ReportMetric(qb.faultsPerMsg, "faults/msg")
	b.ReportMetric(base.faultsPerMsg, "baseline-faults/msg")
	b.ReportMetric(qb.maxRSS, "max-rss-MiB")
	b.ReportMetric(base.maxRSS, "baseline-max-rss-MiB")
	b.ReportMetric(float64(qb.p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(qb.p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(base.p50.Microseconds()), "baseline-p50-µs")
	b.ReportMetric(float64(base.p99.Microseconds()), "baseline-p99-µs")
	b.Logf("baseline: %.0f msg/s, %d lost, %d reordered, %.2f CPU µs/msg (load side %.2f), max RSS %.0f MiB, p50 %v p99 %v",
		base.rate, base.lost, base.reorder, base.cpuPerMsg, base.loadCPUPerMsg, base.maxRSS, base.p50, base.p99)
	b.Logf("qbridge:  %.0f msg/s, %d lost, %d reordered, %.2f CPU µs/msg (load side %.2f), max RSS %.0f MiB, p50 %v p99 %v",
		qb.rate, qb.lost, qb.reorder, qb.cpuPerMsg, qb.loadCPUPerMsg, qb.maxRSS, qb.p50, qb.p99)
}

// hotConfig writes a qbridge configuration (log level warn: debug logging
// is not what users run under load) and returns its path.
func hotConfig(b *testing.B, pipeline string) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "hot.hcl")
	cfg := "log {\n  level = \"warn\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n" + pipeline
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkHotPathCore: core NATS "in" → bridge → core NATS "out", b.N
// messages of 1 KiB published as fast as the publisher goes; ungrouped, and
// grouped over 100 groups (a Qbridge-Group header; the forwarder ignores
// it). qbridge runs its default configuration.
func BenchmarkHotPathCore(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		name := map[bool]string{false: "ungrouped", true: "grouped"}[grouped]
		b.Run(name, func(b *testing.B) {
			fwd := buildForwarder(b)
			url := startNATS(b).ClientURL()
			b.ResetTimer()
			base := hotCorePass(b, url, startHotBridge(b, "forwarder", fwd, "-url", url, "-in", "in", "-out", "out"), grouped, grouped)
			qb := hotCorePass(b, url, startHotCoreQbridge(b, url, ""), grouped, grouped)
			b.StopTimer()
			hotReport(b, base, qb)
		})
	}
}

var groupCostRuns atomic.Int64

// BenchmarkHotPathGroupCost: what keeping order per group costs qbridge
// itself. The same b.N messages, each with a Qbridge-Group header over 100
// groups, cross qbridge twice on one server: grouped by that header
// (per_group = 1), and as one ordered stream, the source's and the sink's
// group_header set to a header they do not carry (Qbridge-Group is then a
// plain user header, carried through like any other). The load side (publisher,
// server, counter) does the same work in both passes, which the
// ungrouped/grouped pair of BenchmarkHotPathCore cannot give: there the
// header itself costs the load side more than the bridge. Reported as
// hotReport does, the "baseline" being the ungrouped pass; ratio is the
// grouped rate over it. The passes alternate which goes first from one run
// to the next (-count).
func BenchmarkHotPathGroupCost(b *testing.B) {
	url := startNATS(b).ClientURL()
	plain := func() hotResult {
		return hotCorePass(b, url, startHotCoreQbridge(b, url, `group_header = "X-Not-Carried"`), true, false)
	}
	grouped := func() hotResult {
		return hotCorePass(b, url, startHotCoreQbridge(b, url, ""), true, true)
	}
	b.ResetTimer()
	var base, qb hotResult
	if groupCostRuns.Add(1)%2 == 1 {
		base = plain()
		qb = grouped()
	} else {
		qb = grouped()
		base = plain()
	}
	b.StopTimer()
	hotReport(b, base, qb)
}

// startHotCoreQbridge starts qbridge between core subjects "in" and "out"
// of the server at url, in its default configuration plus the given line
// in the source and the sink block.
func startHotCoreQbridge(b *testing.B, url, extra string) *hotBridge {
	return startHotBridge(b, "qbridge", qbridgeBin, "run", hotConfig(b, fmt.Sprintf(`
pipeline "hot" {
  source "nats" {
    url     = %q
    subject = "in"
    %[2]s
  }
  sink "nats" {
    url     = %[1]q
    subject = "out"
    %[2]s
  }
}
`, url, extra)))
}

// hotCorePass publishes b.N messages to core subject "in" (each with a
// Qbridge-Group header when header is set), counts them on "out" (order
// checked within each group when grouped, else against the publish order),
// and stops bridge h.
func hotCorePass(b *testing.B, url string, h *hotBridge, header, grouped bool) hotResult {
	pub, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	sub, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	c := newHotCounter(b.N, grouped)
	ss, err := sub.Subscribe("out", func(m *nats.Msg) { c.receive(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	_ = ss.SetPendingLimits(-1, -1) // the counter must not be the one that drops
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	r := hotPass(b, b.N, header, func(m *nats.Msg) error {
		m.Subject = "in"
		return pub.PublishMsg(m)
	}, pub.Flush, c)
	r.measure(h.stop(b))
	return r
}

// BenchmarkHotPathJetStream: JetStream stream IN → bridge → stream OUT,
// b.N messages of 1 KiB published asynchronously as fast as the publisher
// goes while the bridge runs, counted by a pull consumer on OUT. Baselines
// in the same run: direct (publish to OUT, the same consumer) and the
// forwarder in JetStream mode (a durable pull consumer, async publish, ack
// on PubAck). The ratio is against the forwarder; ratio-direct against
// direct publish + consume.
func BenchmarkHotPathJetStream(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		name := map[bool]string{false: "ungrouped", true: "grouped"}[grouped]
		b.Run(name, func(b *testing.B) {
			fwd := buildForwarder(b)
			s := startNATS(b)
			url := s.ClientURL()
			pass := func(h *hotBridge, inSubject string) hotResult {
				nc, err := nats.Connect(url)
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc)
				c := newHotCounter(b.N, grouped)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				cons, err := js.CreateConsumer(ctx, "OUT", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
				if err != nil {
					b.Fatal(err)
				}
				cc, err := cons.Consume(func(m jetstream.Msg) { c.receive(m.Data()) }, jetstream.PullMaxMessages(2000))
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Stop()
				r := hotPass(b, b.N, grouped, func(m *nats.Msg) error {
					m.Subject = inSubject
					_, err := js.PublishMsgAsync(m)
					return err
				}, func() error {
					select {
					case <-js.PublishAsyncComplete():
						return nil
					case <-ctx.Done():
						return errors.New("async publishes not acknowledged in time")
					}
				}, c)
				if h != nil {
					r.measure(h.stop(b))
				}
				return r
			}
			reset := func() {
				nc, js := e2etest.ConnectNATS(b, url)
				for _, st := range []string{"IN", "OUT"} {
					_ = js.DeleteStream(context.Background(), st)
				}
				natsCreateStream(b, js, "IN", "in")
				natsCreateStream(b, js, "OUT", "out")
				nc.Close()
			}
			b.ResetTimer()
			reset()
			direct := pass(nil, "out")
			reset()
			base := pass(startHotBridge(b, "forwarder", fwd, "-url", url, "-in", "IN", "-out", "out", "-jetstream"), "in")
			reset()
			qb := pass(startHotBridge(b, "qbridge", qbridgeBin, "run", hotConfig(b, fmt.Sprintf(`
pipeline "hot" {
  source "nats" {
    url     = %q
    subject = "in"
    jetstream {
      stream  = "IN"
      durable = "qbridge"
    }
  }
  sink "nats" {
    url     = %q
    subject = "out"
    jetstream {}
  }
}
`, url, url))), "in")
			b.StopTimer()
			hotReport(b, base, qb)
			b.ReportMetric(direct.rate, "direct-msg/s")
			b.ReportMetric(qb.rate/direct.rate, "ratio-direct")
			b.ReportMetric(direct.loadCPUPerMsg, "direct-load-cpu-µs/msg")
			b.Logf("direct:   %.0f msg/s, %d lost, %d reordered, load side %.2f CPU µs/msg",
				direct.rate, direct.lost, direct.reorder, direct.loadCPUPerMsg)
		})
	}
}
