package epoch

import (
	"context"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// MaxSegments bounds the segment references one manifest carries for one
// log; past it the log is compacted into one segment, so a manifest stays
// small however many files a pipeline has processed.
const MaxSegments = 32

// SegLog is an append-only set of strings (processed source files, committed
// output paths) persisted as attempt-tagged segment files that later
// manifests share by root-relative reference (invariant 4). Retention keeps
// a segment while any retained manifest references it, so sharing is safe:
// a segment is never rewritten, and a compaction writes a new one.
//
// A SegLog changes in two steps so that nothing in memory moves before a
// commit: Prepare writes the epoch's segment (an attempt-tagged file, an
// orphan if the epoch never commits) and returns a SegEdit; Apply folds the
// edit in after the commit succeeded.
type SegLog struct {
	// Check, when set, validates every entry Load reads; an invalid one is
	// corruption naming the segment.
	Check   func(string) error
	name    string
	inline  int // keep up to this many entries inline in the manifest
	entries []string
	set     map[string]bool
	segs    []manifest.FileRef
	inlined bool // entries live inline in the manifest, not in segs
}

// SegEdit is one epoch's change to a SegLog, and what its manifest records.
type SegEdit struct {
	// Added are the new entries, in order, without duplicates.
	Added []string
	// Inline or Segments is what the manifest records.
	Inline   []string
	Segments []manifest.FileRef
	inlined  bool
}

// NewSegLog returns an empty log; up to inline entries are kept inline in
// the manifest, more spill to segment files named name-<count>.txt.
func NewSegLog(name string, inline int) *SegLog {
	return &SegLog{name: name, inline: inline, set: map[string]bool{}}
}

// Load reads a committed log: inline entries and verified segments.
func (l *SegLog) Load(ctx context.Context, c *Committer, inline []string, segs []manifest.FileRef) error {
	return l.LoadFrom(ctx, c.Store, inline, segs, "")
}

// LoadFrom reads a committed log whose segments resolve in s (a savepoint
// folder, say), recording them with prefix prepended (the path that
// resolves them in the state root; see Rebase when there is none).
func (l *SegLog) LoadFrom(ctx context.Context, s store.Store, inline []string, segs []manifest.FileRef, prefix string) error {
	for i, s := range inline {
		if l.Check != nil {
			if err := l.Check(s); err != nil {
				return fmt.Errorf("%s log: inline entry %d: %w", l.name, i, err)
			}
		}
		l.add(s)
	}
	l.inlined = len(inline) > 0
	for _, ref := range segs {
		data, err := readVerified(ctx, s, ref)
		if err != nil {
			return fmt.Errorf("%s log: %w", l.name, err)
		}
		lines := strings.Split(string(data), "\n")
		if len(lines) == 0 || lines[len(lines)-1] != "" {
			return fmt.Errorf("%s log: segment %s does not end with a newline: %w", l.name, ref.Path, manifest.ErrCorrupt)
		}
		for i, line := range lines[:len(lines)-1] {
			if l.Check != nil {
				if err := l.Check(line); err != nil {
					return fmt.Errorf("%s log: segment %s line %d: %w", l.name, ref.Path, i+1, err)
				}
			}
			l.add(line)
		}
	}
	l.segs = make([]manifest.FileRef, len(segs))
	for i, r := range segs {
		r.Path = prefix + r.Path
		l.segs[i] = r
	}
	return nil
}

// Remove drops entries (for input files to be read again) and rebases the
// log, so the next Prepare writes the rest anew.
func (l *SegLog) Remove(drop []string) int {
	gone := map[string]bool{}
	for _, x := range drop {
		if l.set[x] {
			gone[x] = true
			delete(l.set, x)
		}
	}
	if len(gone) == 0 {
		return 0
	}
	kept := l.entries[:0]
	for _, x := range l.entries {
		if !gone[x] {
			kept = append(kept, x)
		}
	}
	l.entries = kept
	l.Rebase()
	return len(gone)
}

// Rebase makes the next Prepare write every entry anew (inline or one
// segment): for a log loaded from a place the state root cannot reference.
func (l *SegLog) Rebase() {
	l.segs, l.inlined = nil, true
}

func (l *SegLog) add(s string) {
	if !l.set[s] {
		l.set[s] = true
		l.entries = append(l.entries, s)
	}
}

// Has reports whether s is in the log.
func (l *SegLog) Has(s string) bool { return l.set[s] }

// Len returns the number of entries.
func (l *SegLog) Len() int { return len(l.entries) }

// Entries returns the entries in the order they were added. The caller must
// not modify the slice.
func (l *SegLog) Entries() []string { return l.entries }

// Prepare computes the log after adding add (entries already present are
// skipped) and writes, through att, the segment the manifest will reference:
// this epoch's new entries, or every entry when the log leaves the inline
// form or passes MaxSegments (compaction). The log itself is not changed.
func (l *SegLog) Prepare(ctx context.Context, att *Attempt, add []string) (SegEdit, error) {
	var e SegEdit
	fresh := map[string]bool{}
	for _, x := range add {
		if !l.set[x] && !fresh[x] {
			fresh[x] = true
			e.Added = append(e.Added, x)
		}
	}
	total := len(l.entries) + len(e.Added)
	if total <= l.inline {
		e.Inline = make([]string, 0, total)
		e.Inline = append(append(e.Inline, l.entries...), e.Added...)
		e.inlined = true
		return e, nil
	}
	var data []string
	var segs []manifest.FileRef
	switch {
	case l.inlined || len(l.segs) >= MaxSegments:
		data = append(append([]string(nil), l.entries...), e.Added...) // move inline entries out, or compact
	case len(e.Added) > 0:
		data, segs = e.Added, l.segs
	default:
		e.Segments = append([]manifest.FileRef(nil), l.segs...)
		return e, nil
	}
	body := strings.Join(data, "\n") + "\n"
	ref, err := att.WriteSource(ctx, fmt.Sprintf("%s-%d.txt", l.name, total), []byte(body), int64(len(data)))
	if err != nil {
		return SegEdit{}, err
	}
	e.Segments = append(append([]manifest.FileRef(nil), segs...), ref)
	return e, nil
}

// Apply folds a committed edit into the log.
func (l *SegLog) Apply(e SegEdit) {
	for _, x := range e.Added {
		l.add(x)
	}
	l.segs = append([]manifest.FileRef(nil), e.Segments...)
	l.inlined = e.inlined
}
