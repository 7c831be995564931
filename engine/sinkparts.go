package engine

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

// hiveParts splits output batches by the values of a files sink's
// partition columns.
type hiveParts struct {
	cols  []int         // partition columns in the output schema, in partition_by order
	names []string      // their names
	keep  []int         // the output columns the files hold
	file  *arrow.Schema // the files' schema: the output without the partition columns
}

// newHiveParts resolves a files sink's partition_by against its output
// schema out; nil when the sink is not partitioned. where names the sink
// field for errors ("sink", "sinks.hot").
func newHiveParts(s spec.Sink, out *arrow.Schema, where string) (*hiveParts, error) {
	if s.Type != spec.SinkFiles || len(s.PartitionColumns) == 0 {
		return nil, nil
	}
	h := &hiveParts{names: s.PartitionColumns}
	for i, name := range s.PartitionColumns {
		idx := out.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%s.partition_by[%d]: the output has no column %q (columns: %v)", where, i, name, fieldNames(out))
		}
		f := out.Field(idx[0])
		if !hivePartitionType(f.Type) {
			return nil, fmt.Errorf("%s.partition_by[%d]: column %q is %s; a partition column must be a string, integer, boolean, date or timestamp", where, i, name, f.Type)
		}
		h.cols = append(h.cols, idx[0])
	}
	var fields []arrow.Field
	for i, f := range out.Fields() {
		if !slices.Contains(h.cols, i) {
			h.keep = append(h.keep, i)
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s.partition_by: lists every output column, so the files would hold no column; partition by fewer", where)
	}
	md := out.Metadata()
	h.file = arrow.NewSchema(fields, &md)
	return h, nil
}

func hivePartitionType(t arrow.DataType) bool {
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

// schema returns the schema of the files of a sink with output schema out
// and partitioning h (nil: not partitioned).
func (h *hiveParts) schema(out *arrow.Schema) *arrow.Schema {
	if h == nil {
		return out
	}
	return h.file
}

// extraPartsOf returns the partitioning of further sink i (nil: none).
func (pl *plan) extraPartsOf(i int) *hiveParts {
	if i < len(pl.extraParts) {
		return pl.extraParts[i]
	}
	return nil
}

// partitionSinks resolves the partition_by of p's files sinks against the
// plan's outputs.
func (pl *plan) partitionSinks(p *spec.Pipeline) error {
	root, where := p.Sink, "sink"
	if len(p.Sinks) > 0 {
		root, where = p.Sinks[0].Sink, "sinks."+p.Sinks[0].Name
	}
	var err error
	if pl.sinkParts, err = newHiveParts(root, pl.output, where); err != nil {
		return err
	}
	pl.extraParts = nil
	for i, sk := range extraSinks(p) {
		if pl.graph == nil || i >= len(pl.graph.extra) {
			break
		}
		h, err := newHiveParts(sk.Sink, pl.graph.extra[i].out, "sinks."+sk.Name)
		if err != nil {
			return err
		}
		pl.extraParts = append(pl.extraParts, h)
	}
	return nil
}

// extraSinks returns a graph pipeline's sinks after the first (none for a
// linear pipeline or a graph with one sink).
func extraSinks(p *spec.Pipeline) []spec.NamedSink {
	if len(p.Sinks) < 2 {
		return nil
	}
	return p.Sinks[1:]
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}
