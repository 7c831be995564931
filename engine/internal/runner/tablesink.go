package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
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

// icebergPartition resolves sink.partition_by against the output schema:
// the partition_by value, the column index of its source (-1 for none) and
// its transform. The default is the window start's day when the output has
// a window_start timestamp.
func icebergPartition(p *spec.Pipeline, out *arrow.Schema) (string, int, string, error) {
	pb := p.RootSink().PartitionBy
	if pb == "" {
		if idx := out.FieldIndices("window_start"); len(idx) == 1 && out.Field(idx[0]).Type.ID() == arrow.TIMESTAMP {
			return "day(window_start)", idx[0], "day", nil
		}
		return "", -1, "", nil
	}
	if pb == "none" {
		return "", -1, "", nil
	}
	tr, col, ok := spec.ParsePartitionTransform(pb)
	if !ok {
		return "", -1, "", fmt.Errorf("sink.partition_by %s: want none, identity(<column>) or hour, day, month or year(<timestamp column>)", pb)
	}
	idx := out.FieldIndices(col)
	if len(idx) != 1 {
		return "", -1, "", fmt.Errorf("sink.partition_by %s: the output has no column %q (columns: %v)", pb, col, dataflow.FieldNames(out))
	}
	f := out.Field(idx[0])
	if tr != "identity" && f.Type.ID() != arrow.TIMESTAMP {
		return "", -1, "", fmt.Errorf("sink.partition_by %s: column %q is %s, want a timestamp", pb, col, f.Type)
	}
	if tr == "identity" && (!dataflow.HivePartitionType(f.Type) || f.Type.ID() == arrow.LARGE_STRING || isUnsigned(f.Type)) {
		return "", -1, "", fmt.Errorf("sink.partition_by %s: column %q is %s; identity partitions take a string, signed integer, boolean, date or timestamp column", pb, col, f.Type)
	}
	return pb, idx[0], tr, nil
}

func isUnsigned(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// openIceberg opens the table of p's iceberg sink for data files of schema
// out.
func openIceberg(ctx context.Context, p *spec.Pipeline, st *Stores, partitionBy string, out *arrow.Schema, log *slog.Logger) (*iceberg.Table, error) {
	t, err := iceberg.Open(ctx, st.Sink, owner.IdentityOf(p.RootSink().URL), iceberg.Options{Schema: out, PartitionBy: partitionBy, Renames: RenamedColumns(p), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("iceberg sink %s: %w", owner.IdentityOf(p.RootSink().URL), err)
	}
	return t, nil
}

// tableSchemaChanges says how the schema of p's iceberg table evolves when
// the plan's output is added to it (nothing when it fits or there is no
// table yet), or why it cannot: decided before anything is written, so a
// plan change the table cannot take is refused by `floe plan` and before a
// run commits an epoch it could not publish.
func tableSchemaChanges(ctx context.Context, p *spec.Pipeline, st *Stores, out *arrow.Schema) ([]string, error) {
	pb, _, _, err := icebergPartition(p, out)
	if err != nil {
		return nil, err
	}
	t, err := openIceberg(ctx, p, st, pb, out, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	changes, err := t.CheckSchema(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("iceberg sink %s: %w", owner.IdentityOf(p.RootSink().URL), err)
	}
	return changes, nil
}

// RenamedColumns maps every aggregate with renamed_from to its previous
// name: the table column of the previous name is renamed, not replaced.
func RenamedColumns(p *spec.Pipeline) map[string]string {
	out := map[string]string{}
	add := func(w *spec.Window) {
		if w == nil {
			return
		}
		for _, a := range w.Aggregates {
			if a.RenamedFrom != "" {
				out[a.Name] = a.RenamedFrom
			}
		}
	}
	for _, op := range p.Operators {
		add(op.Window)
	}
	for _, st := range p.Stages {
		add(st.Window)
	}
	return out
}

// openTable opens the Iceberg table of an iceberg sink and publishes every
// committed epoch it lacks.
func (r *Runner) openTable(ctx context.Context) error {
	if r.P.RootSink().Type != spec.SinkIceberg {
		return nil
	}
	pb, col, tr, err := icebergPartition(r.P, r.Plan.Output)
	if err != nil {
		return err
	}
	t, err := openIceberg(ctx, r.P, r.St, pb, r.Plan.Output, r.Log)
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
			if sink, _ := SplitSinkPath(o.Path); sink != "" {
				continue // a further sink's file (sinks.go): not the table's
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

// splitByPartition splits output batches by the partition of column col
// under transform (identity, hour, day, month, year), for a partitioned
// table: each returned group holds one partition's rows, keyed by its
// directory below data/: "day=2006-01-02" (as floe always wrote it),
// "hour=2006-01-02-15", "month=2006-01", "year=2006", or "<col>=<value>"
// for identity (escaped as a Hive partition directory; null as
// __HIVE_DEFAULT_PARTITION__). A time transform refuses nulls.
func splitByPartition(bs []arrow.RecordBatch, col int, transform string, mem memory.Allocator) (map[string][]arrow.RecordBatch, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	schema := bs[0].Schema()
	keep := make([]int, schema.NumFields())
	for i := range keep {
		keep[i] = i
	}
	name := schema.Field(col).Name
	return groupRows(bs, keep, schema, mem, func(b arrow.RecordBatch, i int) (string, error) {
		a := b.Column(col)
		if transform == "identity" {
			v, ok := hiveValue(a, i)
			return manifest.HivePartitionSegment(name, v, ok), nil
		}
		ts, ok := a.(*array.Timestamp)
		if !ok {
			return "", fmt.Errorf("partition column %s is %s, want a timestamp", name, a.DataType())
		}
		if ts.IsNull(i) {
			return "", fmt.Errorf("partition column %s has nulls", name)
		}
		t := ts.Value(i).ToTime(ts.DataType().(*arrow.TimestampType).Unit).UTC()
		switch transform {
		case "hour":
			return "hour=" + t.Format("2006-01-02-15"), nil
		case "month":
			return "month=" + t.Format("2006-01"), nil
		case "year":
			return "year=" + t.Format("2006"), nil
		}
		return "day=" + t.Format("2006-01-02"), nil
	})
}
