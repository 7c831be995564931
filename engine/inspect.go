package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Looking inside the state (floe state cat / diff / export).
//
// The state of a retained epoch is restored exactly as a run restores it:
// the pipeline is compiled as a run compiles it (a linear pipeline lowered
// onto the graph, dataflow.CompileLinear), and the epoch's manifest and generation
// give the parallelism, the key-group count and, per keyed stage, the base
// files and the deltas, which restoreGraph reads into one operator per
// subtask (inspectgraph.go). A window is then advanced to +inf: the
// window's own finalisation turns every open (key, window) state into the
// row it would emit if the input ended at this epoch (count, sum, min, max,
// avg, count_distinct as a number, first, last). The operator is thrown
// away; nothing is written anywhere. For a sliding window the rows are the
// open windows (each the union of its slices), not the slices the state
// stores. Dedup / top_n / join stages show the rows they hold.

// StateQuery selects the state ReadState decodes.
type StateQuery struct {
	// Epoch is a retained committed epoch; 0 means the head.
	Epoch int64
	// Op keeps only this stateful operator ("": all of them); in the graph
	// form, a keyed stage's name.
	Op string
	// Keys keeps only rows whose key, in KeyText form, is one of these
	// (empty: every key).
	Keys []string
}

// StateView is the decoded state of one committed epoch.
type StateView struct {
	Pipeline       string
	Epoch          int64
	Head           int64 // the head epoch when the state was read
	Generation     int64
	Parallelism    int
	MaxParallelism int
	Watermark      int64 // microseconds; manifest.NoWatermark when none
	Ops            []*WindowState
}

// WindowState is the decoded state of one stateful operator: the window
// (of the linear form, or a window stage of a graph), or a graph's dedup,
// top_n or join stage (see inspectgraph.go).
type WindowState struct {
	ID string
	// Kind is the stage kind: "window", "dedup", "top_n" or "join".
	Kind       string
	Window     string   // a window's, e.g. "tumbling 24h0m0s, allowed lateness 0s"
	Keys       []string // key column names, in key order (a join: the left side's)
	Aggregates []string // a window's aggregate names, in spec order
	Exprs      []string // a window's aggregates as written, e.g. "sum(bytes)"
	// Stage describes a dedup, top_n or join stage, e.g. "dedup keep last
	// within 10s, allowed lateness 0s".
	Stage string
	// Columns names the state columns of a dedup, top_n or join stage
	// (StateRow.Values), in the operator's state-schema order, without
	// key_group and the key columns.
	Columns []string
	// EmittedThrough: every window with end + allowed lateness at or
	// before it was emitted (microseconds).
	EmittedThrough int64
	// States is the number of state rows restored: open (key, window)
	// states, or (key, slice) states of a sliding window.
	States int
	// Total is the number of windows before the Keys filter; Rows holds the
	// selected ones, sorted by key (column by column, nulls first), then
	// window start and end.
	Total  int
	Rows   []StateRow
	schema *arrow.Schema // the window's OutputSchema: keys, bounds, aggregates; else keys then Columns
	// identCols index the Columns that, with the key, identify a held row
	// across epochs and parallelisms (a dedup's pending and time, a
	// top_n's window and rank, a join's side and row); sortCols order the
	// rows of one key; arrival sequences (noCmp) are not compared: they
	// count per subtask, so a rescale renumbers them.
	identCols, sortCols []int
	noCmp               map[int]bool
	// joinSide is 1 + the index of a join's side column in Columns (0: not
	// a join): a row of one side shows none of the other side's (null)
	// columns.
	joinSide int
}

// windowed reports whether op's rows are windows with aggregates.
func (op *WindowState) windowed() bool { return op.Kind == "" || dataflow.FinalisedKind(op.Kind) }

// hidden reports whether column c of r is the other join side's.
func (op *WindowState) hidden(r *StateRow, c int) bool {
	if op.joinSide == 0 || op.joinSide > len(r.Values) {
		return false
	}
	name := op.Columns[c]
	if side, _ := r.Values[op.joinSide-1].(int8); side == 0 {
		return strings.HasPrefix(name, "right.")
	}
	return strings.HasPrefix(name, "left.")
}

// StateRow is one open (key, window) with its finalised aggregates, or one
// row a dedup, top_n or join stage holds.
type StateRow struct {
	// Key holds the key column values in key order; Values a window's
	// aggregates in spec order, or a stage's Columns. A value is nil (SQL
	// null), string, int64, int32, int8, float64, bool or time.Time (UTC).
	Key         []any
	WindowStart time.Time // windows only
	WindowEnd   time.Time // windows only
	Values      []any
	KeyGroup    int
	Subtask     int    // the subtask owning the key group in the epoch's generation
	ident       string // serialised key and bounds (or identity columns): the row's identity across epochs
	id          []any  // a held row's identity column values, for ordering
}

