package nats

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestPartitionConfigValidate(t *testing.T) {
	k := func(n int) *int { return &n }
	part := func(mod func(*SourceConfig)) SourceConfig {
		c := SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, GroupFromSubjectToken: 3, JetStream: &JetStreamSourceConfig{
			Stream: "S", Durable: "d-{partition}", FilterSubjects: []string{"orders.{partition}.*"}, Partitions: 4, Partition: k(2),
		}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	tests := []struct {
		name string
		cfg  SourceConfig
		err  string
	}{
		{"partitioned", part(nil), ""},
		{"subject as the filter", part(func(c *SourceConfig) { c.Subject, c.JetStream.FilterSubjects = "orders.{partition}.*", nil }), ""},
		{"no partition", part(func(c *SourceConfig) { c.JetStream.Partition = nil }), "jetstream.partition: required"},
		{"partition out of range", part(func(c *SourceConfig) { c.JetStream.Partition = k(4) }), "jetstream.partition: 4 must be 0 to 3"},
		{"negative partition", part(func(c *SourceConfig) { c.JetStream.Partition = k(-1) }), "jetstream.partition"},
		{"too many partitions", part(func(c *SourceConfig) { c.JetStream.Partitions = 5000 }), "jetstream.partitions"},
		{"durable without the placeholder", part(func(c *SourceConfig) { c.JetStream.Durable = "d" }), "jetstream.durable"},
		{"consumer alias with the placeholder", part(func(c *SourceConfig) { c.JetStream.Durable, c.JetStream.Consumer = "", "c-{partition}" }), ""},
		{"filter without the placeholder", part(func(c *SourceConfig) { c.JetStream.FilterSubjects = []string{"orders.*"} }), "jetstream.filter_subjects[0]"},
		{"placeholder inside a token", part(func(c *SourceConfig) { c.JetStream.FilterSubjects = []string{"orders.p{partition}.*"} }), "jetstream.filter_subjects[0]"},
		{"no filter", part(func(c *SourceConfig) { c.JetStream.FilterSubjects = nil; c.GroupFromSubjectToken = 0 }), "jetstream.filter_subjects"},
		{"group token on the partition number", part(func(c *SourceConfig) { c.GroupFromSubjectToken = 2 }), "group_from_subject_token"},
		{"group token on a literal", part(func(c *SourceConfig) { c.GroupFromSubjectToken = 1 }), "group_from_subject_token"},
		{"group from the header", part(func(c *SourceConfig) { c.GroupFromSubjectToken = 0 }), ""},
		{"partition without partitions", part(func(c *SourceConfig) { c.JetStream.Partitions = 0 }), "only used with jetstream.partitions"},
		{"placeholder without partitions", part(func(c *SourceConfig) { c.JetStream.Partitions, c.JetStream.Partition = 0, nil }), "only with jetstream.partitions"},
		{"create the stream", part(func(c *SourceConfig) { c.JetStream.CreateStream = true }), ""},
		{"create with the wrong stream subject", part(func(c *SourceConfig) {
			c.JetStream.CreateStream, c.JetStream.StreamSubjects = true, []string{"orders.>"}
		}), "jetstream.stream_subjects"},
		{"create with '>'", part(func(c *SourceConfig) {
			c.JetStream.CreateStream, c.JetStream.FilterSubjects, c.GroupFromSubjectToken = true, []string{"orders.{partition}.>"}, 0
		}), "cannot be partitioned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			set, err := cfg.resolve()
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			}
			if err == nil && set.js.partitions > 0 && (strings.Contains(set.js.durable, "{") || strings.Contains(strings.Join(set.js.filterSubjects, ","), "{")) {
				t.Errorf("placeholders left: durable %q, filters %v", set.js.durable, set.js.filterSubjects)
			}
		})
	}
	cfg := part(nil)
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if set.js.durable != "d-2" || set.js.filterSubjects[0] != "orders.2.*" || set.js.partition != 2 || set.js.partitions != 4 {
		t.Errorf("resolved: durable %q, filters %v, partition %d of %d", set.js.durable, set.js.filterSubjects, set.js.partition, set.js.partitions)
	}
}

