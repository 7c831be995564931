package runner

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

// Listing that follows the new input (source.order: lexical).
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

// listing is what a run knows of its source listing.
type listing struct {
	ordered bool      // source.order: lexical
	Full    bool      // the current listing is of the whole source
	After   string    // the current listing started after this key ("" = all)
	fullAt  time.Time // start of the last full listing (zero: none recorded)
	keys    []string  // the current listing's keys, sorted
	// swept: some listing of this run was of the whole source, so the run
	// sweeps the state and the sinks for orphans (runner.start).
	swept bool
	// frontier is the committed one (the head's, then each commit's).
	frontier string
}

// PlanListing decides how the run lists the source: in full or after the
// head's frontier.
func PlanListing(p *spec.Pipeline, opts *Options, head *epoch.Head, restoring bool) *listing {
	l := &listing{ordered: p.Source.Order == spec.OrderLexical}
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
	l.Full = opts.FullList || restoring || l.frontier == "" || l.dueAt(p, opts.now())
	if !l.Full {
		l.After = l.frontier
	}
	return l
}

// dueAt reports whether a full listing is due at now.
func (l *listing) dueAt(p *spec.Pipeline, now time.Time) bool {
	every := p.Source.FullListEvery
	if every <= 0 {
		every = spec.DefaultFullListEvery
	}
	return l.fullAt.IsZero() || now.Sub(l.fullAt) >= every
}

// List lists the source as planned, recording the listing.
func (l *listing) List(ctx context.Context, p *spec.Pipeline, src store.Store, now time.Time) ([]store.ObjectInfo, error) {
	files, err := listSourceAfter(ctx, p, src, l.After)
	if err != nil {
		return nil, err
	}
	l.note(files, now)
	return files, nil
}

// note records a listing made as planned (at now, when it is full).
func (l *listing) note(files []store.ObjectInfo, now time.Time) {
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

// partialLoad says whether a run restoring from may read only part of the
// processed-file set and the size log (the segments that can hold keys
// after the frontier, which are all an ordered listing asks about) and
// none of the output log (read when a sweep needs it): a run that lists
// after the frontier and continues the head.
func (l *listing) partialLoad(from *RestoreSource) (after string, ok bool) {
	if l == nil || !l.ordered || l.Full || l.After == "" || from.Kind != "" || !from.Shared || from.prefix != "" {
		return "", false
	}
	return l.After, true
}

func (l *listing) isOrdered() bool { return l != nil && l.ordered }

// replanListing decides the next listing of a --trigger run; a full one
// needs the whole processed-file set.
func (r *Runner) replanListing(ctx context.Context, now time.Time) error {
	r.listing.replan(r.P, now)
	if !r.listing.Full {
		return nil
	}
	if err := r.Seen.Complete(ctx); err != nil {
		return err
	}
	return r.sizes.Complete(ctx)
}

// replan decides the next listing of a --trigger run.
func (l *listing) replan(p *spec.Pipeline, now time.Time) {
	if !l.ordered {
		return
	}
	l.Full = l.frontier == "" || l.dueAt(p, now)
	l.After = ""
	if !l.Full {
		l.After = l.frontier
	}
}

// next returns the frontier after an epoch that leaves rest pending: the
// greatest listed key before the smallest pending one (or the greatest
// listed key when none is pending).
func (l *listing) next(rest []store.ObjectInfo) string {
	if !l.ordered {
		return ""
	}
	base := l.After // everything the listing skipped is at or before it
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

// record fills the manifest's listing fields.
func (l *listing) record(m *manifest.Manifest, frontier string) {
	if !l.ordered {
		return
	}
	m.Source.ListedAfter = frontier
	if !l.fullAt.IsZero() {
		at := l.fullAt.UTC()
		m.Source.FullListAt = &at
	}
}

// pendingOf returns the listed files not yet processed, in listing order.
// With source.forget_after, files whose modification time is older than
// the bound are never pending: an unprocessed one is ignored (and
// counted in the log), and a processed one is forgotten by the
// processed-file set, which the next commit records; if it reappears with
// its old modification time it is ignored again, so it is never read
// twice.
func (r *Runner) pendingOf(files []store.ObjectInfo) []store.ObjectInfo {
	if r.listing.ordered && r.listing.Full && len(files) > 0 {
		r.recordListing = true
	}
	forget := ForgetAfterOf(r.P)
	if forget == nil {
		return PendingFiles(files, r.Seen.Has)
	}
	now := r.Opts.now()
	var out []store.ObjectInfo
	var old []string
	ignored := 0
	for _, f := range files {
		switch {
		case Forgotten(f, forget, now):
			if r.Seen.Has(f.Key) {
				old = append(old, f.Key)
			} else {
				ignored++
			}
		case !r.Seen.Has(f.Key):
			out = append(out, f)
		}
	}
	if ignored > 0 {
		r.Log.Warn("source.forget_after: files older than the bound ignored without reading them", "files", ignored)
	}
	if n := r.forget(old); n > 0 {
		r.recordListing = true
		r.Log.Info("source.forget_after: processed files older than the bound forgotten", "files", n)
	}
	return out
}

// ForgetAfterOf returns source.forget_after of the source a listed key
// belongs to (in the graph form the named source its first segment
// names), or nil when no source sets one.
func ForgetAfterOf(p *spec.Pipeline) func(key string) time.Duration {
	if !IsGraph(p) {
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

// forget drops keys from the processed-file set and from the size log (the
// next Prepare writes both anew).
func (r *Runner) forget(keys []string) int {
	if len(keys) == 0 {
		return 0
	}
	n := r.Seen.Remove(keys)
	drop := map[string]bool{}
	for _, k := range keys {
		drop[k] = true
	}
	var sizes []string
	for _, e := range r.sizes.Entries() {
		if k, _, ok := splitSize(e); ok && drop[k] {
			sizes = append(sizes, e)
		}
	}
	r.sizes.Remove(sizes)
	for _, k := range keys {
		delete(r.sizeOf, k)
	}
	return n
}