// KeyText is the key as --key matches it: each key column's value as cat
// prints it (null for SQL null), joined by ",", unquoted.
func (r *StateRow) KeyText() string {
	parts := make([]string, len(r.Key))
	for i, v := range r.Key {
		parts[i] = valueText(v)
	}
	return strings.Join(parts, ",")
}

// ReadState restores the state of a retained epoch of p (read-only) and
// decodes it. An epoch that is not retained is an error naming the retained
// ones; an unknown q.Op is an error naming the operators (the keyed stages
// of a graph).
func ReadState(ctx context.Context, p *spec.Pipeline, q StateQuery) (*StateView, error) {
	x, err := newInspector(ctx, p)
	if err != nil {
		return nil, err
	}
	defer x.close()
	return x.read(ctx, q)
}

// inspector reads the state of several epochs of one pipeline.
type inspector struct {
	p    *spec.Pipeline
	st   *runner.Stores
	c    *epoch.Committer
	head *epoch.Head
	pl   *dataflow.Plan
}

func newInspector(ctx context.Context, p *spec.Pipeline) (*inspector, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	// A linear pipeline's source is opened only to infer an undeclared
	// (Parquet) schema; a graph's sources are combined when opened.
	st, err := runner.OpenStores(ctx, p, &runner.Options{}, runner.IsGraph(p) || needsSourceFiles(p))
	if err != nil {
		return nil, err
	}
	x := &inspector{p: p, st: st, c: epoch.NewCommitter(st.State, nil, p.Name, nil)}
	if x.pl, _, err = compileTool(ctx, p, st.Source); err == nil {
		x.head, err = x.c.Peek(ctx) // read-only: no roll-forward write
	}
	if err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

// compileTool compiles p for a read-only tool as a run compiles it, a
// linear pipeline lowered onto the graph (dataflow.CompileLinear), over its
// sources' schemas: declared, or inferred from the files of src (listed
// only when a schema is not declared). It also returns those schemas, by
// source name (a linear pipeline's one source under its graph name).
func compileTool(ctx context.Context, p *spec.Pipeline, src store.Store, xo ...expr.Option) (*dataflow.Plan, map[string]*arrow.Schema, error) {
	var files []store.ObjectInfo
	if needsSourceFiles(p) {
		var err error
		if files, err = sources.List(ctx, p, src); err != nil {
			return nil, nil, err
		}
	}
	if runner.IsGraph(p) {
		schemas, lookups, err := runner.GraphSchemas(ctx, p, src, files, &runner.Options{})
		if err != nil {
			return nil, nil, err
		}
		pl, err := dataflow.CompileGraph(p, schemas, lookups, xo...)
		return pl, schemas, err
	}
	sc, err := dataflow.SourceSchema(p)
	if err == nil && sc == nil {
		sc, err = sources.InferSchema(ctx, p, src, files)
	}
	if err != nil {
		return nil, nil, err
	}
	pl, err := dataflow.CompileLinear(p, sc, xo...)
	if err != nil {
		return nil, nil, err
	}
	return pl, map[string]*arrow.Schema{pl.Graph.SourceNames()[0]: sc}, nil
}

func (x *inspector) close() { x.st.Close() }

// at returns the committed manifest of epoch n (0: the head) and its
// generation, walking the chain back from the head.
func (x *inspector) at(ctx context.Context, n int64) (*manifest.Manifest, *manifest.Generation, error) {
	h := x.head.Manifest
	if h == nil {
		return nil, nil, fmt.Errorf("pipeline %s has no committed epoch yet: nothing to inspect", x.p.Name)
	}
	if n == 0 {
		n = h.Epoch
	}
	if n < 0 || n > h.Epoch {
		return nil, nil, fmt.Errorf("epoch %d is not retained: %s", n, x.retained(ctx))
	}
	cur, _, err := x.c.LineageAt(ctx, x.head, n)
	if err != nil {
		return nil, nil, err
	}
	if cur == h && x.head.Generation != nil {
		return cur, x.head.Generation, nil
	}
	g, err := x.c.ReadGeneration(ctx, cur.Generation)
	if err != nil {
		return nil, nil, err
	}
	return cur, g, nil
}

// retained says which epochs can be inspected, for error messages.
func (x *inspector) retained(ctx context.Context) string {
	chain, err := x.c.Chain(ctx, x.head, math.MaxInt)
	if err != nil || len(chain) == 0 {
		return fmt.Sprintf("the head is epoch %d", x.head.Epoch())
	}
	lo, hi := chain[len(chain)-1].Epoch, chain[0].Epoch
	if lo == hi {
		return fmt.Sprintf("only epoch %d (the head) is retained", hi)
	}
	return fmt.Sprintf("retained epochs are %d..%d of the head's lineage %s (head %d; state.retain_epochs keeps %d)", lo, hi, epoch.FormatLineage(chain), hi, x.keep())
}

func (x *inspector) keep() int {
	if x.p.State.RetainEpochs > 0 {
		return x.p.State.RetainEpochs
	}
	return spec.DefaultRetainEpochs
}

func (x *inspector) read(ctx context.Context, q StateQuery) (*StateView, error) {
	m, g, err := x.at(ctx, q.Epoch)
	if err != nil {
		return nil, err
	}
	if x.pl, err = x.pl.WithRecordedLayouts(g.Plan); err != nil { // a graph's recorded state layouts (dataflow.Plan.WithRecordedLayouts)
		return nil, err
	}
	if err := dataflow.Compatible(g.Plan, x.pl.Ops); err != nil {
		return nil, fmt.Errorf("epoch %d (generation %d) cannot be read with this spec: %w", m.Epoch, m.Generation, err)
	}
	return x.readGraph(ctx, m, g, q)
}

// keepKeys drops the rows whose KeyText is none of keys (none: keep all).
func (op *WindowState) keepKeys(keys []string) {
	if len(keys) == 0 {
		return
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	op.Rows = slices.DeleteFunc(op.Rows, func(r StateRow) bool { return !want[r.KeyText()] })
}

// newWindowState is the header of a window operator's state.
func newWindowState(ws *operators.WindowSpec, emitted int64) *WindowState {
	op := &WindowState{ID: ws.ID, Kind: spec.KindWindow, Window: describeWindow(ws), Keys: slices.Clone(ws.Keys), EmittedThrough: emitted}
	for _, a := range ws.Aggregates {
		op.Aggregates = append(op.Aggregates, a.Name)
		op.Exprs = append(op.Exprs, a.String())
	}
	return op
}

// finalise advances every restored window subtask to +inf and appends the
// rows it emits (one per open key and window) to op.Rows; srs[s] is
// subtask s's key-group range. Each subtask is dropped from subs once
// decoded.
func (op *WindowState) finalise(subs []operators.Stateful, srs []runner.SubtaskRestore, k int) error {
	keyCols := make([]int, len(op.Keys))
	for i := range keyCols {
		keyCols[i] = i // the key columns lead OutputSchema
	}
	var buf []byte
	for s, w := range subs {
		op.schema = w.OutputSchema()
		op.States += w.Len()
		rec, err := w.Advance(math.MaxInt64) // finalise every open window; w is discarded
		if err != nil {
			return fmt.Errorf("subtask %d: %w", s, err)
		}
		subs[s] = nil // the state is decoded: let it go
		if rec == nil {
			continue
		}
		lo, hi := srs[s].Lo, srs[s].Hi
		nk := len(keyCols)
		for i := range int(rec.NumRows()) {
			buf = operators.SerializeKey(buf[:0], rec, i, keyCols)
			kg := keygroup.Of(buf, k)
			if kg < lo || kg >= hi {
				rec.Release()
				return fmt.Errorf("internal error: subtask %d [%d,%d) holds a key of key group %d", s, lo, hi, kg)
			}
			row := StateRow{KeyGroup: kg, Subtask: s}
			for c := range nk {
				row.Key = append(row.Key, cellValue(rec.Column(c), i))
			}
			start := rec.Column(nk).(*array.Timestamp).Value(i)
			end := rec.Column(nk + 1).(*array.Timestamp).Value(i)
			row.WindowStart, row.WindowEnd = time.UnixMicro(int64(start)).UTC(), time.UnixMicro(int64(end)).UTC()
			for c := nk + 2; c < int(rec.NumCols()); c++ {
				row.Values = append(row.Values, cellValue(rec.Column(c), i))
			}
			row.ident = string(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(buf, uint64(start)), uint64(end)))
			op.Rows = append(op.Rows, row)
		}
		rec.Release()
	}
	return nil
}

func describeWindow(ws *operators.WindowSpec) string {
	var s string
	switch ws.Kind {
	case operators.Tumbling:
		s = fmt.Sprintf("tumbling %s", ws.Size)
	case operators.Sliding:
		s = fmt.Sprintf("sliding %s every %s", ws.Size, ws.Slide)
	case operators.Session:
		s = fmt.Sprintf("session gap %s", ws.Gap)
	default:
		s = ws.Kind.String()
	}
	return fmt.Sprintf("%s, allowed lateness %s", s, ws.AllowedLateness)
}

// cellValue returns row i of a as a Go value (see StateRow).
func cellValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch c := a.(type) {
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return c.Value(i)
	case *array.Int8:
		return c.Value(i)
	case *array.Float64:
		return c.Value(i)
	case *array.Boolean:
		return c.Value(i)
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return c.Value(i).ToTime(unit).UTC()
	}
	return a.ValueStr(i)
}