func TestPartitionTransform(t *testing.T) {
	tests := []struct {
		template, source, destination string
		n                             int
	}{
		{"orders.{partition}.*", "orders.*", "orders.{{partition(4,1)}}.{{wildcard(1)}}", 4},
		{"{partition}.orders.*", "orders.*", "{{partition(2,1)}}.orders.{{wildcard(1)}}", 2},
		{"t.*.{partition}.*", "t.*.*", "t.{{wildcard(1)}}.{{partition(3,1,2)}}.{{wildcard(2)}}", 3},
	}
	for _, tt := range tests {
		tr, err := newPartitionTransform([]string{tt.template}, nil, tt.n)
		if err != nil {
			t.Fatalf("%s: %v", tt.template, err)
		}
		if tr.source != tt.source || tr.destination != tt.destination {
			t.Errorf("%s: %q → %q, want %q → %q", tt.template, tr.source, tr.destination, tt.source, tt.destination)
		}
	}
	for _, bad := range []string{"orders.{partition}", "orders.{partition}.>"} {
		if _, err := newPartitionTransform([]string{bad}, nil, 2); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := newPartitionTransform([]string{"a.{partition}.*", "b.{partition}.*"}, nil, 2); err == nil {
		t.Error("two templates: no error")
	}
}

// partitionSource is a source of partition k of 2 on stream P, which it
// creates (the first one) with the partition transform: orders.<group>
// is stored as orders.<partition>.<group>.
func partitionSource(t *testing.T, url string, k, partitions int) *jsSource {
	t.Helper()
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, GroupFromSubjectToken: 3,
		JetStream: &JetStreamSourceConfig{
			Stream: "P", Durable: "bridge-{partition}", FilterSubjects: []string{"orders.{partition}.*"},
			Partitions: partitions, Partition: &k, CreateStream: true, AckWait: "5s", FetchWait: "300ms",
		}})
	return src.(*jsSource)
}

// TestJetStreamPartitions: two sources, one per partition of a stream
// they create with the partition transform, share the groups: each group
// is read by one of them only, in order, and together they read all.
func TestJetStreamPartitions(t *testing.T) {
	srv := startServer(t)
	p0 := partitionSource(t, srv.ClientURL(), 0, 2)
	p1 := partitionSource(t, srv.ClientURL(), 1, 2)
	js, err := jetstream.New(connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctxT(t, 5*time.Second), "P")
	if err != nil {
		t.Fatal(err)
	}
	if tr := st.CachedInfo().Config.SubjectTransform; tr == nil || tr.Source != "orders.*" || tr.Destination != "orders.{{partition(2,1)}}.{{wildcard(1)}}" {
		t.Fatalf("stream transform %+v", tr)
	}
	const groups, per = 20, 5
	for i := range per {
		for g := range groups {
			if _, err := js.Publish(ctxT(t, 5*time.Second), fmt.Sprintf("orders.c%d", g), []byte(fmt.Sprintf("c%d:%d", g, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	c0, c1 := collect(t, p0, true), collect(t, p1, true)
	deadline := time.Now().Add(20 * time.Second)
	for c0.count()+c1.count() < groups*per {
		if time.Now().After(deadline) {
			t.Fatalf("got %d + %d of %d", c0.count(), c1.count(), groups*per)
		}
		time.Sleep(10 * time.Millisecond) // a poll of the collectors
	}
	c0.stop()
	c1.stop()
	owner := map[string]int{}
	next := map[string]int{}
	for k, c := range []*collector{c0, c1} {
		if c.count() == 0 {
			t.Errorf("partition %d read nothing: the groups were not spread", k)
		}
		c.mu.Lock()
		for _, d := range c.got {
			m := d.Message()
			g, n, _ := strings.Cut(string(m.Body), ":")
			if m.GroupKey != g {
				t.Errorf("partition %d: %s has group key %q", k, m.Body, m.GroupKey)
			}
			if want := fmt.Sprintf("orders.%d.%s", k, g); m.Source.Address != want {
				t.Errorf("partition %d: %s stored as %s, want %s", k, m.Body, m.Source.Address, want)
			}
			if o, ok := owner[g]; ok && o != k {
				t.Errorf("group %s read by partitions %d and %d", g, o, k)
			}
			owner[g] = k
			if n != fmt.Sprint(next[g]) {
				t.Errorf("group %s: %s after %d", g, m.Body, next[g]-1)
			}
			next[g]++
		}
		c.mu.Unlock()
	}
	if len(owner) != groups {
		t.Errorf("%d groups read, want %d", len(owner), groups)
	}
}

// TestJetStreamPartitionCountMismatch: a source whose partition count
// differs from the stream's transform refuses to start.
func TestJetStreamPartitionCountMismatch(t *testing.T) {
	srv := startServer(t)
	_ = partitionSource(t, srv.ClientURL(), 0, 3)
	k := 1
	_, err := NewSource(ctxT(t, 10*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, GroupFromSubjectToken: 3,
		JetStream: &JetStreamSourceConfig{
			Stream: "P", Durable: "bridge-{partition}", FilterSubjects: []string{"orders.{partition}.*"}, Partitions: 2, Partition: &k,
		}}, nil)
	if err == nil || !strings.Contains(err.Error(), "partitions into 3") {
		t.Fatalf("err = %v", err)
	}
}
