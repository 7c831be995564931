package engine

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// Stages reading window results.
//
// A window result's event time is the last instant of its window:
// window_end minus one microsecond (docs/graph.md); so is a windowed join's
// result's. A keyed stage that times its input by the window_end of such
// results (a window over a window's results, a join with a window's
// results) reads a hidden column holding window_end - 1µs, appended to each
// batch of that input, so that a 1 h window over 1 min windows puts
// [10:59, 11:00) into the 10:00 hour and a 10 s windowed join pairs a
// window's maximum with the rows of that same window. The hidden column
// never leaves the stage: late rows are handed on without it and output
// columns carrying it are dropped.

// hiddenTime is the name of the appended event-time column.
const hiddenTime = "__floe_window_time"

// readsWindowResults reports whether n's rows are window results (of a
// window or a windowed join), through stateless stages only.
func readsWindowResults(n *gnode) bool {
	for n != nil {
		switch {
		case n.kind == spec.KindWindow || n.windowedJoin:
			return true
		case n.kind == "source" || n.stateful || len(n.ins) == 0:
			return false
		}
		n = n.ins[0]
	}
	return false
}

// withHiddenTime returns in with the hidden event-time column appended.
func withHiddenTime(in *arrow.Schema) *arrow.Schema {
	fs := append(in.Fields(), arrow.Field{Name: hiddenTime, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}})
	md := in.Metadata()
	return arrow.NewSchema(fs, &md)
}

// hiddenTimeOp is a keyed stage some of whose inputs are timed by the
// hidden column: it shows the visible input and output schemas.
type hiddenTimeOp struct {
	operators.Stateful // built over exts
	ins, exts          []*arrow.Schema
	endCol             []int // per input: the window_end column shifted, -1 none
	out                *arrow.Schema
	keep               []int // inner output columns shown (nil: all)
	mem                memory.Allocator
}

// newHiddenTimeOp builds op (by build, over the extended schemas) for the
// inputs ins, shifting input i's column ends[i] ("" none).
func newHiddenTimeOp(ins []*arrow.Schema, ends []string, build func(exts []*arrow.Schema) (operators.Stateful, error)) (operators.Stateful, error) {
	h := &hiddenTimeOp{ins: ins, exts: make([]*arrow.Schema, len(ins)), endCol: make([]int, len(ins))}
	for i, in := range ins {
		h.exts[i], h.endCol[i] = in, -1
		if ends[i] == "" {
			continue
		}
		idx := in.FieldIndices(ends[i])
		if len(idx) != 1 {
			return nil, fmt.Errorf("no column %q to time window results by", ends[i])
		}
		h.exts[i], h.endCol[i] = withHiddenTime(in), idx[0]
	}
	inner, err := build(h.exts)
	if err != nil {
		return nil, err
	}
	h.Stateful = inner
	full := inner.OutputSchema()
	var fs []arrow.Field
	for c, f := range full.Fields() {
		if len(f.Name) >= len(hiddenTime) && f.Name[len(f.Name)-len(hiddenTime):] == hiddenTime {
			continue
		}
		h.keep = append(h.keep, c)
		fs = append(fs, f)
	}
	md := full.Metadata()
	h.out = arrow.NewSchema(fs, &md)
	if len(h.keep) == full.NumFields() {
		h.keep = nil
	}
	return h, nil
}

func (h *hiddenTimeOp) InputSchemaOf(i int) *arrow.Schema { return h.ins[i] }
func (h *hiddenTimeOp) OutputSchema() *arrow.Schema       { return h.out }

func (h *hiddenTimeOp) SetAllocator(mem memory.Allocator) {
	h.mem = mem
	h.Stateful.SetAllocator(mem)
}

func (h *hiddenTimeOp) ProcessInput(i int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	if h.endCol[i] < 0 {
		return h.Stateful.ProcessInput(i, rec, sel)
	}
	end, ok := rec.Column(h.endCol[i]).(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("column %s is %s, want a timestamp", h.ins[i].Field(h.endCol[i]).Name, rec.Column(h.endCol[i]).DataType())
	}
	mem := h.mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	ext := h.exts[i]
	b := array.NewTimestampBuilder(mem, ext.Field(ext.NumFields()-1).Type.(*arrow.TimestampType))
	b.Reserve(end.Len())
	for j := range end.Len() {
		if end.IsNull(j) {
			b.AppendNull()
			continue
		}
		b.UnsafeAppend(end.Value(j) - 1)
	}
	hidden := b.NewArray()
	b.Release()
	wide := array.NewRecordBatch(ext, append(append([]arrow.Array(nil), rec.Columns()...), hidden), rec.NumRows())
	hidden.Release()
	defer wide.Release()
	late, err := h.Stateful.ProcessInput(i, wide, sel)
	if err != nil || late == nil {
		return late, err
	}
	defer late.Release()
	return array.NewRecordBatch(h.ins[i], late.Columns()[:late.NumCols()-1], late.NumRows()), nil
}

func (h *hiddenTimeOp) Advance(wm int64) (arrow.RecordBatch, error) {
	rec, err := h.Stateful.Advance(wm)
	if err != nil || rec == nil || h.keep == nil {
		return rec, err
	}
	defer rec.Release()
	cols := make([]arrow.Array, len(h.keep))
	for j, c := range h.keep {
		cols[j] = rec.Column(c)
	}
	return array.NewRecordBatch(h.out, cols, rec.NumRows()), nil
}

// timeRule is appended to a stage's state fingerprint when it reads window
// results by window_end - 1µs on some input: state written under another
// time rule is then refused rather than mixed with it.
func timeRule(op operators.Stateful) string {
	h, ok := op.(*hiddenTimeOp)
	if !ok {
		return ""
	}
	r := "+wend-1us:"
	for _, c := range h.endCol {
		if c >= 0 {
			r += "1"
		} else {
			r += "0"
		}
	}
	return r
}