// compareValue orders two values of one column: null first, then by value.
func compareValue(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		return cmp.Compare(x, b.(int64))
	case int32:
		return cmp.Compare(x, b.(int32))
	case int8:
		return cmp.Compare(x, b.(int8))
	case float64:
		return cmp.Compare(x, b.(float64))
	case bool:
		return cmp.Compare(boolInt(x), boolInt(b.(bool)))
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func compareRows(a, b StateRow) int {
	for i := range a.Key {
		if c := compareValue(a.Key[i], b.Key[i]); c != 0 {
			return c
		}
	}
	if c := cmp.Or(a.WindowStart.Compare(b.WindowStart), a.WindowEnd.Compare(b.WindowEnd)); c != 0 {
		return c
	}
	for i := range min(len(a.id), len(b.id)) {
		if c := compareValue(a.id[i], b.id[i]); c != 0 {
			return c
		}
	}
	return strings.Compare(a.ident, b.ident)
}

// valueText renders a value for cat and --key: null, RFC 3339 times,
// shortest exact floats, strings as they are.
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// fieldText is valueText for a name=value field: a string is quoted (Go
// syntax) when it is empty, "null", or holds spaces, '=', '"' or
// non-printable characters, so that a line splits on spaces.
func fieldText(v any) string {
	s, ok := v.(string)
	if !ok {
		return valueText(v)
	}
	if s == "" || s == "null" || strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == '=' || r == '"' || !unicode.IsPrint(r)
	}) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// jsonValue is a value for encoding/json: times in RFC 3339, non-finite
