package operators

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/floe-dev/floe/internal/aggsyntax"
)

// AggFunc is an aggregate function.
type AggFunc int

// The aggregate functions. Nulls are ignored by all of them except count().
const (
	AggCount         AggFunc = iota + 1 // count() counts rows; count(col) counts non-null values
	AggSum                              // sum(col): int32/int64 -> int64, float64 -> float64
	AggMin                              // min(col): the column type
	AggMax                              // max(col): the column type
	AggAvg                              // avg(col): float64
	AggCountDistinct                    // count_distinct(col): int64, number of distinct non-null values
	AggFirst                            // first(col): value with the smallest event time; ties: earliest arrival
	AggLast                             // last(col): value with the largest event time; ties: latest arrival
)

var aggFuncNames = []struct {
	name string
	fn   AggFunc
}{
	{"count", AggCount}, {"sum", AggSum}, {"min", AggMin}, {"max", AggMax}, {"avg", AggAvg},
	{"count_distinct", AggCountDistinct}, {"first", AggFirst}, {"last", AggLast},
}

// String returns the function's name as written in a pipeline spec.
func (f AggFunc) String() string {
	for _, n := range aggFuncNames {
		if n.fn == f {
			return n.name
		}
	}
	return fmt.Sprintf("AggFunc(%d)", int(f))
}

// AggSpec is one aggregate of a window: output column Name = Func(Column).
type AggSpec struct {
	Name   string  // output column name
	Func   AggFunc // the function
	Column string  // input column; empty only for count()
	// RenamedFrom, when set, is the aggregate's name in the state being
	// restored (spec `renamed_from:`): PlanStateEvolution keeps that
	// aggregate's state under Name. It does not change the window's state
	// layout or fingerprint, and is ignored when the restored state has no
	// aggregate of that name but has one named Name (the rename happened in
	// an earlier run).
	RenamedFrom string
}

// String returns the aggregate as an expression, e.g. "sum(bytes)".
func (a AggSpec) String() string { return a.Func.String() + "(" + a.Column + ")" }

// ParseAggregate parses an aggregate expression such as "count()", "sum(bytes)"
// or " count_distinct ( user_id ) " for the output column name. The grammar
// and its error messages are those of the spec (package aggsyntax, the one
// definition): function names are case-insensitive and "count(*)" means
// "count()". Errors read "aggregate <name>: <aggsyntax message>".
func ParseAggregate(name, expr string) (AggSpec, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return AggSpec{}, fmt.Errorf("aggregate %q: empty output column name", expr)
	}
	fname, col, err := aggsyntax.Parse(expr)
	if err != nil {
		return AggSpec{}, fmt.Errorf("aggregate %s: %w", name, err)
	}
	for _, n := range aggFuncNames {
		if n.name == fname {
			return AggSpec{Name: name, Func: n.fn, Column: col}, nil
		}
	}
	// Unreachable while aggFuncNames lists every aggsyntax function;
	// TestAggFuncsMatchGrammar checks that.
	return AggSpec{}, fmt.Errorf("aggregate %s: function %q has no implementation", name, fname)
}

// updateBatch is the input of one accumulator update: rows[j] of the batch is
// added to slot slots[j].
type updateBatch struct {
	col   arrow.Array // the aggregate's input column; nil for count()
	ts    []arrow.Timestamp
	seq0  int64 // arrival sequence number of row 0
	rows  []int32
	slots []int32
}

// accumulator holds one aggregate's state for every slot (open key+window) in
// typed slices. Every method works on a whole batch so the per-row work has no
// interface calls.
type accumulator interface {
	grow(n int)            // make slots [0,n) addressable; new slots are empty
	reset(slot int32)      // empty a slot for reuse
	merge(dst, src int32)  // fold src into dst (session merges)
	update(u *updateBatch) // add rows
	resultType() arrow.DataType
	appendResults(b array.Builder, slots []int32) error
	stateFields(name string) []arrow.Field
	appendState(bs []array.Builder, slots []int32) error
	// restore sets slots[j] from row rows[j] of the state columns and returns
	// the largest arrival sequence number it saw (or -1).
	restore(cols []arrow.Array, rows, slots []int32) (int64, error)
}

type value interface {
	~int32 | ~int64 | ~float64 | ~string
}

