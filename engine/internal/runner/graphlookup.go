package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Lookup stages.
//
// A lookup stage enriches its input from a table: the files under its url
// (pattern, hidden files skipped as for sources), read whole at the start of
// an epoch whenever the listing changed (a file added, removed, or with
// another size or modification time) and kept in memory otherwise. The
// version used, a digest of that listing, is in the run's log at every
// reload.

// OpenLookupStore opens a lookup table's store (read only).
func OpenLookupStore(ctx context.Context, opts *Options, stage, url string) (store.Store, error) {
	s, err := store.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("stage %s: lookup.url: %w", stage, err)
	}
	if opts != nil && opts.WrapStore != nil {
		s = opts.WrapStore("lookup", s)
	}
	policy := store.RetryPolicy{}
	if opts != nil {
		policy = opts.Retry
		if policy.Log == nil {
			policy.Log = opts.log().With("store", "lookup")
		}
	}
	return store.WithRetry(s, policy), nil
}

// ListLookup lists a lookup table's files in key order.
func ListLookup(ctx context.Context, s store.Store, l *spec.Lookup) ([]store.ObjectInfo, error) {
	objs, err := s.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list lookup table %s: %w", store.Redact(l.URL), err)
	}
	var out []store.ObjectInfo
	for _, o := range objs {
		base := path.Base(o.Key)
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue
		}
		if l.Pattern != "" {
			ok, err := path.Match(l.Pattern, o.Key)
			if err != nil {
				return nil, fmt.Errorf("lookup.pattern %q: %w", l.Pattern, err)
			}
			if ok2, _ := path.Match(l.Pattern, base); !ok && !ok2 {
				continue
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// TableVersion digests a table's listing.
func TableVersion(files []store.ObjectInfo) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\t%d\t%d\n", f.Key, f.Size, f.ModTime.UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// RefreshLookups reloads every lookup stage's table whose listing changed.
func (r *Runner) RefreshLookups(ctx context.Context) error {
	for _, nd := range r.Plan.Graph.Lookups {
		if err := r.refreshLookup(ctx, nd); err != nil {
			return fmt.Errorf("stage %s: %w", nd.Name, err)
		}
	}
	return nil
}

func (r *Runner) refreshLookup(ctx context.Context, nd *dataflow.Node) error {
	lk := nd.Lookup
	s, err := OpenLookupStore(ctx, r.Opts, nd.Name, lk.Cfg.URL)
	if err != nil {
		return err
	}
	defer s.Close()
	files, err := ListLookup(ctx, s, lk.Cfg)
	if err != nil {
		return err
	}
	v := TableVersion(files)
	if lk.Op != nil && v == lk.Version {
		return nil
	}
	var batches []arrow.RecordBatch
	defer func() { ReleaseBatches(batches) }()
	var rows int64
	for _, f := range files {
		data, err := store.Read(ctx, s, f.Key)
		if err != nil {
			return fmt.Errorf("lookup table file %s: %w", f.Key, err)
		}
		opts := formats.DecodeOptions{Schema: lk.Table, Mem: r.Mem}
		if c := lk.Cfg.CSV; c != nil {
			opts.CSV.NoHeader = !c.Header
			if c.Delimiter != "" {
				opts.CSV.Delimiter = []rune(c.Delimiter)[0]
			}
		}
		d, err := formats.Decode(string(lk.Cfg.Format), f.Key, data, opts)
		if err != nil {
			return fmt.Errorf("lookup table file %s: %w", f.Key, err)
		}
		if len(d.Rejects) > 0 {
			ReleaseBatches(d.Batches)
			rj := d.Rejects[0]
			return fmt.Errorf("lookup table file %s line %d: %s (%d rows rejected; a table must decode cleanly)", f.Key, rj.Line, rj.Reason, len(d.Rejects))
		}
		batches = append(batches, d.Batches...)
		rows += d.Rows
	}
	if len(batches) == 0 {
		empty := emptyBatch(lk.Table)
		batches = append(batches, empty)
	}
	op, err := operators.NewLookup(lk.Spec, nd.Ins[0].Out, batches)
	if err != nil {
		return err
	}
	lk.Op, lk.Version, lk.Files, lk.Rows = op, v, len(files), rows
	r.Log.Info("lookup table loaded", "stage", nd.Name, "files", len(files), "rows", rows, "version", v)
	return nil
}

func emptyBatch(s *arrow.Schema) arrow.RecordBatch {
	return dataflow.ArrowNewRecord(s)
}
