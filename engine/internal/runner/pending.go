package runner

import (
	"context"
	"time"

	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/store"
)

// replanListing decides the next listing of a --trigger run; a full one
// needs the whole processed-file set.
func (r *Runner) replanListing(ctx context.Context, now time.Time) error {
	r.listing.Replan(r.P, now)
	if !r.listing.Full {
		return nil
	}
	if err := r.Seen.Complete(ctx); err != nil {
		return err
	}
	return r.sizes.Complete(ctx)
}

// pendingOf returns the listed files not yet processed, in listing order.
// With source.forget_after, files whose modification time is older than
// the bound are never pending: an unprocessed one is ignored (and
// counted in the log), and a processed one is forgotten by the
// processed-file set, which the next commit records; if it reappears with
// its old modification time it is ignored again, so it is never read
// twice.
func (r *Runner) pendingOf(files []store.ObjectInfo) []store.ObjectInfo {
	if r.listing.IsOrdered() && r.listing.Full && len(files) > 0 {
		r.recordListing = true
	}
	forget := sources.ForgetAfterOf(r.P)
	if forget == nil {
		return sources.PendingFiles(files, r.Seen.Has)
	}
	now := r.Opts.now()
	var out []store.ObjectInfo
	var old []string
	ignored := 0
	for _, f := range files {
		switch {
		case sources.Forgotten(f, forget, now):
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