type validity struct {
	bm  []byte
	off int
}

func validityOf(a arrow.Array) validity {
	if a.NullN() == 0 {
		return validity{}
	}
	return validity{bm: a.NullBitmapBytes(), off: a.Data().Offset()}
}

func (v validity) ok(i int32) bool {
	return v.bm == nil || bitutil.BitIsSet(v.bm, v.off+int(i))
}

// valuesOf returns the values of arr as []T (string columns are copied into
// scratch as string headers pointing into the Arrow buffer: clone to keep).
func valuesOf[T value](arr arrow.Array, scratch *[]string) ([]T, error) {
	var v any
	switch a := arr.(type) {
	case *array.Int64:
		v = a.Int64Values()
	case *array.Int32:
		v = a.Int32Values()
	case *array.Float64:
		v = a.Float64Values()
	case *array.Timestamp:
		v = a.TimestampValues()
	case *array.String:
		s := (*scratch)[:0]
		for i := 0; i < a.Len(); i++ {
			s = append(s, a.Value(i))
		}
		*scratch = s
		v = s
	}
	out, ok := v.([]T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("column type %s does not hold %T", arr.DataType(), zero)
	}
	return out, nil
}

// appendValues appends vals[s] (or null when !valid(s)) for each slot.
func appendValues[T value](b array.Builder, vals []T, valid func(int32) bool, slots []int32) error {
	// Gather the slots' values (and validity) first, then append them in
	// bulk: the slots are in output order, so each read is random, and a
	// loop of bare loads keeps many of their cache misses in flight, where
	// a builder call per value would keep few.
	out := make([]T, len(slots))
	for j, s := range slots {
		out[j] = vals[s]
	}
	var ok []bool
	if valid != nil {
		ok = make([]bool, len(slots))
		for j, s := range slots {
			ok[j] = valid(s)
		}
	}
	switch bb := b.(type) {
	case *array.Int64Builder:
		if vs, is := any(out).([]int64); is {
			bb.AppendValues(vs, ok)
			return nil
		}
	case *array.Int32Builder:
		if vs, is := any(out).([]int32); is {
			bb.AppendValues(vs, ok)
			return nil
		}
	case *array.Float64Builder:
		if vs, is := any(out).([]float64); is {
			bb.AppendValues(vs, ok)
			return nil
		}
	case *array.TimestampBuilder:
		switch vs := any(out).(type) {
		case []arrow.Timestamp:
			bb.AppendValues(vs, ok)
			return nil
		case []int64:
			ts := make([]arrow.Timestamp, len(vs))
			for j, v := range vs {
				ts[j] = arrow.Timestamp(v)
			}
			bb.AppendValues(ts, ok)
			return nil
		}
	case *array.StringBuilder:
		if vs, is := any(out).([]string); is {
			bb.AppendValues(vs, ok)
			return nil
		}
	}
	var zero T
	return fmt.Errorf("cannot append %T to %T", zero, b)
}

func growTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	old := len(s)
	s = slices.Grow(s, n-old)[:n]
	clear(s[old:])
	return s
}

func identity[T any](v T) T { return v }