// floats as the strings "NaN", "+Inf", "-Inf".
func jsonValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return valueText(x)
		}
	}
	return v
}

// object is a JSON object that keeps its keys in order.
type object []field

type field struct {
	k string
	v any
}

// MarshalJSON encodes the fields in order.
func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func namedValues(names []string, vals []any) object {
	o := make(object, len(names))
	for i, n := range names {
		o[i] = field{n, jsonValue(vals[i])}
	}
	return o
}

// rowJSON is one row as cat --json writes it.
func (op *WindowState) rowJSON(r *StateRow) object {
	if !op.windowed() {
		return object{{"op", op.ID}, {"key", namedValues(op.Keys, r.Key)}, {"columns", op.columnsJSON(r)},
			{"key_group", r.KeyGroup}, {"subtask", r.Subtask}}
	}
	return object{{"op", op.ID}, {"key", namedValues(op.Keys, r.Key)},
		{"window_start", jsonValue(r.WindowStart)}, {"window_end", jsonValue(r.WindowEnd)},
		{"aggregates", namedValues(op.Aggregates, r.Values)}, {"key_group", r.KeyGroup}, {"subtask", r.Subtask}}
}

// rowText is one row as cat prints it (without the operator).
func (op *WindowState) rowText(r *StateRow) string {
	var b strings.Builder
	for i, k := range op.Keys {
		fmt.Fprintf(&b, "%s=%s ", k, fieldText(r.Key[i]))
	}
	if !op.windowed() {
		return op.columnsText(&b, r)
	}
	fmt.Fprintf(&b, "window_start=%s window_end=%s", valueText(r.WindowStart), valueText(r.WindowEnd))
	for i, a := range op.Aggregates {
		fmt.Fprintf(&b, " %s=%s", a, fieldText(r.Values[i]))
	}
	return b.String()
}

