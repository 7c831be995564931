package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
)

const inlineSeenMax = 512

// NewSeenLog is the processed-file set: up to inlineSeenMax names inline in
// the manifest, then segments; every name read back is checked.
func NewSeenLog() *epoch.SegLog {
	l := epoch.NewSegLog("seen", inlineSeenMax)
	l.Check = manifest.ValidateSourceKey
	return l
}

// newSizeLog records the size of every processed file ("<key>\x00<size>").
func newSizeLog() *epoch.SegLog {
	l := epoch.NewSegLog("sizes", inlineSeenMax)
	l.Check = func(e string) error {
		if _, _, ok := splitSize(e); !ok {
			return fmt.Errorf("size log entry %q is not <key>\\x00<size>: %w", e, manifest.ErrCorrupt)
		}
		return nil
	}
	l.KeyOf = func(e string) string { k, _, _ := strings.Cut(e, "\x00"); return k }
	return l
}

// splitSize parses a size-log entry.
func splitSize(e string) (string, int64, bool) {
	key, num, ok := strings.Cut(e, "\x00")
	if !ok || key == "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return key, n, err == nil && n >= 0
}

func sizeEntry(key string, size int64) string { return key + "\x00" + strconv.FormatInt(size, 10) }

// NewOutputLog is the committed-output log: sink-relative paths, checked
// on read so an edited log can never name a file outside the sink.
func NewOutputLog() *epoch.SegLog {
	l := epoch.NewSegLog("outputs", 0)
	l.Check = func(p string) error { return manifest.ValidateRef(p, false) }
	return l
}

// Restore loads source offsets, counters, watermark and keyed state from the
// plan's head, re-partitioning state by key-group range when the
// parallelism changed. It reads only.
func (r *Runner) Restore(ctx context.Context, rp *RunPlan) error {
	r.Seen = NewSeenLog()
	r.sizes, r.sizeOf = newSizeLog(), map[string]int64{}
	r.outputs = NewOutputLog()
	r.inputs = map[string]manifest.InputState{}
	r.wm = manifest.NoWatermark
	from := rp.From
	after, partial := r.listing.PartialAfter(from.Kind == "" && from.Shared && from.prefix == "")
	r.Seen.Ranged, r.sizes.Ranged = r.listing.IsOrdered(), r.listing.IsOrdered()
	if m := from.Manifest; m != nil && partial {
		// A run listing after the frontier (sources.Listing): the parts of
		// the logs it can need.
		if err := r.Seen.LoadAfter(ctx, from.Store, m.Source.Inline, m.Source.Segments, after); err != nil {
			return err
		}
		if err := r.outputs.LoadLazy(ctx, from.Store, nil, m.OutputLog); err != nil {
			return err
		}
		if err := r.sizes.LoadAfter(ctx, from.Store, m.Source.SizesInline, m.Source.SizeSegments, after); err != nil {
			return err
		}
	} else if m != nil {
		if err := r.Seen.LoadFrom(ctx, from.Store, m.Source.Inline, m.Source.Segments, from.prefix); err != nil {
			return err
		}
		if err := r.outputs.LoadFrom(ctx, from.Store, nil, m.OutputLog, from.prefix); err != nil {
			return err
		}
		if !from.Shared {
			r.Seen.Rebase()
			r.outputs.Rebase()
		}
		if err := r.sizes.LoadFrom(ctx, from.Store, m.Source.SizesInline, m.Source.SizeSegments, from.prefix); err != nil {
			return err
		}
		if !from.Shared {
			r.sizes.Rebase()
		}
	}
	if m := from.Manifest; m != nil {
		for _, e := range r.sizes.Entries() {
			if k, n, ok := splitSize(e); ok {
				r.sizeOf[k] = n
			}
		}
		if n := r.Seen.Remove(from.Forget); n > 0 {
			r.Log.Info("reprocess: these input files will be read again", "files", n)
		}
		for k, v := range m.Source.Inputs {
			r.inputs[k] = v
		}
		r.counters = m.Counters
		r.wm = m.Watermark
	}
	r.ranges = make([][2]int, r.Parallelism)
	for s := range r.ranges {
		lo, hi := keygroup.Range(s, r.Parallelism, r.K)
		r.ranges[s] = [2]int{lo, hi}
	}
	return r.RestoreGraph(ctx, rp)
}
