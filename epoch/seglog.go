package epoch

import (
	"context"
	"fmt"
	"slices"
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
	// Ranged: the segments Prepare writes record their least and greatest
	// entry (FileRef.First, Last), so LoadAfter can skip them.
	Ranged bool
	// KeyOf, when set, maps an entry to the key LoadAfter compares (the
	// size log's "<key>\x00<size>"); it must keep the entries' order.
	KeyOf func(string) string
	// skipped are the segments LoadAfter or LoadLazy did not read, by path
	// (still referenced, their entries not in memory); src is the store
	// they resolve in, for Complete.
	skipped map[string]manifest.FileRef
	src     store.Store
	// mustComplete: Rebase (also Remove's) of a partial log needs every
	// entry in memory; the next Prepare reads the skipped segments, then
	// rebases.
	mustComplete bool
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
		if err := l.readSegment(ctx, s, ref); err != nil {
			return err
		}
	}
	l.segs = make([]manifest.FileRef, len(segs))
	for i, r := range segs {
		r.Path = prefix + r.Path
		l.segs[i] = r
	}
	return nil
}

// LoadAfter reads a committed log like LoadFrom (segments resolving in s
// at their recorded paths) but skips every segment whose recorded range
// ends at or before after (compared by KeyOf): such a segment holds no
// entry greater than after. Segments without a range (written before
// ranges, or not Ranged) are read. Has is then exact for entries greater than after only (the
// caller asks about nothing else: a listing after its frontier); Len
// counts the skipped segments' rows. after "" reads everything.
func (l *SegLog) LoadAfter(ctx context.Context, s store.Store, inline []string, segs []manifest.FileRef, after string) error {
	return l.loadSkipping(ctx, s, inline, segs, func(r manifest.FileRef) bool {
		last := r.Last
		if l.KeyOf != nil {
			last = l.KeyOf(last)
		}
		return after != "" && r.Last != "" && last <= after
	})
}

// LoadLazy records a committed log's segments without reading them: Has
// answers nothing until Complete (Prepare still appends; the output log
// of a run that does not clean its sinks needs no more).
func (l *SegLog) LoadLazy(ctx context.Context, s store.Store, inline []string, segs []manifest.FileRef) error {
	return l.loadSkipping(ctx, s, inline, segs, func(manifest.FileRef) bool { return true })
}

func (l *SegLog) loadSkipping(ctx context.Context, s store.Store, inline []string, segs []manifest.FileRef, skip func(manifest.FileRef) bool) error {
	var read []manifest.FileRef
	l.skipped, l.src = map[string]manifest.FileRef{}, s
	for _, r := range segs {
		if skip(r) {
			l.skipped[r.Path] = r
		} else {
			read = append(read, r)
		}
	}
	if err := l.LoadFrom(ctx, s, inline, read, ""); err != nil {
		return err
	}
	l.segs = append([]manifest.FileRef(nil), segs...)
	return nil
}

// Partial reports whether some committed entries are not in memory
// (LoadAfter, LoadLazy): Has is exact only for what the load promised.
func (l *SegLog) Partial() bool { return len(l.skipped) > 0 }

// Complete reads the segments LoadAfter or LoadLazy skipped, so that Has
// and Entries cover the whole log.
func (l *SegLog) Complete(ctx context.Context) error {
	for _, r := range l.segs {
		if _, ok := l.skipped[r.Path]; !ok {
			continue
		}
		if err := l.readSegment(ctx, l.src, r); err != nil {
			return err
		}
		delete(l.skipped, r.Path)
	}
	l.skipped = nil
	return nil
}

// readSegment reads one verified segment into the log.
func (l *SegLog) readSegment(ctx context.Context, s store.Store, ref manifest.FileRef) error {
	lines, err := l.segmentLines(ctx, s, ref)
	if err != nil {
		return err
	}
	for _, line := range lines {
		l.add(line)
	}
	return nil
}