// WriteText prints the state for people: a "#" header per epoch and
// operator, then one line per key and window:
//
//	op=<id> <key>=<v>... window_start=<RFC 3339> window_end=<RFC 3339> <aggregate>=<v>... key_group=<g> subtask=<s>
func (v *StateView) WriteText(w io.Writer) error {
	bw := &errWriter{w: w}
	head := ""
	if v.Epoch == v.Head {
		head = ", the head"
	}
	bw.printf("# pipeline %s: epoch %d%s, generation %d, parallelism %d, %d key groups, watermark %s\n",
		v.Pipeline, v.Epoch, head, v.Generation, v.Parallelism, v.MaxParallelism, runner.FmtWM(v.Watermark))
	if len(v.Ops) == 0 {
		bw.printf("# no stateful operator\n")
	}
	for _, op := range v.Ops {
		if !op.windowed() {
			op.writeHeldText(bw)
			continue
		}
		aggs := make([]string, len(op.Aggregates))
		for i := range aggs {
			aggs[i] = op.Aggregates[i] + "=" + op.Exprs[i]
		}
		shown := fmt.Sprintf("%d windows", op.Total)
		if len(op.Rows) != op.Total {
			shown = fmt.Sprintf("%d of %d windows", len(op.Rows), op.Total)
		}
		bw.printf("# operator %s: %s; key [%s]; %s; emitted through %s; %s from %d state rows\n",
			op.ID, op.Window, strings.Join(op.Keys, ", "), strings.Join(aggs, " "), runner.FmtWM(op.EmittedThrough), shown, op.States)
		for i := range op.Rows {
			r := &op.Rows[i]
			bw.printf("op=%s %s key_group=%d subtask=%d\n", op.ID, op.rowText(r), r.KeyGroup, r.Subtask)
		}
	}
	return bw.err
}

// WriteJSON writes the state as one JSON document with one row per line:
//
//	{"pipeline":…,"epoch":…,"head":…,"generation":…,"parallelism":…,"max_parallelism":…,"watermark":…,
//	 "operators":[{"id":…,"window":…,"keys":[…],"aggregates":{name: expr},"emitted_through":…,
//	   "state_rows":…,"windows":…,"rows":[
//	 {"op":…,"key":{col: v},"window_start":…,"window_end":…,"aggregates":{name: v},"key_group":…,"subtask":…},
//	 …]}]}
//
// Times are RFC 3339 strings (the watermarks null when there is none).
func (v *StateView) WriteJSON(w io.Writer) error {
	bw := &errWriter{w: w}
	hdr := object{{"pipeline", v.Pipeline}, {"epoch", v.Epoch}, {"head", v.Head}, {"generation", v.Generation},
		{"parallelism", v.Parallelism}, {"max_parallelism", v.MaxParallelism}, {"watermark", wmJSON(v.Watermark)}}
	b, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	bw.printf("%s,\"operators\":[", b[:len(b)-1])
	for i, op := range v.Ops {
		if i > 0 {
			bw.printf(",")
		}
		aggs := make(object, len(op.Aggregates))
		for j := range aggs {
			aggs[j] = field{op.Aggregates[j], op.Exprs[j]}
		}
		oh := object{{"id", op.ID}, {"window", op.Window}, {"keys", op.Keys}, {"aggregates", aggs},
			{"emitted_through", wmJSON(op.EmittedThrough)}, {"state_rows", op.States}, {"windows", op.Total}}
		if !op.windowed() {
			oh = op.heldHeaderJSON()
		}
		if b, err = json.Marshal(oh); err != nil {
			return err
		}
		bw.printf("\n%s,\"rows\":[", b[:len(b)-1])
		for j := range op.Rows {
			if b, err = json.Marshal(op.rowJSON(&op.Rows[j])); err != nil {
				return err
			}
			sep := ","
			if j == len(op.Rows)-1 {
				sep = ""
			}
			bw.printf("\n%s%s", b, sep)
		}
		bw.printf("]}")
	}
	bw.printf("]}\n")
	return bw.err
}