// newAccumulator builds the accumulator of spec over a column of type dt (nil
// for count()).
func newAccumulator(spec AggSpec, dt arrow.DataType) (accumulator, error) {
	bad := func(want string) error {
		return fmt.Errorf("aggregate %s = %s: column %q has type %s; %s needs %s", spec.Name, spec, spec.Column, dt, spec.Func, want)
	}
	if spec.Func == AggCount {
		return &countAcc{star: spec.Column == ""}, nil
	}
	id := dt.ID()
	if ts, ok := dt.(*arrow.TimestampType); ok && ts.Unit != arrow.Microsecond {
		id = arrow.NULL // unsupported unit
	}
	switch spec.Func {
	case AggCountDistinct:
		k := kindOf(dt)
		if k == tagOther {
			return nil, bad("int64, int32, float64, string, bool or timestamp[us]")
		}
		return newDistinctAcc(k), nil
	case AggSum, AggAvg:
		avg := spec.Func == AggAvg
		switch id {
		case arrow.INT32:
			return &intSumAcc[int32]{avg: avg}, nil
		case arrow.INT64:
			return &intSumAcc[int64]{avg: avg}, nil
		case arrow.FLOAT64:
			return &sumAcc[float64, float64]{avg: avg, dt: arrow.PrimitiveTypes.Float64}, nil
		}
		return nil, bad("int32, int64 or float64")
	case AggMin, AggMax:
		max := spec.Func == AggMax
		switch id {
		case arrow.INT32:
			return &minMaxAcc[int32]{max: max, dt: dt, clone: identity[int32]}, nil
		case arrow.INT64:
			return &minMaxAcc[int64]{max: max, dt: dt, clone: identity[int64]}, nil
		case arrow.FLOAT64:
			return &minMaxAcc[float64]{max: max, dt: dt, clone: identity[float64]}, nil
		case arrow.TIMESTAMP:
			return &minMaxAcc[arrow.Timestamp]{max: max, dt: dt, clone: identity[arrow.Timestamp]}, nil
		case arrow.STRING:
			return &minMaxAcc[string]{max: max, dt: dt, clone: strings.Clone}, nil
		}
		return nil, bad("int32, int64, float64, string or timestamp[us]")
	case AggFirst, AggLast:
		last := spec.Func == AggLast
		switch id {
		case arrow.INT32:
			return &firstLastAcc[int32]{last: last, dt: dt, clone: identity[int32]}, nil
		case arrow.INT64:
			return &firstLastAcc[int64]{last: last, dt: dt, clone: identity[int64]}, nil
		case arrow.FLOAT64:
			return &firstLastAcc[float64]{last: last, dt: dt, clone: identity[float64]}, nil
		case arrow.TIMESTAMP:
			return &firstLastAcc[arrow.Timestamp]{last: last, dt: dt, clone: identity[arrow.Timestamp]}, nil
		case arrow.STRING:
			return &firstLastAcc[string]{last: last, dt: dt, clone: strings.Clone}, nil
		}
		return nil, bad("int32, int64, float64, string or timestamp[us]")
	}
	return nil, fmt.Errorf("aggregate %s: unknown function %v", spec.Name, spec.Func)
}

// ---- count ----

type countAcc struct {
	star bool
	n    []int64
}

func (a *countAcc) grow(n int)           { a.n = growTo(a.n, n) }
func (a *countAcc) reset(s int32)        { a.n[s] = 0 }
func (a *countAcc) merge(dst, src int32) { a.n[dst] += a.n[src] }
func (a *countAcc) update(u *updateBatch) {
	if a.star || u.col.NullN() == 0 {
		for _, s := range u.slots {
			a.n[s]++
		}
		return
	}
	v := validityOf(u.col)
	for j, r := range u.rows {
		if v.ok(r) {
			a.n[u.slots[j]]++
		}
	}
}
func (a *countAcc) resultType() arrow.DataType { return arrow.PrimitiveTypes.Int64 }
func (a *countAcc) appendResults(b array.Builder, slots []int32) error {
	return appendValues(b, a.n, nil, slots)
}
func (a *countAcc) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name, Type: arrow.PrimitiveTypes.Int64}}
}
func (a *countAcc) appendState(bs []array.Builder, slots []int32) error {
	return appendValues(bs[0], a.n, nil, slots)
}
func (a *countAcc) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	n, err := valuesOf[int64](cols[0], nil)
	if err != nil {
		return -1, err
	}
	for j, r := range rows {
		a.n[slots[j]] = n[r]
	}
	return -1, nil
}

// ---- sum / avg ----

type sumAcc[T int32 | int64 | float64, R int64 | float64] struct {
	avg bool
	dt  arrow.DataType // of R
	sum []R
	n   []int64
}

