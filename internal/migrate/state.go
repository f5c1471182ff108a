package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// stateFile keeps copy mode's checkpoints: per job, the position up to which
// every message is written. It is rewritten atomically, so a kill -9 leaves
// either the old or the new file.
type stateFile struct {
	path string
	mu   sync.Mutex
	data stateData
	// sources and filters hold each job's source identity and selection,
	// from check, for save.
	sources, filters map[string]string
	// created holds when each job's source entity was made, from
	// checkCreated (zero: the broker did not say), for save.
	created map[string]time.Time
	dirty   bool   // Scheduled changed since the last write
	release func() // drops the lock on the file (lockState)
}

type stateData struct {
	Version int                   `json:"version"`
	Jobs    map[string]checkpoint `json:"checkpoints"`
}

type checkpoint struct {
	After uint64 `json:"after"`
	// WrittenUpTo is the highest position written when the checkpoint was
	// kept: messages between After and it may be at the sink already, and
	// a resume writes them again (a deduplicating sink keeps one copy; the
	// verification allows for them).
	WrittenUpTo uint64    `json:"written_up_to,omitempty"`
	Updated     time.Time `json:"updated_at"`
	// Source names what the position is in (config.Pipeline.SourceIdentity):
	// a position in one stream or queue means nothing in another. Empty in
	// files written before it was kept.
	Source string `json:"source,omitempty"`
	// Filters are the -since, -until and -where of the copy that kept it
	// (Options.filterText; empty: none): messages before the checkpoint
	// that they skipped were never copied, so another selection may not
	// resume from it.
	Filters string `json:"filters,omitempty"`
	// SourceCreated is when the broker made the source entity
	// (driver.Backlog.Created), where it says: one deleted and made again
	// under the same name numbers its messages from the start again.
	SourceCreated time.Time `json:"source_created,omitzero"`
	// Scheduled are the messages a copy wrote while the broker held them as
	// scheduled: once due, Service Bus enqueues each anew, after the
	// checkpoint, and the next copy writes it again. That copy expects each
	// (the same id and scheduled time) once, and drops it here.
	Scheduled []scheduledCopy `json:"scheduled,omitempty"`
}

// scheduledCopy is a message a copy wrote while it was scheduled.
type scheduledCopy struct {
	ID string    `json:"id"`
	At time.Time `json:"at"` // its scheduled enqueue time
}

func openState(path string) (*stateFile, error) {
	s := &stateFile{path: path, data: stateData{Version: 1, Jobs: map[string]checkpoint{}}, sources: map[string]string{}, filters: map[string]string{}, created: map[string]time.Time{}}
	// Found out before anything is copied: a checkpoint that cannot be
	// saved makes the next run copy everything again.
	if err := CheckStateFile(path); err != nil {
		return nil, err
	}
	release, err := lockState(path)
	if err != nil {
		return nil, err
	}
	s.release = release
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		release()
		return nil, fmt.Errorf("read the state file: %w", err)
	}
	if s.data, err = parseState(path, b); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// parseState reads a state file's content; path names it in errors.
func parseState(path string, b []byte) (stateData, error) {
	var data stateData
	if err := json.Unmarshal(b, &data); err != nil {
		return data, fmt.Errorf("state file %s is not a qbridge migrate state file: %w", path, err)
	}
	// Any JSON object unmarshals: a state file is one with checkpoints (a
	// report, say, has a version too). Read as empty, it would be
	// overwritten, and the copy would start from the beginning.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || keys["checkpoints"] == nil {
		what := "it has no checkpoints"
		if keys["pipelines"] != nil && keys["mode"] != nil {
			what = "it is a migration report (-report)"
		}
		return data, fmt.Errorf("state file %s is not a qbridge migrate state file (%s); give -state a file of its own (a new one is created)", path, what)
	}
	if data.Version != 1 {
		return data, fmt.Errorf("state file %s has version %d; this qbridge reads version 1", path, data.Version)
	}
	if data.Jobs == nil {
		data.Jobs = map[string]checkpoint{}
	}
	return data, nil
}