// segmentLines reads and checks one segment's entries: every entry valid
// (Check) and, for a segment with a range, within it (a range that lied
// would hide a processed file from a run that skips the segment).
func (l *SegLog) segmentLines(ctx context.Context, s store.Store, ref manifest.FileRef) ([]string, error) {
	data, err := readVerified(ctx, s, ref)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", l.name, err)
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != "" {
		return nil, fmt.Errorf("%s log: segment %s does not end with a newline: %w", l.name, ref.Path, manifest.ErrCorrupt)
	}
	lines = lines[:len(lines)-1]
	for i, line := range lines {
		if l.Check != nil {
			if err := l.Check(line); err != nil {
				return nil, fmt.Errorf("%s log: segment %s line %d: %w", l.name, ref.Path, i+1, err)
			}
		}
		if ref.Last != "" && (line < ref.First || line > ref.Last) {
			return nil, fmt.Errorf("%s log: segment %s line %d is outside the segment's recorded range [%q, %q]: %w",
				l.name, ref.Path, i+1, ref.First, ref.Last, manifest.ErrCorrupt)
		}
	}
	return lines, nil
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
	if l.Partial() {
		l.mustComplete = true // Prepare reads the skipped segments, then rebases
		return
	}
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

// Len returns the number of entries (with the rows of skipped segments).
func (l *SegLog) Len() int {
	n := len(l.entries)
	for _, r := range l.skipped {
		n += int(r.Rows)
	}
	return n
}

// Entries returns the entries in memory (of a partial log, those it read)
// in the order they were added. The caller must not modify the slice.
func (l *SegLog) Entries() []string { return l.entries }

// Prepare computes the log after adding add (entries already present are
// skipped) and writes, through att, the segment the manifest will reference:
// this epoch's new entries, or every entry when the log leaves the inline
// form or passes MaxSegments (compaction). The log itself is not changed.
//
// A partial log (LoadAfter, LoadLazy) appends the same way; what would
// rewrite every entry reads the skipped segments first (Remove, Rebase,
// the inline form), except compaction, which merges only the newest
// segments (mergeTail). The caller adds only entries the partial load
// covers (greater than its after).
func (l *SegLog) Prepare(ctx context.Context, att *Attempt, add []string) (SegEdit, error) {
	var e SegEdit
	fresh := map[string]bool{}
	for _, x := range add {
		if !l.set[x] && !fresh[x] {
			fresh[x] = true
			e.Added = append(e.Added, x)
		}
	}
	if l.Partial() && (l.mustComplete || l.inlined || l.Len()+len(e.Added) <= l.inline) {
		if err := l.Complete(ctx); err != nil {
			return SegEdit{}, err
		}
	}
	if l.mustComplete {
		l.segs, l.inlined, l.mustComplete = nil, true, false // the Rebase deferred until now
	}
	total := l.Len() + len(e.Added)
	if l.Partial() && len(l.segs) >= MaxSegments {
		return l.mergeTail(ctx, att, e, total)
	}
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
	ref, err := l.writeSegment(ctx, att, data, total)
	if err != nil {
		return SegEdit{}, err
	}
	e.Segments = append(append([]manifest.FileRef(nil), segs...), ref)
	return e, nil
}

// writeSegment writes one segment of data (its range recorded when Ranged).
func (l *SegLog) writeSegment(ctx context.Context, att *Attempt, data []string, total int) (manifest.FileRef, error) {
	body := strings.Join(data, "\n") + "\n"
	ref, err := att.WriteSource(ctx, fmt.Sprintf("%s-%d.txt", l.name, total), []byte(body), int64(len(data)))
	if err != nil {
		return manifest.FileRef{}, err
	}
	if l.Ranged && len(data) > 0 {
		ref.First, ref.Last = slices.Min(data), slices.Max(data)
	}
	return ref, nil
}

// mergeTail is the compaction of a partial log: the newest segments are
// merged with the epoch's entries into one, taking an older segment in
// while it holds at most twice the rows taken so far (and while the
// manifest would still carry MaxSegments or more). Segment sizes so grow
// geometrically towards the oldest, every entry is rewritten about log2(n)
// times over the log's life, and the old large segments are not read by
// a run that does not need them.
func (l *SegLog) mergeTail(ctx context.Context, att *Attempt, e SegEdit, total int) (SegEdit, error) {
	acc := int64(len(e.Added))
	i := len(l.segs)
	for i > 0 && (i == len(l.segs) || l.segs[i-1].Rows <= 2*acc || i+1 > MaxSegments/2) {
		acc += l.segs[i-1].Rows
		i--
	}
	var data []string
	dup := map[string]bool{}
	for _, r := range l.segs[i:] {
		lines, err := l.segmentLines(ctx, l.src, r)
		if err != nil {
			return SegEdit{}, err
		}
		if _, ok := l.skipped[r.Path]; ok {
			// Committed entries, now read: in memory from here on (Len
			// stays exact once the merged segment replaces this one).
			for _, x := range lines {
				l.add(x)
			}
			delete(l.skipped, r.Path)
		}
		for _, x := range lines {
			if !dup[x] {
				dup[x] = true
				data = append(data, x)
			}
		}
	}
	for _, x := range e.Added {
		if !dup[x] {
			data = append(data, x)
		}
	}
	ref, err := l.writeSegment(ctx, att, data, total)
	if err != nil {
		return SegEdit{}, err
	}
	e.Segments = append(append([]manifest.FileRef(nil), l.segs[:i]...), ref)
	return e, nil
}

// Apply folds a committed edit into the log.
func (l *SegLog) Apply(e SegEdit) {
	for _, x := range e.Added {
		l.add(x)
	}
	l.segs = append([]manifest.FileRef(nil), e.Segments...)
	l.inlined = e.inlined
	if l.Partial() {
		still := map[string]manifest.FileRef{}
		for _, r := range l.segs {
			if sk, ok := l.skipped[r.Path]; ok {
				still[r.Path] = sk
			}
		}
		l.skipped = still
	}
}
