package engine

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A window reading a window's results.
//
// A window result's event time is the last instant of its window:
// window_end minus one microsecond (docs/graph.md). A window stage whose
// input rows come from a window stage therefore windows a hidden column
// holding window_end - 1µs, appended to each input batch, so that a 1 h
// window over 1 min windows puts [10:59, 11:00) into the 10:00 hour. The
// hidden column never leaves the stage: a window's output is its keys and
// aggregates, and its late rows are handed on without it.

// hiddenTime is the name of the appended event-time column.
const hiddenTime = "__floe_window_time"

// readsWindow reports whether n's rows come from a window stage (through
// stateless stages only).
func readsWindow(n *gnode) bool {
	for n != nil {
		switch {
		case n.kind == spec.KindWindow:
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

// shiftedWindow is a window stage over window results: it windows
// window_end - 1µs (the hidden column) and shows its input schema without it.
type shiftedWindow struct {
	operators.Stateful // a *operators.Window over withHiddenTime(in)
	in, ext            *arrow.Schema
	endCol             int
	mem                memory.Allocator
}

func (w *shiftedWindow) InputSchemaOf(int) *arrow.Schema { return w.in }

func (w *shiftedWindow) SetAllocator(mem memory.Allocator) {
	w.mem = mem
	w.Stateful.SetAllocator(mem)
}

func (w *shiftedWindow) ProcessInput(i int, rec arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	end, ok := rec.Column(w.endCol).(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("window over window results: column %s is %s", w.in.Field(w.endCol).Name, rec.Column(w.endCol).DataType())
	}
	mem := w.mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := array.NewTimestampBuilder(mem, w.ext.Field(w.ext.NumFields()-1).Type.(*arrow.TimestampType))
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
	ext := array.NewRecordBatch(w.ext, append(append([]arrow.Array(nil), rec.Columns()...), hidden), rec.NumRows())
	hidden.Release()
	defer ext.Release()
	late, err := w.Stateful.ProcessInput(i, ext, sel)
	if err != nil || late == nil {
		return late, err
	}
	defer late.Release()
	cols := late.Columns()[:late.NumCols()-1]
	return array.NewRecordBatch(w.in, cols, late.NumRows()), nil
}

// newShiftedWindow builds the window of spec ws over window results of
// schema in (ws.EventTime names their window_end column).
func newShiftedWindow(ws operators.WindowSpec, in *arrow.Schema, k int) (operators.Stateful, error) {
	idx := in.FieldIndices(ws.EventTime)
	if len(idx) != 1 {
		return nil, fmt.Errorf("window over window results: no column %q", ws.EventTime)
	}
	ext := withHiddenTime(in)
	ws.EventTime = hiddenTime
	inner, err := operators.NewWindow(ws, ext, k)
	if err != nil {
		return nil, err
	}
	return &shiftedWindow{Stateful: inner, in: in, ext: ext, endCol: idx[0]}, nil
}