// CheckStateContent reports an existing file at path that is not a state
// file this qbridge reads (a configuration, a report): found out before
// anything runs, as a usage error, where it failed each pipeline as it
// started ("failed", exit 1) with nothing done. A missing file is fine:
// the copy creates it.
func CheckStateContent(path string) error {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("read the state file: %w", err)
	}
	_, err = parseState(path, b)
	return err
}

// lockState gives one migration at a time a state file: two copies with
// one -state both resumed from its checkpoint and wrote everything twice,
// each saying verified (an audit found 5,550 messages at the sink for
// 3,000). The lock is a file beside it, so that it holds whatever the
// environment of either run; where none can be made the copy goes on
// without it.
func lockState(path string) (release func(), err error) {
	return tryLock(path+".lock", func(holder string) error {
		return fmt.Errorf("another qbridge migrate uses the state file %s (%s): two copies resuming from one checkpoint write the same messages twice; wait for it to end, or give this one a state file of its own", path, holder)
	})
}

// close drops the lock on the file.
func (s *stateFile) close() {
	if s != nil && s.release != nil {
		s.release()
	}
}

func (s *stateFile) after(job string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data.Jobs[job].After
}

// rewritable is how many positions past the checkpoint the last copy may
// have written: a resume writes them again.
func (s *stateFile) rewritable(job string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := s.data.Jobs[job]
	if cp.WrittenUpTo <= cp.After {
		return 0
	}
	return cp.WrittenUpTo - cp.After
}

// check refuses a job's checkpoint that was kept for another source (the
// same pipeline name pointed elsewhere): resuming from it would skip that
// many messages of this one, and report the copy complete. It remembers
// source for save. A checkpoint that names no source (an older file) is
// taken as this source's.
func (s *stateFile) check(job, source, filters string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources[job], s.filters[job] = source, filters
	cp, ok := s.data.Jobs[job]
	if ok && cp.Filters != filters {
		return fmt.Errorf("-state %s: the checkpoint of %q (after position %d) was kept by a copy that selected %s, and this one selects %s: what the other selection skipped before the checkpoint would never be copied; use another -state file for this selection, or remove %q from this one to copy it from the start",
			s.path, job, cp.After, filterWords(cp.Filters), filterWords(filters), job)
	}
	if !ok || cp.Source == "" || source == "" || cp.Source == source {
		return nil
	}
	return fmt.Errorf("-state %s: the checkpoint of %q (after position %d) was kept for source %s, but the pipeline now reads %s; a position in one source means nothing in another: use another -state file for this source, or remove %q from this one to copy it from the start",
		s.path, job, cp.After, cp.Source, source, job)
}

// checkCreated compares when the source entity was made (zero: its broker
// does not say) with when it had been made when job's checkpoint was kept.
// A position in the entity as it was means nothing in one made since: the
// resume would skip the new entity's first messages and say complete.
func (s *stateFile) checkCreated(job string, created time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp, ok := s.data.Jobs[job]
	if !created.IsZero() {
		s.created[job] = created
	}
	if !ok || cp.SourceCreated.IsZero() || created.IsZero() || cp.SourceCreated.Equal(created) {
		return nil
	}
	return fmt.Errorf("-state %s: the checkpoint of %q (after position %d) was kept for the source as its broker made it at %s, and it was deleted and made again at %s: positions begin anew in the new one, and resuming would skip its first %d messages; remove %q from this file, or use another -state file, to copy it from its start",
		s.path, job, cp.After, cp.SourceCreated.UTC().Format(time.RFC3339Nano), created.UTC().Format(time.RFC3339Nano), cp.After, job)
}

func filterWords(f string) string {
	if f == "" {
		return "every message"
	}
	return "only " + f
}

// save records a checkpoint and the highest position that may be written;
// it never moves either back.
func (s *stateFile) save(job string, after, writtenUpTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.data.Jobs[job]
	if after <= old.After && writtenUpTo <= old.WrittenUpTo && !s.dirty {
		return nil
	}
	return s.writeLocked(job, max(after, old.After), max(writtenUpTo, old.WrittenUpTo))
}

