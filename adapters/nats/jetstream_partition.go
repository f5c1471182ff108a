package nats

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// Partitions: parallel scale-out of a JetStream source without breaking
// per-group order. The stream's subject transform with nats-server's
// deterministic partition function (`{{partition(N, wildcards...)}}`, a
// hash of the chosen subject tokens modulo N) stores each message under a
// subject that carries its partition number, so every group whose key is
// one of the hashed tokens lives in exactly one partition. Each partition
// has its own durable consumer (filtered on its number), read by one
// replica at a time (the consumer's pinned priority group): N partitions
// are N replicas receiving at once.

// partitionToken is the placeholder for the partition number in durable
// and filter_subjects.
const partitionToken = "{partition}"

// fillPartition puts partition k in place of {partition}.
func fillPartition(s string, k int) string {
	return strings.ReplaceAll(s, partitionToken, strconv.Itoa(k))
}

// resolvePartition checks partitions, partition and the {partition}
// placeholders, and returns the filter subjects as configured (with the
// placeholder): the subject when filter_subjects is empty.
func (js *jsSourceSettings) resolvePartition(j *JetStreamSourceConfig, subject string) ([]string, error) {
	templates := slices.Clone(j.FilterSubjects)
	if len(templates) == 0 && subject != "" {
		templates = []string{subject}
	}
	if j.Partitions == 0 {
		switch {
		case j.Partition != nil:
			return nil, adaptercfg.Errorf("jetstream.partition", "only used with jetstream.partitions")
		case strings.Contains(js.durable, partitionToken):
			return nil, adaptercfg.Errorf("jetstream.durable", "%s only with jetstream.partitions", partitionToken)
		}
		for i, f := range templates {
			if strings.Contains(f, partitionToken) {
				return nil, adaptercfg.Errorf(fmt.Sprintf("jetstream.filter_subjects[%d]", i), "%s only with jetstream.partitions", partitionToken)
			}
		}
		return templates, nil
	}
	if j.Partitions < 0 || j.Partitions > 1024 {
		return nil, adaptercfg.Errorf("jetstream.partitions", "%d must be 1 to 1024", j.Partitions)
	}
	if j.Partition == nil {
		return nil, adaptercfg.Errorf("jetstream.partition", "required with jetstream.partitions: the partition this replica reads, 0 to %d", j.Partitions-1)
	}
	if k := *j.Partition; k < 0 || k >= j.Partitions {
		return nil, adaptercfg.Errorf("jetstream.partition", "%d must be 0 to %d (jetstream.partitions = %d)", k, j.Partitions-1, j.Partitions)
	}
	if !strings.Contains(js.durable, partitionToken) {
		return nil, adaptercfg.Errorf("jetstream.durable", "%q must contain %s: each partition has its own consumer", js.durable, partitionToken)
	}
	if len(templates) == 0 {
		return nil, adaptercfg.Errorf("jetstream.filter_subjects", "required with jetstream.partitions: the stored subject with %s for the partition number, e.g. \"orders.%s.*\"", partitionToken, partitionToken)
	}
	for i, f := range templates {
		if !slices.Contains(strings.Split(f, "."), partitionToken) {
			return nil, adaptercfg.Errorf(fmt.Sprintf("jetstream.filter_subjects[%d]", i), "%q must have %s as one of its tokens (where the stream's transform puts the partition number)", f, partitionToken)
		}
	}
	js.partitions, js.partition = j.Partitions, *j.Partition
	js.durable = fillPartition(js.durable, js.partition)
	return templates, nil
}

// checkPartitionGroupToken refuses a group token that is not a * of the
// partitioned subject: the partition function hashes those, so only a
// group key taken from one of them keeps each group in one partition.
func checkPartitionGroupToken(templates []string, n int) error {
	for _, f := range templates {
		tokens := strings.Split(f, ".")
		if n <= len(tokens) && tokens[n-1] != "*" && !(tokens[len(tokens)-1] == ">" && n >= len(tokens)) {
			return adaptercfg.Errorf("group_from_subject_token", "%d is %q in %q: with partitions the group key must be a * token (the stream's partition function hashes those)", n, tokens[n-1], f)
		}
	}
	return nil
}

