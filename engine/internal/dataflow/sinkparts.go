package dataflow

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

// HiveParts splits output batches by the values of a files sink's
// partition columns.
type HiveParts struct {
	Cols  []int         // partition columns in the output schema, in partition_by order
	Names []string      // their names
	Keep  []int         // the output columns the files hold
	File  *arrow.Schema // the files' schema: the output without the partition columns
}

// newHiveParts resolves a files sink's partition_by against its output
// schema out; nil when the sink is not partitioned. where names the sink
// field for errors ("sink", "sinks.hot").
func newHiveParts(s spec.Sink, out *arrow.Schema, where string) (*HiveParts, error) {
	if s.Type != spec.SinkFiles || len(s.PartitionColumns) == 0 {
		return nil, nil
	}
	h := &HiveParts{Names: s.PartitionColumns}
	for i, name := range s.PartitionColumns {
		idx := out.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%s.partition_by[%d]: the output has no column %q (columns: %v)", where, i, name, FieldNames(out))
		}
		f := out.Field(idx[0])
		if !HivePartitionType(f.Type) {
			return nil, fmt.Errorf("%s.partition_by[%d]: column %q is %s; a partition column must be a string, integer, boolean, date or timestamp", where, i, name, f.Type)
		}
		h.Cols = append(h.Cols, idx[0])
	}
	var fields []arrow.Field
	for i, f := range out.Fields() {
		if !slices.Contains(h.Cols, i) {
			h.Keep = append(h.Keep, i)
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s.partition_by: lists every output column, so the files would hold no column; partition by fewer", where)
	}
	md := out.Metadata()
	h.File = arrow.NewSchema(fields, &md)
	return h, nil
}

func HivePartitionType(t arrow.DataType) bool {
	if d, ok := t.(*arrow.DictionaryType); ok {
		t = d.ValueType
	}
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BOOL, arrow.DATE32, arrow.TIMESTAMP,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// Schema returns the schema of the files of a sink with output schema out
// and partitioning h (nil: not partitioned).
func (h *HiveParts) Schema(out *arrow.Schema) *arrow.Schema {
	if h == nil {
		return out
	}
	return h.File
}

// ExtraPartsOf returns the partitioning of further sink i (nil: none).
func (pl *Plan) ExtraPartsOf(i int) *HiveParts {
	if i < len(pl.extraParts) {
		return pl.extraParts[i]
	}
	return nil
}

// partitionSinks resolves the partition_by of p's files sinks against the
// plan's outputs.
func (pl *Plan) partitionSinks(p *spec.Pipeline) error {
	root, where := p.Sink, "sink"
	if len(p.Sinks) > 0 {
		root, where = p.Sinks[0].Sink, "sinks."+p.Sinks[0].Name
	}
	var err error
	if pl.SinkParts, err = newHiveParts(root, pl.Output, where); err != nil {
		return err
	}
	pl.extraParts = nil
	for i, sk := range ExtraSinks(p) {
		if pl.Graph == nil || i >= len(pl.Graph.Extra) {
			break
		}
		h, err := newHiveParts(sk.Sink, pl.Graph.Extra[i].Out, "sinks."+sk.Name)
		if err != nil {
			return err
		}
		pl.extraParts = append(pl.extraParts, h)
	}
	return nil
}

// ExtraSinks returns a graph pipeline's sinks after the first (none for a
// linear pipeline or a graph with one sink).
func ExtraSinks(p *spec.Pipeline) []spec.NamedSink {
	if len(p.Sinks) < 2 {
		return nil
	}
	return p.Sinks[1:]
}

func FieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}
