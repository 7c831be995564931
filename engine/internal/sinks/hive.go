package sinks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// A Hive-partitioned files sink (sink.partition_by: [col, ...]) writes each
// output row into the directory its partition values name,
// "<col>=<value>/.../part-...", as Hive, Spark and DuckDB's COPY ...
// PARTITION_BY do: values escaped as Hive escapes path names, null and
// empty values as __HIVE_DEFAULT_PARTITION__ (manifest.HivePartitionSegment),
// and the partition columns left out of the files (readers with
// hive_partitioning add them back from the path; DuckDB takes the path's
// value even when a file also holds the column). Values are written as
// Spark writes them: integers in decimal, booleans as true/false, dates as
// 2006-01-02, timestamps in UTC as "2006-01-02 15:04:05" with the fraction
// of a second when it is not zero ("08:00:00.5"). Every file is listed in
// the manifest by its path below the sink root, so the commit protocol,
// orphan cleanup, retention, `floe outputs`, verify and replay see the
// partition directories as part of the file's name and nothing else
// changes.

// split groups the rows of bs by partition directory
// ("dt=2015-07-15/hm=08%3A00"), each group's batches holding the files'
// columns only.
func HiveSplit(h *dataflow.HiveParts, bs []arrow.RecordBatch, mem memory.Allocator) (map[string][]arrow.RecordBatch, error) {
	var seg strings.Builder
	return GroupRows(bs, h.Keep, h.File, mem, func(b arrow.RecordBatch, i int) (string, error) {
		seg.Reset()
		for j, c := range h.Cols {
			if j > 0 {
				seg.WriteByte('/')
			}
			v, ok := HiveValue(b.Column(c), i)
			s := manifest.HivePartitionSegment(h.Names[j], v, ok)
			if len(s) > manifest.MaxPartitionSegment {
				return "", fmt.Errorf("partition column %s: value %.40q... makes a directory name of %d bytes (at most %d)", h.Names[j], v, len(s), manifest.MaxPartitionSegment)
			}
			seg.WriteString(s)
		}
		return seg.String(), nil
	})
}

// GroupRows groups the rows of bs by the directory dirOf names, each
// group's batches holding columns keep of the input (schema file).
func GroupRows(bs []arrow.RecordBatch, keep []int, file *arrow.Schema, mem memory.Allocator, dirOf func(b arrow.RecordBatch, i int) (string, error)) (map[string][]arrow.RecordBatch, error) {
	out := map[string][]arrow.RecordBatch{}
	ctx := compute.WithAllocator(context.Background(), mem)
	for _, b := range bs {
		n := int(b.NumRows())
		if n == 0 {
			continue
		}
		rows := map[string][]int64{}
		var order []string
		for i := range n {
			dir, err := dirOf(b, i)
			if err != nil {
				return nil, err
			}
			if _, seen := rows[dir]; !seen {
				order = append(order, dir)
			}
			rows[dir] = append(rows[dir], int64(i))
		}
		for _, dir := range order {
			idx := rows[dir]
			cols := make([]arrow.Array, len(keep))
			if len(idx) == n {
				for k, c := range keep {
					cols[k] = b.Column(c)
				}
				out[dir] = append(out[dir], array.NewRecordBatch(file, cols, int64(n)))
				continue
			}
			ib := array.NewInt64Builder(mem)
			ib.AppendValues(idx, nil)
			ind := ib.NewArray()
			ib.Release()
			for k, c := range keep {
				a, err := compute.TakeArray(ctx, b.Column(c), ind)
				if err != nil {
					ind.Release()
					return nil, fmt.Errorf("partition %s: %w", dir, err)
				}
				cols[k] = a
			}
			ind.Release()
			out[dir] = append(out[dir], array.NewRecordBatch(file, cols, int64(len(idx))))
			for _, a := range cols {
				a.Release()
			}
		}
	}
	return out, nil
}

// HiveValue returns the partition value of row i of a as Spark writes it;
// ok is false for null.
func HiveValue(a arrow.Array, i int) (string, bool) {
	if a.IsNull(i) {
		return "", false
	}
	if d, ok := a.(*array.Dictionary); ok {
		return HiveValue(d.Dictionary(), d.GetValueIndex(i))
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i)), true
	case *array.Int8:
		return strconv.FormatInt(int64(a.Value(i)), 10), true
	case *array.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10), true
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), true
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), true
	case *array.Uint8:
		return strconv.FormatUint(uint64(a.Value(i)), 10), true
	case *array.Uint16:
		return strconv.FormatUint(uint64(a.Value(i)), 10), true
	case *array.Uint32:
		return strconv.FormatUint(uint64(a.Value(i)), 10), true
	case *array.Uint64:
		return strconv.FormatUint(a.Value(i), 10), true
	case *array.Date32:
		return a.Value(i).ToTime().UTC().Format("2006-01-02"), true
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		layout := "2006-01-02 15:04:05"
		switch unit {
		case arrow.Millisecond:
			layout += ".999"
		case arrow.Microsecond:
			layout += ".999999"
		case arrow.Nanosecond:
			layout += ".999999999"
		}
		return a.Value(i).ToTime(unit).UTC().Format(layout), true
	}
	// newHiveParts admits only the types above.
	return fmt.Sprint(a.GetOneForMarshal(i)), true
}

// Groups splits one subtask's output for the files of a sink: by
// partition directory below dir when the sink is partitioned, else all
// under dir. Keys are sink-relative directories ("" for the root).
func Groups(h *dataflow.HiveParts, dir string, bs []arrow.RecordBatch, mem memory.Allocator) (map[string][]arrow.RecordBatch, error) {
	if h == nil {
		return map[string][]arrow.RecordBatch{dir: bs}, nil
	}
	parts, err := HiveSplit(h, bs, mem)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]arrow.RecordBatch, len(parts))
	for p, g := range parts {
		if dir != "" {
			p = dir + "/" + p
		}
		out[p] = g
	}
	return out, nil
}

// HivePartitionOf returns the partition directory of committed output path
// p ("" when its sink is not Hive-partitioned).
func HivePartitionOf(pl *dataflow.Plan, sp *spec.Pipeline, p string) string {
	info, ok := manifest.ParseOutputName(p)
	if !ok || info.Partition == "" {
		return ""
	}
	name, _ := SplitSinkPath(p)
	if name == "" {
		if pl.SinkParts == nil || info.Dir != "" {
			return ""
		}
		return info.Partition
	}
	i := slices.IndexFunc(dataflow.ExtraSinks(sp), func(s spec.NamedSink) bool { return s.Name == name })
	if i < 0 || pl.ExtraPartsOf(i) == nil || info.Dir != owner.ExtraSinkDir(name) {
		return ""
	}
	return info.Partition
}