// partitionTransform is the subject transform create_stream gives a
// partitioned stream.
type partitionTransform struct {
	source, destination string
}

// newPartitionTransform derives the transform from the one filter subject
// template: the stream takes the template without its {partition} token
// (what publishers send to) and stores each message with the partition of
// a hash of all its * tokens in that place. stream_subjects, when set,
// must be that subject.
func newPartitionTransform(templates, streamSubjects []string, n int) (*partitionTransform, error) {
	if len(templates) != 1 {
		return nil, adaptercfg.Errorf("jetstream.filter_subjects", "create_stream with partitions takes one filter subject (the stored subject with %s), not %d", partitionToken, len(templates))
	}
	tokens := strings.Split(templates[0], ".")
	var src, dst, hashed []string
	for _, tok := range tokens {
		switch tok {
		case partitionToken:
			dst = append(dst, "") // filled below, once the wildcards are counted
		case "*":
			hashed = append(hashed, strconv.Itoa(len(hashed)+1))
			src = append(src, tok)
			dst = append(dst, fmt.Sprintf("{{wildcard(%d)}}", len(hashed)))
		case ">":
			return nil, adaptercfg.Errorf("jetstream.filter_subjects", "%q: partitioning hashes * tokens; '>' cannot be partitioned", templates[0])
		default:
			src = append(src, tok)
			dst = append(dst, tok)
		}
	}
	if len(hashed) == 0 {
		return nil, adaptercfg.Errorf("jetstream.filter_subjects", "%q has no * token to partition on (the token that holds the group key)", templates[0])
	}
	for i, tok := range tokens {
		if tok == partitionToken {
			dst[i] = fmt.Sprintf("{{partition(%d,%s)}}", n, strings.Join(hashed, ","))
		}
	}
	t := &partitionTransform{source: strings.Join(src, "."), destination: strings.Join(dst, ".")}
	if len(streamSubjects) > 0 && !slices.Equal(streamSubjects, []string{t.source}) {
		return nil, adaptercfg.Errorf("jetstream.stream_subjects", "%v: a partitioned stream created by qbridge takes the filter subject without its %s token, %q", streamSubjects, partitionToken, t.source)
	}
	return t, nil
}

// partitionCount finds N in a transform destination's partition(N, ...).
var partitionCount = regexp.MustCompile(`(?i)\{\{\s*partition\s*\(\s*(\d+)`)

// checkPartitions compares the stream's partition transform with
// jetstream.partitions: a different count refuses to start (the groups
// of the missing partitions would never be read, or be read twice); a
// stream without one is only warned about (an account's subject mapping
// may partition before the stream).
func (s *jsSource) checkPartitions(cfg jetstream.StreamConfig) error {
	j := s.set.js
	if j.partitions == 0 {
		return nil
	}
	dest := ""
	if cfg.SubjectTransform != nil {
		dest = cfg.SubjectTransform.Destination
	}
	m := partitionCount.FindStringSubmatch(dest)
	if m == nil {
		s.log.Warn("nats: the stream has no partition() subject transform: qbridge cannot check that it is partitioned (an account subject mapping may do it); if it is not, this partition's consumer reads nothing or everything",
			"stream", j.stream, "partitions", j.partitions, "subject_transform", dest)
		return nil
	}
	if n, _ := strconv.Atoi(m[1]); n != j.partitions {
		return fmt.Errorf("nats: stream %q partitions into %d (subject transform %q), jetstream.partitions says %d", j.stream, n, dest, j.partitions)
	}
	if s.set.groupToken == 0 {
		s.log.Info("nats: partitioned stream: the group key comes from the group header; each group stays in one partition only if its publishers put it in the partitioned subject tokens (or set group_from_subject_token)",
			"stream", j.stream, "partition", j.partition, "partitions", j.partitions)
	}
	s.log.Info("nats jetstream partition", "stream", j.stream, "partition", j.partition, "partitions", j.partitions,
		"durable", j.durable, "filter_subjects", j.filterSubjects)
	return nil
}