func (a *sumAcc[T, R]) grow(n int)    { a.sum, a.n = growTo(a.sum, n), growTo(a.n, n) }
func (a *sumAcc[T, R]) reset(s int32) { a.sum[s], a.n[s] = 0, 0 }
func (a *sumAcc[T, R]) merge(dst, src int32) {
	a.sum[dst] += a.sum[src]
	a.n[dst] += a.n[src]
}
func (a *sumAcc[T, R]) update(u *updateBatch) {
	vals, err := valuesOf[T](u.col, nil)
	if err != nil {
		return // excluded by NewWindow's type check
	}
	sum, n := a.sum, a.n
	if u.col.NullN() == 0 {
		for j, r := range u.rows {
			s := u.slots[j]
			sum[s] += R(vals[r])
			n[s]++
		}
		return
	}
	v := validityOf(u.col)
	for j, r := range u.rows {
		if v.ok(r) {
			s := u.slots[j]
			sum[s] += R(vals[r])
			n[s]++
		}
	}
}
func (a *sumAcc[T, R]) resultType() arrow.DataType {
	if a.avg {
		return arrow.PrimitiveTypes.Float64
	}
	return a.dt
}
func (a *sumAcc[T, R]) has(s int32) bool { return a.n[s] > 0 }
func (a *sumAcc[T, R]) appendResults(b array.Builder, slots []int32) error {
	if !a.avg {
		return appendValues(b, a.sum, a.has, slots)
	}
	fb, ok := b.(*array.Float64Builder)
	if !ok {
		return fmt.Errorf("avg: cannot append to %T", b)
	}
	for _, s := range slots {
		if a.n[s] == 0 {
			fb.AppendNull()
		} else {
			fb.Append(float64(a.sum[s]) / float64(a.n[s]))
		}
	}
	return nil
}
func (a *sumAcc[T, R]) stateFields(name string) []arrow.Field {
	return []arrow.Field{
		{Name: name + ".sum", Type: a.dt},
		{Name: name + ".count", Type: arrow.PrimitiveTypes.Int64},
	}
}
func (a *sumAcc[T, R]) appendState(bs []array.Builder, slots []int32) error {
	if err := appendValues(bs[0], a.sum, nil, slots); err != nil {
		return err
	}
	return appendValues(bs[1], a.n, nil, slots)
}
func (a *sumAcc[T, R]) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	sum, err := valuesOf[R](cols[0], nil)
	if err != nil {
		return -1, err
	}
	n, err := valuesOf[int64](cols[1], nil)
	if err != nil {
		return -1, err
	}
	for j, r := range rows {
		a.sum[slots[j]], a.n[slots[j]] = sum[r], n[r]
	}
	return -1, nil
}

// ---- exact integer sum / avg ----

// intSumAcc sums integers exactly in 128 bits (lo wraps, hi counts the
// wraps), so avg never overflows and sum is never silently wrong: a sum that
// does not fit int64 is emitted as null. Merge order does not matter.
type intSumAcc[T int32 | int64] struct {
	avg    bool
	lo, hi []int64
	n      []int64
}

// add128 adds x to (hi, lo).
func add128(hi, lo *int64, x int64) {
	nw := *lo + x
	if x > 0 && nw < *lo {
		*hi++
	} else if x < 0 && nw > *lo {
		*hi--
	}
	*lo = nw
}