func wmJSON(wm int64) any {
	switch wm {
	case math.MinInt64:
		return nil
	case math.MaxInt64:
		return "+inf"
	}
	return time.UnixMicro(wm).UTC().Format(time.RFC3339Nano)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// ---- diff ----

// StateDiff is what changed in the decoded state between two epochs.
type StateDiff struct {
	Pipeline  string
	From, To  EpochRef
	Identical bool
	Ops       []OpDiff
}

// EpochRef names one side of a diff.
type EpochRef struct {
	Epoch       int64 `json:"epoch"`
	Generation  int64 `json:"generation"`
	Parallelism int   `json:"parallelism"`
}

// OpDiff is one operator's difference: counts of windows (key and bounds)
// only in To (added), only in From (removed: emitted, or a session merged or
// moved), in both with other aggregates (changed) or the same (unchanged),
// and up to the sample size of each, in row order.
type OpDiff struct {
	ID               string
	Keys, Aggregates []string
	// Kind and Columns are as in WindowState: a dedup, top_n or join
	// stage's rows are compared by key and identity columns, their value
	// is all their columns.
	Kind                               string
	Columns                            []string
	Added, Removed, Changed, Unchanged int
	AddedRows, RemovedRows             []StateRow
	ChangedRows                        []RowChange
	op                                 *WindowState // the operator's header (no rows), for printing
}

// RowChange is a window present in both epochs with other aggregates.
type RowChange struct {
	Old, New StateRow
}

// DefaultDiffSample is how many rows of each kind DiffState keeps when
// sample is 0.
const DefaultDiffSample = 20

// DiffState decodes the state of epochs from and to (both retained, in any
// generations) and compares them window by window: a window is its
// operator, key and bounds; its value is its finalised aggregates. The key
// group and subtask are not compared (the same key keeps its key group; a
// rescale moves it to another subtask without changing anything logical).
func DiffState(ctx context.Context, p *spec.Pipeline, from, to int64, sample int) (*StateDiff, error) {
	if sample <= 0 {
		sample = DefaultDiffSample
	}
	x, err := newInspector(ctx, p)
	if err != nil {
		return nil, err
	}
	defer x.close()
	a, err := x.read(ctx, StateQuery{Epoch: from})
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	b, err := x.read(ctx, StateQuery{Epoch: to})
	if err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	d := &StateDiff{Pipeline: p.Name, Identical: true,
		From: EpochRef{a.Epoch, a.Generation, a.Parallelism}, To: EpochRef{b.Epoch, b.Generation, b.Parallelism}}
	ops := map[string][2]*WindowState{}
	var ids []string
	for i, v := range []*StateView{a, b} {
		for _, op := range v.Ops {
			pair, ok := ops[op.ID]
			if !ok {
				ids = append(ids, op.ID)
			}
			pair[i] = op
			ops[op.ID] = pair
		}
	}
	for _, id := range ids {
		od := diffOp(ops[id][0], ops[id][1], sample)
		if od.Added+od.Removed+od.Changed > 0 {
			d.Identical = false
		}
		d.Ops = append(d.Ops, od)
	}
	return d, nil
}

func diffOp(a, b *WindowState, sample int) OpDiff {
	ref := b
	if ref == nil {
		ref = a
	}
	hdr := *ref
	hdr.Rows = nil
	od := OpDiff{ID: ref.ID, Keys: ref.Keys, Aggregates: ref.Aggregates, Kind: ref.Kind, Columns: ref.Columns, op: &hdr}
	var old, cur []StateRow
	if a != nil {
		old = a.Rows
	}
	if b != nil {
		cur = b.Rows
	}
	byID := make(map[string]*StateRow, len(old))
	for i := range old {
		byID[old[i].ident] = &old[i]
	}
	for i := range cur {
		r := &cur[i]
		o, ok := byID[r.ident]
		switch {
		case !ok:
			od.Added++
			if len(od.AddedRows) < sample {
				od.AddedRows = append(od.AddedRows, *r)
			}
		case !ref.sameRow(o, r):
			od.Changed++
			if len(od.ChangedRows) < sample {
				od.ChangedRows = append(od.ChangedRows, RowChange{Old: *o, New: *r})
			}
		default:
			od.Unchanged++
		}
		if ok {
			delete(byID, r.ident)
		}
	}
	for i := range old { // in row order
		if _, gone := byID[old[i].ident]; gone {
			od.Removed++
			if len(od.RemovedRows) < sample {
				od.RemovedRows = append(od.RemovedRows, old[i])
			}
		}
	}
	return od
}

// header is the operator's header for printing the diff's rows.
func (od *OpDiff) header() *WindowState {
	if od.op != nil {
		return od.op
	}
	return &WindowState{ID: od.ID, Kind: od.Kind, Keys: od.Keys, Aggregates: od.Aggregates, Columns: od.Columns}
}

// sameRow compares two rows' values: all of a window's aggregates, a held
// row's columns but its arrival sequence.
func (op *WindowState) sameRow(a, b *StateRow) bool {
	if len(op.noCmp) == 0 {
		return sameValues(a.Values, b.Values)
	}
	if len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if !op.noCmp[i] && !sameValues(a.Values[i:i+1], b.Values[i:i+1]) {
			return false
		}
	}
	return true
}

// sameValues compares finalised aggregates exactly (floats by their bits,
// as printed; NaN equals NaN).
func sameValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || valueText(a[i]) != valueText(b[i]) {
			return false
		}
	}
	return true
}

