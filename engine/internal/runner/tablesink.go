package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/iceberg"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// An Iceberg sink: outputs are written as usual (attempt-tagged Parquet
// files, listed in the manifest) under <table>/data/, and every committed
// epoch is then published to the table, in order, in one Iceberg commit
// that also records the epoch in the table property floe.<pipeline id>.epoch
// (see package iceberg). Publishing follows floe's own commit, so a crash
// between the two leaves an epoch committed but not published; the next
// run publishes it before anything else. Retention keeps the manifests of
// unpublished epochs.

// tableSink is an open Iceberg table and how far it is published.
type tableSink struct {
	t          *iceberg.Table
	pipelineID string
	published  int64
	partCol    int    // index in the output schema of the partition source column, -1 for none
	transform  string // its partition transform: identity, hour, day, month, year
}

// openTable opens the Iceberg table of an iceberg sink and publishes every
// committed epoch it lacks.
func (r *Runner) openTable(ctx context.Context) error {
	if r.P.RootSink().Type != spec.SinkIceberg {
		return nil
	}
	pb, col, tr, err := sinks.IcebergPartition(r.P, r.Plan.Output)
	if err != nil {
		return err
	}
	t, err := sinks.OpenIceberg(ctx, r.P, r.St.Sink, pb, r.Plan.Output, r.Log)
	if err != nil {
		return err
	}
	id := r.P.Name
	if ident := r.writeIdentity(); ident != nil {
		id = ident.ID
	}
	ts := &tableSink{t: t, pipelineID: id, partCol: col, transform: tr}
	if ts.published, err = t.PublishedEpoch(ctx, id); err != nil {
		return fmt.Errorf("iceberg sink: %w", err)
	}
	r.table = ts
	return r.publish(ctx)
}

// reidentify follows the identity of the generation the run started (it may
// have adopted one a crashed run left, with another id than the plan's):
// the table's published epoch is recorded under the id.
func (ts *tableSink) reidentify(ctx context.Context, id *manifest.Identity) error {
	if ts == nil || id == nil || id.ID == ts.pipelineID {
		return nil
	}
	published, err := ts.t.PublishedEpoch(ctx, id.ID)
	if err != nil {
		return fmt.Errorf("iceberg sink: %w", err)
	}
	ts.pipelineID, ts.published = id.ID, published
	return nil
}

// publish adds every committed epoch after the table's published one, up to
// the head, in order.
func (r *Runner) publish(ctx context.Context) error {
	ts := r.table
	if ts == nil || r.head.Epoch() <= ts.published {
		return nil
	}
	chain, err := r.C.Chain(ctx, r.head, int(r.head.Epoch()-ts.published))
	if err != nil {
		return err
	}
	var todo []*manifest.Manifest
	for _, m := range chain {
		if m.Epoch > ts.published {
			todo = append(todo, m)
		}
	}
	if n := len(todo); n == 0 || todo[n-1].Parent != nil && todo[n-1].Parent.Epoch > ts.published {
		return fmt.Errorf("iceberg sink: epochs after %d are committed but not published, and their manifests are gone", ts.published)
	}
	for i := len(todo) - 1; i >= 0; i-- {
		m := todo[i]
		files := make([]iceberg.DataFile, 0, len(m.Outputs))
		for _, o := range m.Outputs {
			if sink, _ := sinks.SplitSinkPath(o.Path); sink != "" {
				continue // a further sink's file (sinks.Mux): not the table's
			}
			files = append(files, iceberg.DataFile{Path: o.Path, Size: o.Size, Rows: o.Rows})
		}
		summary := map[string]string{"manifest": manifest.ManifestPath(m.Generation, m.Epoch), "attempt": m.Attempt}
		t0 := time.Now()
		if err := ts.t.Publish(ctx, ts.pipelineID, m.Epoch, summary, files); err != nil {
			return fmt.Errorf("iceberg sink: publish epoch %d: %w", m.Epoch, err)
		}
		ts.published = m.Epoch
		r.Log.Info("published to iceberg", "epoch", m.Epoch, "files", len(files), "duration", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// maintainTable expires old snapshots and removes metadata files of expired
// versions and of losing commits (never data files, never files floe did not
// write), once per run that published something. Failures are logged: the
// next run tries again.
func (r *Runner) maintainTable(ctx context.Context) {
	if r.table == nil || r.res.Epochs == 0 {
		return
	}
	rep, err := r.table.t.Maintain(ctx, iceberg.MaintainOptions{})
	if err != nil {
		r.Log.Warn("iceberg maintenance failed; the next run tries again", "error", err)
		return
	}
	r.Log.Info("iceberg maintenance", "expired_snapshots", rep.ExpiredSnapshots, "deleted_versions", rep.DeletedVersions,
		"deleted_manifests", rep.DeletedManifests)
}