func (a *intSumAcc[T]) grow(n int) {
	a.lo, a.hi, a.n = growTo(a.lo, n), growTo(a.hi, n), growTo(a.n, n)
}
func (a *intSumAcc[T]) reset(s int32) { a.lo[s], a.hi[s], a.n[s] = 0, 0, 0 }
func (a *intSumAcc[T]) merge(dst, src int32) {
	add128(&a.hi[dst], &a.lo[dst], a.lo[src])
	a.hi[dst] += a.hi[src]
	a.n[dst] += a.n[src]
}
func (a *intSumAcc[T]) update(u *updateBatch) {
	vals, err := valuesOf[T](u.col, nil)
	if err != nil {
		return // excluded by NewWindow's type check
	}
	lo, hi, n := a.lo, a.hi, a.n
	if u.col.NullN() == 0 {
		for j, r := range u.rows {
			s := u.slots[j]
			add128(&hi[s], &lo[s], int64(vals[r]))
			n[s]++
		}
		return
	}
	v := validityOf(u.col)
	for j, r := range u.rows {
		if v.ok(r) {
			s := u.slots[j]
			add128(&hi[s], &lo[s], int64(vals[r]))
			n[s]++
		}
	}
}
func (a *intSumAcc[T]) resultType() arrow.DataType {
	if a.avg {
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.PrimitiveTypes.Int64
}
func (a *intSumAcc[T]) appendResults(b array.Builder, slots []int32) error {
	if !a.avg {
		ib, ok := b.(*array.Int64Builder)
		if !ok {
			return fmt.Errorf("sum: cannot append to %T", b)
		}
		// Gathered, then appended in bulk (see appendValues). A slot
		// without values, or whose sum is beyond int64, is null.
		sums, valid := make([]int64, len(slots)), make([]bool, len(slots))
		for j, s := range slots {
			sums[j], valid[j] = a.lo[s], a.n[s] != 0 && a.hi[s] == 0
		}
		ib.AppendValues(sums, valid)
		return nil
	}
	fb, ok := b.(*array.Float64Builder)
	if !ok {
		return fmt.Errorf("avg: cannot append to %T", b)
	}
	for _, s := range slots {
		if a.n[s] == 0 {
			fb.AppendNull()
		} else {
			fb.Append((float64(a.hi[s])*0x1p64 + float64(a.lo[s])) / float64(a.n[s]))
		}
	}
	return nil
}
func (a *intSumAcc[T]) stateFields(name string) []arrow.Field {
	return []arrow.Field{
		{Name: name + ".sum", Type: arrow.PrimitiveTypes.Int64},
		{Name: name + ".sum_hi", Type: arrow.PrimitiveTypes.Int64},
		{Name: name + ".count", Type: arrow.PrimitiveTypes.Int64},
	}
}
func (a *intSumAcc[T]) appendState(bs []array.Builder, slots []int32) error {
	if err := appendValues(bs[0], a.lo, nil, slots); err != nil {
		return err
	}
	if err := appendValues(bs[1], a.hi, nil, slots); err != nil {
		return err
	}
	return appendValues(bs[2], a.n, nil, slots)
}
func (a *intSumAcc[T]) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	var vs [3][]int64
	for i := range vs {
		v, err := valuesOf[int64](cols[i], nil)
		if err != nil {
			return -1, err
		}
		vs[i] = v
	}
	for j, r := range rows {
		a.lo[slots[j]], a.hi[slots[j]], a.n[slots[j]] = vs[0][r], vs[1][r], vs[2][r]
	}
	return -1, nil
}

// ---- min / max ----

type minMaxAcc[T value] struct {
	max     bool
	dt      arrow.DataType
	clone   func(T) T
	v       []T
	has     []bool
	scratch []string
}

func (a *minMaxAcc[T]) grow(n int) { a.v, a.has = growTo(a.v, n), growTo(a.has, n) }
func (a *minMaxAcc[T]) reset(s int32) {
	var zero T
	a.v[s], a.has[s] = zero, false
}
func (a *minMaxAcc[T]) better(x, cur T) bool {
	if a.max {
		return sqlLess(cur, x)
	}
	return sqlLess(x, cur)
}

// sqlLess orders values as SQL engines do (DuckDB, PostgreSQL): a float
// NaN above every number, so min ignores NaN unless every value is NaN and
// max is NaN when any value is (cmp.Less puts NaN below every number).
func sqlLess[T value](a, b T) bool {
	if a != a { // NaN
		return false
	}
	if b != b {
		return true
	}
	return a < b
}
func (a *minMaxAcc[T]) merge(dst, src int32) {
	if a.has[src] && (!a.has[dst] || a.better(a.v[src], a.v[dst])) {
		a.v[dst], a.has[dst] = a.v[src], true
	}
}
func (a *minMaxAcc[T]) update(u *updateBatch) {
	vals, err := valuesOf[T](u.col, &a.scratch)
	if err != nil {
		return
	}
	v := validityOf(u.col)
	for j, r := range u.rows {
		if !v.ok(r) {
			continue
		}
		s, x := u.slots[j], vals[r]
		if !a.has[s] || a.better(x, a.v[s]) {
			a.v[s], a.has[s] = a.clone(x), true
		}
	}
}
func (a *minMaxAcc[T]) resultType() arrow.DataType { return a.dt }
func (a *minMaxAcc[T]) valid(s int32) bool         { return a.has[s] }
func (a *minMaxAcc[T]) appendResults(b array.Builder, slots []int32) error {
	return appendValues(b, a.v, a.valid, slots)
}
func (a *minMaxAcc[T]) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name, Type: a.dt, Nullable: true}}
}
func (a *minMaxAcc[T]) appendState(bs []array.Builder, slots []int32) error {
	return appendValues(bs[0], a.v, a.valid, slots)
}
func (a *minMaxAcc[T]) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	vals, err := valuesOf[T](cols[0], &a.scratch)
	if err != nil {
		return -1, err
	}
	v := validityOf(cols[0])
	for j, r := range rows {
		if v.ok(r) {
			a.v[slots[j]], a.has[slots[j]] = a.clone(vals[r]), true
		}
	}
	return -1, nil
}