// WriteText prints the diff for people:
//
//	# pipeline <name>: state of epoch <from> (generation g, parallelism p) -> epoch <to> (…)
//	operator <id>: <a> added, <r> removed, <c> changed, <u> unchanged
//	+ <key>=<v>... window_start=… window_end=… <aggregate>=<v>...        (added)
//	- …                                                                  (removed)
//	~ <key>=<v>... window_start=… window_end=… <aggregate>: <old> -> <new> ...   (changed; only what changed)
//	  … and N more added                                                 (beyond the sample)
//	identical | different
func (d *StateDiff) WriteText(w io.Writer) error {
	bw := &errWriter{w: w}
	ref := func(r EpochRef) string {
		return fmt.Sprintf("epoch %d (generation %d, parallelism %d)", r.Epoch, r.Generation, r.Parallelism)
	}
	bw.printf("# pipeline %s: state of %s -> %s\n", d.Pipeline, ref(d.From), ref(d.To))
	for _, od := range d.Ops {
		op := od.header()
		bw.printf("operator %s: %d added, %d removed, %d changed, %d unchanged\n", od.ID, od.Added, od.Removed, od.Changed, od.Unchanged)
		more := func(n, shown int, what string) {
			if n > shown {
				bw.printf("  … and %d more %s\n", n-shown, what)
			}
		}
		for i := range od.AddedRows {
			bw.printf("+ %s\n", op.rowText(&od.AddedRows[i]))
		}
		more(od.Added, len(od.AddedRows), "added")
		for i := range od.RemovedRows {
			bw.printf("- %s\n", op.rowText(&od.RemovedRows[i]))
		}
		more(od.Removed, len(od.RemovedRows), "removed")
		for _, c := range od.ChangedRows {
			if !op.windowed() {
				bw.printf("~ %s\n", op.changeText(&c))
				continue
			}
			var b strings.Builder
			for i, k := range od.Keys {
				fmt.Fprintf(&b, "%s=%s ", k, fieldText(c.New.Key[i]))
			}
			fmt.Fprintf(&b, "window_start=%s window_end=%s", valueText(c.New.WindowStart), valueText(c.New.WindowEnd))
			for i, a := range od.Aggregates {
				if !sameValues(c.Old.Values[i:i+1], c.New.Values[i:i+1]) {
					fmt.Fprintf(&b, " %s: %s -> %s", a, fieldText(c.Old.Values[i]), fieldText(c.New.Values[i]))
				}
			}
			bw.printf("~ %s\n", b.String())
		}
		more(od.Changed, len(od.ChangedRows), "changed")
	}
	if d.Identical {
		bw.printf("identical\n")
	} else {
		bw.printf("different\n")
	}
	return bw.err
}

