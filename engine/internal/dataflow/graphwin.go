package dataflow

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
const HiddenTime = "__floe_window_time"

// An input whose window_start and window_end are the stage's own window's
// (carried: see resultWindow) shows them to the inner operator under these
// names, so that they do not clash with the bounds it adds; its output
// drops them (the stage's own bounds hold the same values).
const (
	HiddenStart = "__floe_input_window_start"
	HiddenEnd   = "__floe_input_window_end"
)

// isHidden reports whether an inner operator's output column is one of the
// hidden ones (a join's right side may prefix it).
func isHidden(name string) bool {
	return strings.HasSuffix(name, HiddenTime) || strings.HasSuffix(name, HiddenStart) || strings.HasSuffix(name, HiddenEnd)
}

// winShape is a fixed window: tumbling (slide = size) or sliding.
type winShape struct{ size, slide time.Duration }

func (w winShape) String() string {
	if w.slide == w.size {
		return "tumbling " + shortDur(w.size)
	}
	return "sliding " + shortDur(w.size) + " every " + shortDur(w.slide)
}

// shortDur formats d as a spec writes it: 10s, 1m, 1h30m.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// shapeOfWindow is a window stage's window; false for a session window.
func shapeOfWindow(w *spec.Window) (winShape, bool) {
	switch {
	case w.Tumbling > 0:
		return winShape{w.Tumbling, w.Tumbling}, true
	case w.Sliding != nil:
		return winShape{w.Sliding.Size, w.Sliding.Slide}, true
	}
	return winShape{}, false
}

// shapeOfJoin is a windowed join's window.
func shapeOfJoin(w *spec.JoinWindow) winShape {
	if w.Sliding != nil {
		return winShape{w.Sliding.Size, w.Sliding.Slide}
	}
	return winShape{w.Tumbling, w.Tumbling}
}

// resultWindow returns the window of the window results n's rows are
// (through stateless stages that keep window_start and window_end as they
// are) and the stage that produced them; false when n's rows are not
// window results, are a session window's, or a stage in between redefines
// a bound.
func resultWindow(n *Node) (winShape, string, bool) {
	for n != nil {
		st := n.spec
		switch {
		case n.windows && st != nil:
			return n.window, n.Name, n.fixedWindow
		case n.Kind == "source" || n.Stateful || len(n.Ins) == 0 || st == nil:
			return winShape{}, "", false
		case copied(n, operators.ColWindowStart) != operators.ColWindowStart || copied(n, spec.WindowEventTime) != spec.WindowEventTime:
			return winShape{}, "", false
		}
		n = n.Ins[0]
	}
	return winShape{}, "", false
}

// projectedFrom returns the input column a project's output column col is
// a copy of ("" when it is computed or not in the project).
func projectedFrom(pr *spec.Project, col string) string {
	for _, c := range pr.Columns {
		if c.Name == col {
			if e := strings.TrimSpace(c.Expr); isIdent(e) {
				return e
			}
			return ""
		}
	}
	return ""
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// windowEndAlias reports whether column col of n's rows is the window_end
// of window results under another name (a project copied it), and returns
// the stages that produced and renamed it.
func windowEndAlias(n *Node, col string) (producer, renamed string, ok bool) {
	for n != nil {
		switch {
		case n.windows:
			return n.Name, renamed, col == spec.WindowEventTime && renamed != ""
		case n.Kind == "source" || n.Stateful || len(n.Ins) == 0 || n.spec == nil:
			return "", "", false
		}
		from := copied(n, col)
		if from == "" {
			return "", "", false
		}
		if from != col {
			renamed = n.Name
		}
		col, n = from, n.Ins[0]
	}
	return "", "", false
}

// offByOneWindow is the refusal of a window-results time column renamed
// from window_end.
func offByOneWindow(field, col, producer, renamed string) error {
	return fmt.Errorf("%s %q is the window_end of %s's window results (renamed by %s): window_end is the exclusive end of a window, "+
		"the first instant of the next one, so rows timed by it fall in the NEXT window. Leave the window columns as they are "+
		"(window results are timed window_end - 1µs, and a windowed join of results of its own window pairs equal windows), "+
		"or time them by window_start", field, col, producer, renamed)
}

// readsWindowResults reports whether n's rows are window results (of a
// window or a windowed join), through stateless stages only.
func readsWindowResults(n *Node) bool {
	for n != nil {
		switch {
		case n.windows:
			return true
		case n.Kind == "source" || n.Stateful || len(n.Ins) == 0:
			return false
		}
		n = n.Ins[0]
	}
	return false
}

// withHiddenTime returns in with the hidden event-time column appended,
// and with carry its window bounds renamed hiddenStart and hiddenEnd.
func withHiddenTime(in *arrow.Schema, carry bool) *arrow.Schema {
	fs := in.Fields()
	if carry {
		for i := range fs {
			switch fs[i].Name {
			case operators.ColWindowStart:
				fs[i].Name = HiddenStart
			case operators.ColWindowEnd:
				fs[i].Name = HiddenEnd
			}
		}
	}
	fs = append(fs, arrow.Field{Name: HiddenTime, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}})
	md := in.Metadata()
	return arrow.NewSchema(fs, &md)
}