// settle records the checkpoint and the highest position written at the
// end of a copy that left nothing pending: that position is known, so it
// replaces the lease that ran ahead (which only grows in save).
func (s *stateFile) settle(job string, after, writtenUpTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.data.Jobs[job]
	return s.writeLocked(job, max(after, old.After), max(writtenUpTo, after, old.After))
}

// scheduled is the job's Scheduled, by id.
func (s *stateFile) scheduled(job string) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for _, c := range s.data.Jobs[job].Scheduled {
		out[c.ID] = c.At
	}
	return out
}

// setScheduled replaces the job's Scheduled; a change is written by the
// next save even where the positions stand still.
func (s *stateFile) setScheduled(job string, copies []scheduledCopy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := s.data.Jobs[job]
	if slices.EqualFunc(cp.Scheduled, copies, func(a, b scheduledCopy) bool { return a.ID == b.ID && a.At.Equal(b.At) }) {
		return
	}
	cp.Scheduled = copies
	s.data.Jobs[job] = cp
	s.dirty = true
}

func (s *stateFile) writeLocked(job string, after, writtenUpTo uint64) error {
	created := s.created[job]
	if created.IsZero() { // not counted this run: what was known stands
		created = s.data.Jobs[job].SourceCreated
	}
	s.data.Jobs[job] = checkpoint{After: after, WrittenUpTo: writtenUpTo,
		Updated: time.Now().UTC(), Source: s.sources[job], Filters: s.filters[job],
		SourceCreated: created, Scheduled: s.data.Jobs[job].Scheduled}
	b, err := json.MarshalIndent(s.data, "", "  ")
	if err != nil {
		return err
	}
	target, _, err := ResolveLinks(s.path) // a link to the state file stays one
	if err != nil {
		return err
	}
	if err := writeAtomic(target, append(b, '\n')); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

// CheckStateFile reports whether path can hold the checkpoints: a regular
// file (a pipe or a device would be replaced by the atomic write, as
// -report /dev/stdout once was) that can be written.
func CheckStateFile(path string) error {
	if path == "-" {
		return errors.New("state file: - is not a file (the checkpoints are read back by the next run)")
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return fmt.Errorf("state file: %s is not a regular file", path)
	}
	if _, stream, err := ResolveLinks(path); err != nil {
		return fmt.Errorf("state file: %w", err)
	} else if stream {
		return fmt.Errorf("state file: %s is a file descriptor, not a file of its own", path)
	}
	if err := CheckWritable(path); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// CheckWritable reports whether a file can be written at path the way the
// state file and the report are (a temporary file in its directory,
// renamed over it); a pipe or a device is written in place.
func CheckWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	} else if err == nil && !fi.Mode().IsRegular() {
		return nil
	}
	target, stream, err := ResolveLinks(path)
	switch {
	case err != nil:
		return err
	case stream:
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".check.*")
	if err != nil {
		// Name the file asked for, not the probe's temporary name.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// CheckReportTarget refuses a -report path that names an existing file
// other than a migration report: the report replaces it whole, and an
// audit replaced the configuration being run (-report x.hcl x.hcl) and
// another pipeline's -state file that way. An empty file, a report of an
// earlier run, a path not there yet and a device or pipe are fine.
func CheckReportTarget(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil
	}
	const most = 64 << 20
	if fi.Size() > most {
		return fmt.Errorf("%s exists and is not a migration report (%d bytes): the report would replace it; name a new file or remove it", path, fi.Size())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read %s, which the report would replace: %w", path, err)
	}
	var head struct {
		Mode    *Mode           `json:"mode"`
		Outcome *Outcome        `json:"outcome"`
		Jobs    json.RawMessage `json:"pipelines"`
	}
	if json.Unmarshal(raw, &head) != nil || head.Mode == nil || head.Outcome == nil {
		return fmt.Errorf("%s exists and is not a migration report (a configuration, a -state file?): the report would replace it; name a new file or remove it", path)
	}
	return nil
}