// WriteJSON writes the diff as one indented JSON document:
//
//	{"pipeline":…,"from":{"epoch","generation","parallelism"},"to":{…},"identical":bool,
//	 "operators":[{"id":…,"added":n,"removed":n,"changed":n,"unchanged":n,
//	   "added_rows":[row…],"removed_rows":[row…],
//	   "changed_rows":[{"key":{…},"window_start":…,"window_end":…,"old":{aggregate: v},"new":{…}}]}]}
//
// A row is as in cat --json; the *_rows lists are the bounded samples.
func (d *StateDiff) WriteJSON(w io.Writer) error {
	ops := make([]object, 0, len(d.Ops))
	for _, od := range d.Ops {
		op := od.header()
		rows := func(rs []StateRow) []object {
			out := make([]object, len(rs))
			for i := range rs {
				out[i] = op.rowJSON(&rs[i])
			}
			return out
		}
		changed := make([]object, len(od.ChangedRows))
		for i, c := range od.ChangedRows {
			if !op.windowed() {
				changed[i] = op.changeJSON(&c)
				continue
			}
			changed[i] = object{{"key", namedValues(od.Keys, c.New.Key)}, {"window_start", jsonValue(c.New.WindowStart)},
				{"window_end", jsonValue(c.New.WindowEnd)}, {"old", namedValues(od.Aggregates, c.Old.Values)},
				{"new", namedValues(od.Aggregates, c.New.Values)}}
		}
		ops = append(ops, object{{"id", od.ID}, {"added", od.Added}, {"removed", od.Removed}, {"changed", od.Changed},
			{"unchanged", od.Unchanged}, {"added_rows", rows(od.AddedRows)}, {"removed_rows", rows(od.RemovedRows)},
			{"changed_rows", changed}})
	}
	doc := object{{"pipeline", d.Pipeline}, {"from", d.From}, {"to", d.To}, {"identical", d.Identical}, {"operators", ops}}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// ---- export ----

// ExportSchema is the schema of Parquet: one row per key and window of one
// operator, with columns
//
//	operator      string     the operator id
//	<key columns> their input types (string, int64, int32, float64, bool, timestamp)
//	window_start  timestamp[us, UTC]
//	window_end    timestamp[us, UTC]
//	<aggregates>  count, count_distinct: int64; sum: int64 or float64; avg: float64;
//	              min, max, first, last: the column's type; null when the window has no value
//	key_group     int32
//	subtask       int32      the owning subtask in the epoch's generation
//
// A key or aggregate already called operator or subtask makes floe's column
// _operator / _subtask (and so on, with more underscores).
func (op *WindowState) ExportSchema() *arrow.Schema {
	taken := map[string]bool{}
	for _, f := range op.schema.Fields() {
		taken[f.Name] = true
	}
	name := func(n string) string {
		for taken[n] {
			n = "_" + n
		}
		return n
	}
	fields := []arrow.Field{{Name: name("operator"), Type: arrow.BinaryTypes.String}}
	fields = append(fields, op.schema.Fields()...)
	fields = append(fields, arrow.Field{Name: operators.ColKeyGroup, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: name("subtask"), Type: arrow.PrimitiveTypes.Int32})
	return arrow.NewSchema(fields, nil)
}

// Parquet encodes the view's rows (one operator) as a Parquet file of
// ExportSchema, in row order. A pipeline without stateful operators is an
// error.
func (v *StateView) Parquet() ([]byte, error) {
	switch len(v.Ops) {
	case 0:
		return nil, fmt.Errorf("pipeline %s has no stateful operator: nothing to export", v.Pipeline)
	case 1:
	default:
		ids := make([]string, len(v.Ops))
		for i, op := range v.Ops {
			ids[i] = op.ID
		}
		return nil, fmt.Errorf("export one operator at a time (--op): pipeline %s keeps state in %s", v.Pipeline, strings.Join(ids, ", "))
	}
	op := v.Ops[0]
	schema := op.ExportSchema()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var batches []arrow.RecordBatch
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	for i := range op.Rows {
		r := &op.Rows[i]
		b.Field(0).(*array.StringBuilder).Append(op.ID)
		col := 1
		for _, val := range r.Key {
			if err := appendValue(b.Field(col), val); err != nil {
				return nil, fmt.Errorf("export %s: key column %s: %w", op.ID, op.Keys[col-1], err)
			}
			col++
		}
		if op.windowed() {
			_ = appendValue(b.Field(col), r.WindowStart)
			_ = appendValue(b.Field(col+1), r.WindowEnd)
			col += 2
		}
		for j, val := range r.Values {
			if err := appendValue(b.Field(col), val); err != nil {
				what := "column " + schema.Field(col).Name
				if op.windowed() {
					what = "aggregate " + op.Aggregates[j]
				}
				return nil, fmt.Errorf("export %s: %s: %w", op.ID, what, err)
			}
			col++
		}
		b.Field(col).(*array.Int32Builder).Append(int32(r.KeyGroup))
		b.Field(col + 1).(*array.Int32Builder).Append(int32(r.Subtask))
		if (i+1)%formats.DefaultRowGroupRows == 0 {
			batches = append(batches, b.NewRecordBatch())
		}
	}
	batches = append(batches, b.NewRecordBatch())
	return formats.EncodeParquet(schema, batches, formats.EncodeOptions{})
}

// appendValue appends a StateRow value to the builder of its column.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.StringBuilder:
		if s, ok := v.(string); ok {
			bb.Append(s)
			return nil
		}
	case *array.LargeStringBuilder:
		if s, ok := v.(string); ok {
			bb.Append(s)
			return nil
		}
	case *array.Int64Builder:
		if x, ok := v.(int64); ok {
			bb.Append(x)
			return nil
		}
	case *array.Int32Builder:
		if x, ok := v.(int32); ok {
			bb.Append(x)
			return nil
		}
	case *array.Int8Builder:
		if x, ok := v.(int8); ok {
			bb.Append(x)
			return nil
		}
	case *array.Float64Builder:
		if x, ok := v.(float64); ok {
			bb.Append(x)
			return nil
		}
	case *array.BooleanBuilder:
		if x, ok := v.(bool); ok {
			bb.Append(x)
			return nil
		}
	case *array.TimestampBuilder:
		if t, ok := v.(time.Time); ok {
			ts, err := arrow.TimestampFromTime(t, bb.Type().(*arrow.TimestampType).Unit)
			if err != nil {
				return err
			}
			bb.Append(ts)
			return nil
		}
	}
	return fmt.Errorf("value %v (%T) does not fit column type %s", v, v, b.Type())
}
