package sinks

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/iceberg"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// IcebergPartition resolves sink.partition_by against the output schema:
// the partition_by value, the column index of its source (-1 for none) and
// its transform. The default is the window start's day when the output has
// a window_start timestamp.
func IcebergPartition(p *spec.Pipeline, out *arrow.Schema) (string, int, string, error) {
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

// OpenIceberg opens the table of p's iceberg sink for data files of schema
// out.
func OpenIceberg(ctx context.Context, p *spec.Pipeline, sink store.Store, partitionBy string, out *arrow.Schema, log *slog.Logger) (*iceberg.Table, error) {
	t, err := iceberg.Open(ctx, sink, owner.IdentityOf(p.RootSink().URL), iceberg.Options{Schema: out, PartitionBy: partitionBy, Renames: RenamedColumns(p), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("iceberg sink %s: %w", owner.IdentityOf(p.RootSink().URL), err)
	}
	return t, nil
}

// TableSchemaChanges says how the schema of p's iceberg table evolves when
// the plan's output is added to it (nothing when it fits or there is no
// table yet), or why it cannot: decided before anything is written, so a
// plan change the table cannot take is refused by `floe plan` and before a
// run commits an epoch it could not publish.
func TableSchemaChanges(ctx context.Context, p *spec.Pipeline, sink store.Store, out *arrow.Schema) ([]string, error) {
	pb, _, _, err := IcebergPartition(p, out)
	if err != nil {
		return nil, err
	}
	t, err := OpenIceberg(ctx, p, sink, pb, out, slog.New(slog.DiscardHandler))
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

// SplitByPartition splits output batches by the partition of column col
// under transform (identity, hour, day, month, year), for a partitioned
// table: each returned group holds one partition's rows, keyed by its
// directory below data/: "day=2006-01-02" (as floe always wrote it),
// "hour=2006-01-02-15", "month=2006-01", "year=2006", or "<col>=<value>"
// for identity (escaped as a Hive partition directory; null as
// __HIVE_DEFAULT_PARTITION__). A time transform refuses nulls.
func SplitByPartition(bs []arrow.RecordBatch, col int, transform string, mem memory.Allocator) (map[string][]arrow.RecordBatch, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	schema := bs[0].Schema()
	keep := make([]int, schema.NumFields())
	for i := range keep {
		keep[i] = i
	}
	name := schema.Field(col).Name
	return GroupRows(bs, keep, schema, mem, func(b arrow.RecordBatch, i int) (string, error) {
		a := b.Column(col)
		if transform == "identity" {
			v, ok := HiveValue(a, i)
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