// hiddenTimeOp is a keyed stage some of whose inputs are timed by the
// hidden column: it shows the visible input and output schemas.
type hiddenTimeOp struct {
	operators.Stateful // built over exts
	ins, exts          []*arrow.Schema
	opts               hiddenOpts
	endCol             []int // per input: the window_end column shifted, -1 none
	out                *arrow.Schema
	keep               []int // inner output columns shown (nil: all)
	startCol, endOut   int   // opts.fixStart: the output's window_start and window_end
	mem                memory.Allocator
}

// hiddenOpts says how a hiddenTimeOp shows its inputs to the inner
// operator.
type hiddenOpts struct {
	// ends[i] is input i's window_end column to time it by ("" none).
	ends []string
	// carry[i]: input i's window_start and window_end are the stage's own
	// window's; the inner operator sees them as hiddenStart and hiddenEnd
	// and the output shows the stage's bounds only.
	carry []bool
	// fixStart > 0: the inner operator runs on buckets one slide long
	// that end where the windows end; the output's window_start is
	// window_end - fixStart (the window's size).
	fixStart time.Duration
}

// newHiddenTimeOp builds op (by build, over the extended schemas) for the
// inputs ins as o says.
func newHiddenTimeOp(ins []*arrow.Schema, o hiddenOpts, build func(exts []*arrow.Schema) (operators.Stateful, error)) (operators.Stateful, error) {
	h := &hiddenTimeOp{ins: ins, opts: o, exts: make([]*arrow.Schema, len(ins)), endCol: make([]int, len(ins))}
	for i, in := range ins {
		h.exts[i], h.endCol[i] = in, -1
		if o.ends[i] == "" {
			continue
		}
		idx := in.FieldIndices(o.ends[i])
		if len(idx) != 1 {
			return nil, fmt.Errorf("no column %q to time window results by", o.ends[i])
		}
		h.exts[i], h.endCol[i] = withHiddenTime(in, i < len(o.carry) && o.carry[i]), idx[0]
	}
	inner, err := build(h.exts)
	if err != nil {
		return nil, err
	}
	h.Stateful = inner
	full := inner.OutputSchema()
	var fs []arrow.Field
	for c, f := range full.Fields() {
		if isHidden(f.Name) {
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
	if o.fixStart > 0 {
		ws, we := h.out.FieldIndices(operators.ColWindowStart), h.out.FieldIndices(operators.ColWindowEnd)
		if len(ws) != 1 || len(we) != 1 {
			return nil, fmt.Errorf("internal error: no window bounds in %s", h.out)
		}
		h.startCol, h.endOut = ws[0], we[0]
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
	if err != nil || rec == nil || (h.keep == nil && h.opts.fixStart == 0) {
		return rec, err
	}
	defer rec.Release()
	cols := rec.Columns()
	if h.keep != nil {
		cols = make([]arrow.Array, len(h.keep))
		for j, c := range h.keep {
			cols[j] = rec.Column(c)
		}
	}
	if h.opts.fixStart > 0 {
		// The inner operator's bucket starts one slide before the end;
		// the window starts one size before it.
		end, ok := cols[h.endOut].(*array.Timestamp)
		if !ok {
			return nil, fmt.Errorf("internal error: window_end is %s", cols[h.endOut].DataType())
		}
		mem := h.mem
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		b := array.NewTimestampBuilder(mem, h.out.Field(h.startCol).Type.(*arrow.TimestampType))
		b.Reserve(end.Len())
		size := arrow.Timestamp(h.opts.fixStart.Microseconds())
		for j := range end.Len() {
			if end.IsNull(j) {
				b.AppendNull()
				continue
			}
			b.UnsafeAppend(end.Value(j) - size)
		}
		start := b.NewArray()
		b.Release()
		defer start.Release()
		cols = append([]arrow.Array(nil), cols...)
		cols[h.startCol] = start
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
	if slices.Contains(h.opts.carry, true) || h.opts.fixStart > 0 {
		// Results of the stage's own window (issue 23; the rule above
		// is unchanged for the plans written before).
		r += fmt.Sprintf("+own-window:%v:%d", h.opts.carry, h.opts.fixStart.Microseconds())
	}
	return r
}

// IsWindowBound reports whether col is window_start or window_end.
func IsWindowBound(col string) bool {
	return col == operators.ColWindowStart || col == operators.ColWindowEnd
}

// hasBounds reports whether s has one window_start and one window_end.
func hasBounds(s *arrow.Schema) bool {
	return s != nil && len(s.FieldIndices(operators.ColWindowStart)) == 1 && len(s.FieldIndices(operators.ColWindowEnd)) == 1
}

// OwnWindowKey returns the window of a window stage whose key names
// window_start or window_end of the window results it reads: then the key
// is the input's window, which must be the stage's own (Flink's window
// aggregation grouped by window_start and window_end), and each input row
// is aggregated in its own window only. nil when the key names no bound
// or the input is not window results (the operator then refuses the
// reserved name).
func OwnWindowKey(w *spec.Window, in *Node, eventTime string) (*winShape, error) {
	var bounds []string
	for _, k := range w.Key {
		if IsWindowBound(k) {
			bounds = append(bounds, k)
		}
	}
	if len(bounds) == 0 || !readsWindowResults(in) {
		return nil, nil
	}
	named := strings.Join(bounds, " and ")
	rw, prod, ok := resultWindow(in)
	if !ok || !hasBounds(in.Out) {
		return nil, fmt.Errorf("key names %s, but the input's window bounds are not those of a tumbling or sliding window "+
			"(a session window's, or changed by a project): copy them to other names in a project to key by them as plain columns", named)
	}
	own, ok := shapeOfWindow(w)
	if !ok || own != rw {
		this := "a session window"
		if ok {
			this = own.String()
		}
		return nil, fmt.Errorf("key names %s, the bounds of %s's windows (%s), but this window is %s: the output would carry two "+
			"different windows under one name. To aggregate per input window, give this stage the input's window (%s); to key a "+
			"coarser window by the input windows, copy the bound to another name in a project first (e.g. input_start: window_start)",
			named, prod, rw, this, rw)
	}
	if eventTime != spec.WindowEventTime {
		return nil, fmt.Errorf("key names %s of window results, but the input's event time is %q, not window_end", named, eventTime)
	}
	return &rw, nil
}

// ownWindowSides returns, for a windowed join, which of its inputs (ins:
// left, right) are results of windows equal to the join's own: those pair
// in their own window only, and their window_start and window_end are the
// join's (shown once). It refuses what would pair the wrong windows: a
// time column renamed from window_end, a time column on a side of results
// of the join's window, left results of another window, and a sliding join
// of results of its windows with rows that are not.
func ownWindowSides(j *spec.Join, ins []*Node) ([2]bool, error) {
	var carry [2]bool
	if j.Window == nil || len(ins) != 2 {
		return carry, nil
	}
	own := shapeOfJoin(j.Window)
	for side, in := range ins {
		field, user, what := "left_time", j.LeftTime, "left"
		if side == 1 {
			field, user, what = "right_time", j.RightTime, "right"
		}
		if readsWindowResults(in) && hasBounds(in.Out) {
			if rw, prod, ok := resultWindow(in); ok {
				switch {
				case rw == own && user != "" && !IsWindowBound(user):
					return carry, fmt.Errorf("%s %q: the %s rows are results of %s's %s windows, this join's: each pairs in its own "+
						"window, so a time column does not apply; leave %s out", field, user, what, prod, rw, field)
				case rw == own:
					carry[side] = true
					continue
				case side == 0:
					return carry, fmt.Errorf("the left rows are results of %s's %s windows and carry their window_start and "+
						"window_end, but this join's window is %s: a windowed join of window results pairs equal windows; give it "+
						"the inputs' window (%s)", prod, rw, own, rw)
				}
			}
		}
		if user != "" {
			if prod, renamed, ok := windowEndAlias(in, user); ok {
				return carry, offByOneWindow(field, user, prod, renamed)
			}
		}
	}
	if own.slide != own.size && carry[0] != carry[1] {
		return carry, fmt.Errorf("a sliding windowed join pairs results of its own windows only with results of the same windows "+
			"(a row that is not a window result is in %d windows at once, a result in one): window the other side by %s too, "+
			"or join in tumbling windows", own.size/own.slide, own)
	}
	if carry[1] && !carry[0] {
		// Plain rows on the left, results of the (tumbling) window on
		// the right: this compiled before (the right's bounds prefixed,
		// Nexmark q7's shape) and pairs right; keep its plan and state.
		carry[1] = false
	}
	return carry, nil
}
