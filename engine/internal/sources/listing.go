package sources

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// listing that follows the new input (source.order: lexical).
//
// A source whose new keys sort after the ones processed (time-stamped
// names, day=YYYY-MM-DD/ folders) is listed from a frontier: the greatest
// key such that every key a listing found at or before it was processed
// (or ignored by source.forget_after). The frontier is recorded in every
// manifest (SourceState.ListedAfter), so a run lists only what sorts after
// it (S3: ListObjectsV2 StartAfter, about one request per 1,000 new keys;
// file://: a sorted walk that skips the directories before it) and asks
// the processed-file set only about those keys.
//
// The frontier is the predecessor of the smallest key still pending, not
// the greatest key processed: a run that stops after some epochs
// (max_files_per_epoch, a crash, --until-epoch) leaves pending keys behind
// it that the next ordered listing must still find.
//
// A key that lands late and sorts at or before the frontier is not seen by
// ordered listings. It is found by the next full listing, which a run does
// when the last one recorded in the head (SourceState.FullListAt) is
// source.full_list_every old or more, when the run restores (a savepoint,
// rollback, reset, reprocess), with Options.FullList (floe run
// --full-list), and whenever the head records no frontier. The bound for a
// late key is therefore: read by the first run that starts full_list_every
// after the last full listing (or sooner, by one of the others). Like every
// file, it is read exactly once: the processed-file set is complete, and a
// full listing checks every key against it.

// Listing is what a run knows of its source listing.
type Listing struct {
	ordered bool      // source.order: lexical
	Full    bool      // the current Listing is of the whole source
	After   string    // the current Listing started after this key ("" = all)
	fullAt  time.Time // start of the last full Listing (zero: none recorded)
	keys    []string  // the current Listing's keys, sorted
	// swept: some listing of this run was of the whole source, so the run
	// sweeps the state and the sinks for orphans (runner.start).
	swept bool
	// frontier is the committed one (the head's, then each commit's).
	frontier string
}

// PlanListing decides how the run lists the source at now: in full
// (fullList: floe run --full-list; restoring: the run restores) or after
// the head's frontier.
func PlanListing(p *spec.Pipeline, fullList bool, now time.Time, head *epoch.Head, restoring bool) *Listing {
	l := &Listing{ordered: p.Source.Order == spec.OrderLexical}
	if !l.ordered {
		l.Full = true
		return l
	}
	var m *manifest.Manifest
	if head != nil {
		m = head.Manifest
	}
	if m != nil {
		l.frontier = m.Source.ListedAfter
		if m.Source.FullListAt != nil {
			l.fullAt = *m.Source.FullListAt
		}
	}
	l.Full = fullList || restoring || l.frontier == "" || l.dueAt(p, now)
	if !l.Full {
		l.After = l.frontier
	}
	return l
}

// dueAt reports whether a full listing is due at now.
func (l *Listing) dueAt(p *spec.Pipeline, now time.Time) bool {
	every := p.Source.FullListEvery
	if every <= 0 {
		every = spec.DefaultFullListEvery
	}
	return l.fullAt.IsZero() || now.Sub(l.fullAt) >= every
}

// List lists the source as planned, recording the listing.
func (l *Listing) List(ctx context.Context, p *spec.Pipeline, src store.Store, now time.Time) ([]store.ObjectInfo, error) {
	files, err := ListAfter(ctx, p, src, l.After)
	if err != nil {
		return nil, err
	}
	l.note(files, now)
	return files, nil
}

// note records a listing made as planned (at now, when it is full).
func (l *Listing) note(files []store.ObjectInfo, now time.Time) {
	l.keys = l.keys[:0]
	for _, f := range files {
		l.keys = append(l.keys, f.Key)
	}
	if !sort.StringsAreSorted(l.keys) {
		sort.Strings(l.keys)
	}
	if l.ordered && l.Full {
		l.fullAt = now
	}
	l.swept = l.swept || l.Full
}

// PartialAfter says whether a run may read only part of the processed-file
// set and the size log (the segments that can hold keys after the
// frontier, which are all an ordered listing asks about) and none of the
// output log (read when a sweep needs it): a run that lists after the
// frontier and continues the head (continues).
func (l *Listing) PartialAfter(continues bool) (after string, ok bool) {
	if l == nil || !l.ordered || l.Full || l.After == "" || !continues {
		return "", false
	}
	return l.After, true
}

// IsOrdered reports whether the source is listed in key order
// (source.order: lexical).
func (l *Listing) IsOrdered() bool { return l != nil && l.ordered }

// Swept reports whether some listing of this run was of the whole source.
func (l *Listing) Swept() bool { return l.swept }

// SetFrontier records the committed frontier.
func (l *Listing) SetFrontier(f string) { l.frontier = f }

// Replan decides the next listing of a --trigger run.
func (l *Listing) Replan(p *spec.Pipeline, now time.Time) {
	if !l.ordered {
		return
	}
	l.Full = l.frontier == "" || l.dueAt(p, now)
	l.After = ""
	if !l.Full {
		l.After = l.frontier
	}
}

// Next returns the frontier after an epoch that leaves rest pending: the
// greatest listed key before the smallest pending one (or the greatest
// listed key when none is pending).
func (l *Listing) Next(rest []store.ObjectInfo) string {
	if !l.ordered {
		return ""
	}
	base := l.After // everything the Listing skipped is at or before it
	if l.Full {
		base = ""
	}
	i := len(l.keys)
	if len(rest) > 0 {
		least := rest[0].Key
		for _, f := range rest[1:] {
			least = min(least, f.Key)
		}
		i = sort.SearchStrings(l.keys, least)
	}
	switch {
	case i > 0:
		return max(base, l.keys[i-1])
	case len(l.keys) == 0 && len(rest) == 0:
		return l.frontier // nothing listed: nothing learned
	}
	return base
}

// Record fills the manifest's listing fields.
func (l *Listing) Record(m *manifest.Manifest, frontier string) {
	if !l.ordered {
		return
	}
	m.Source.ListedAfter = frontier
	if !l.fullAt.IsZero() {
		at := l.fullAt.UTC()
		m.Source.FullListAt = &at
	}
}

// ForgetAfterOf returns source.forget_after of the source a listed key
// belongs to (in the graph form the named source its first segment
// names), or nil when no source sets one.
func ForgetAfterOf(p *spec.Pipeline) func(key string) time.Duration {
	if len(p.Sources) == 0 {
		if d := p.Source.ForgetAfter; d > 0 {
			return func(string) time.Duration { return d }
		}
		return nil
	}
	by := map[string]time.Duration{}
	for _, ns := range p.Sources {
		if ns.Source.ForgetAfter > 0 {
			by[ns.Name] = ns.Source.ForgetAfter
		}
	}
	if len(by) == 0 {
		return nil
	}
	return func(key string) time.Duration {
		name, _, _ := strings.Cut(key, "/")
		return by[name]
	}
}

// Forgotten reports whether f is older than its source's forget_after.
func Forgotten(f store.ObjectInfo, forget func(string) time.Duration, now time.Time) bool {
	d := forget(f.Key)
	return d > 0 && !f.ModTime.IsZero() && f.ModTime.Before(now.Add(-d))
}