// ---- first / last ----

type firstLastAcc[T value] struct {
	last    bool
	dt      arrow.DataType
	clone   func(T) T
	v       []T
	has     []bool
	ts      []int64
	seq     []int64
	scratch []string
}

func (a *firstLastAcc[T]) grow(n int) {
	a.v, a.has, a.ts, a.seq = growTo(a.v, n), growTo(a.has, n), growTo(a.ts, n), growTo(a.seq, n)
}
func (a *firstLastAcc[T]) reset(s int32) {
	var zero T
	a.v[s], a.has[s], a.ts[s], a.seq[s] = zero, false, 0, 0
}

// better reports whether (t, q) should replace slot s's current value.
func (a *firstLastAcc[T]) better(t, q int64, s int32) bool {
	if !a.has[s] {
		return true
	}
	if a.last {
		return t > a.ts[s] || (t == a.ts[s] && q > a.seq[s])
	}
	return t < a.ts[s] || (t == a.ts[s] && q < a.seq[s])
}
func (a *firstLastAcc[T]) merge(dst, src int32) {
	if a.has[src] && a.better(a.ts[src], a.seq[src], dst) {
		a.v[dst], a.has[dst], a.ts[dst], a.seq[dst] = a.v[src], true, a.ts[src], a.seq[src]
	}
}
func (a *firstLastAcc[T]) update(u *updateBatch) {
	vals, err := valuesOf[T](u.col, &a.scratch)
	if err != nil {
		return
	}
	v := validityOf(u.col)
	for j, r := range u.rows {
		if !v.ok(r) {
			continue
		}
		s, t, q := u.slots[j], int64(u.ts[r]), u.seq0+int64(r)
		if a.better(t, q, s) {
			a.v[s], a.has[s], a.ts[s], a.seq[s] = a.clone(vals[r]), true, t, q
		}
	}
}
func (a *firstLastAcc[T]) resultType() arrow.DataType { return a.dt }
func (a *firstLastAcc[T]) valid(s int32) bool         { return a.has[s] }
func (a *firstLastAcc[T]) appendResults(b array.Builder, slots []int32) error {
	return appendValues(b, a.v, a.valid, slots)
}
func (a *firstLastAcc[T]) stateFields(name string) []arrow.Field {
	return []arrow.Field{
		{Name: name, Type: a.dt, Nullable: true},
		{Name: name + ".ts", Type: eventTimeType, Nullable: true},
		{Name: name + ".seq", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
}
func (a *firstLastAcc[T]) appendState(bs []array.Builder, slots []int32) error {
	if err := appendValues(bs[0], a.v, a.valid, slots); err != nil {
		return err
	}
	if err := appendValues(bs[1], a.ts, a.valid, slots); err != nil {
		return err
	}
	return appendValues(bs[2], a.seq, a.valid, slots)
}
func (a *firstLastAcc[T]) restore(cols []arrow.Array, rows, slots []int32) (int64, error) {
	vals, err := valuesOf[T](cols[0], &a.scratch)
	if err != nil {
		return -1, err
	}
	ts, err := valuesOf[arrow.Timestamp](cols[1], nil)
	if err != nil {
		return -1, err
	}
	seq, err := valuesOf[int64](cols[2], nil)
	if err != nil {
		return -1, err
	}
	maxSeq := int64(-1)
	v, vt, vq := validityOf(cols[0]), validityOf(cols[1]), validityOf(cols[2])
	for j, r := range rows {
		if !v.ok(r) {
			continue
		}
		if !vt.ok(r) || !vq.ok(r) {
			return -1, fmt.Errorf("row %d: value without event time or sequence", r)
		}
		s := slots[j]
		a.v[s], a.has[s], a.ts[s], a.seq[s] = a.clone(vals[r]), true, int64(ts[r]), seq[r]
		maxSeq = max(maxSeq, seq[r])
	}
	return maxSeq, nil
}
