package engine_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/spec"
)

// inspectSpec keeps one 24-hour window per user open while each epoch (one
// file) touches three users: the state is bases plus deltas.
const inspectSpec = `
name: inspect
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1,
         watermark: {max_out_of_orderness: 0s}}
operators:
  - filter: "bytes >= 0"
  - window: {key: [user_id], tumbling: 24h, allowed_lateness: 0s,
             aggregates: {clicks: "count()", pages: "count_distinct(page)", total: "sum(bytes)", lo: "min(bytes)",
                          hi: "max(bytes)", mean: "avg(bytes)", first_page: "first(page)", last_page: "last(page)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2, retain_epochs: 5}
`

type inspectEvent struct {
	t     time.Time
	user  string
	page  string
	bytes int64
}

// inspectFile is file i of the test input: three users, times increasing
// across files, no two rows at the same time.
func inspectFile(i int) []inspectEvent {
	var evs []inspectEvent
	for j := range 3 {
		evs = append(evs, inspectEvent{
			t:    time.Date(2024, 1, 1, i, j*10, 0, 0, time.UTC),
			user: fmt.Sprintf("u%02d", (i*5+j*7)%20), page: fmt.Sprintf("/p%d", (i+j)%3), bytes: int64((i*3 + j) % 11)})
	}
	return evs
}

func putEvents(t *testing.T, e *env, name string, evs []inspectEvent) {
	var lines []string
	for _, ev := range evs {
		lines = append(lines, fmt.Sprintf(`{"event_time":"%s","user_id":"%s","page":"%s","bytes":%d}`,
			ev.t.Format(time.RFC3339), ev.user, ev.page, ev.bytes))
	}
	e.put(t, name, jsonl(lines...))
}

// expectState computes, independently of floe, each user's finalised
// aggregates over evs (one 24 h window, rows with bytes < 0 filtered out),
// as cat would print them.
func expectState(evs []inspectEvent) map[string]string {
	type acc struct {
		n, sum, lo, hi int64
		pages          map[string]bool
		first, last    inspectEvent
	}
	by := map[string]*acc{}
	for _, ev := range evs {
		if ev.bytes < 0 {
			continue
		}
		a := by[ev.user]
		if a == nil {
			a = &acc{lo: math.MaxInt64, hi: math.MinInt64, pages: map[string]bool{}, first: ev, last: ev}
			by[ev.user] = a
		}
		a.n++
		a.sum += ev.bytes
		a.lo, a.hi = min(a.lo, ev.bytes), max(a.hi, ev.bytes)
		a.pages[ev.page] = true
		if ev.t.Before(a.first.t) {
			a.first = ev
		}
		if !ev.t.Before(a.last.t) {
			a.last = ev
		}
	}
	out := map[string]string{}
	for u, a := range by {
		out[u] = fmt.Sprintf("[2024-01-01T00:00:00Z 2024-01-02T00:00:00Z] %d %d %d %d %d %g %s %s",
			a.n, len(a.pages), a.sum, a.lo, a.hi, float64(a.sum)/float64(a.n), a.first.page, a.last.page)
	}
	return out
}

// gotState renders a decoded state like expectState.
func gotState(t *testing.T, v *engine.StateView) map[string]string {
	t.Helper()
	if len(v.Ops) != 1 {
		t.Fatalf("operators: %d", len(v.Ops))
	}
	out := map[string]string{}
	for _, r := range v.Ops[0].Rows {
		u := r.Key[0].(string)
		if _, dup := out[u]; dup {
			t.Fatalf("user %s listed twice", u)
		}
		vals := make([]string, len(r.Values))
		for i, x := range r.Values {
			vals[i] = fmt.Sprint(x)
		}
		out[u] = fmt.Sprintf("[%s %s] %s", r.WindowStart.Format(time.RFC3339), r.WindowEnd.Format(time.RFC3339), strings.Join(vals, " "))
		if got := keygroup.SubtaskOf(r.KeyGroup, v.Parallelism, v.MaxParallelism); got != r.Subtask {
			t.Errorf("%s: key group %d is subtask %d at parallelism %d, row says %d", u, r.KeyGroup, got, v.Parallelism, r.Subtask)
		}
	}
	return out
}

func readState(t *testing.T, p *spec.Pipeline, q engine.StateQuery) *engine.StateView {
	t.Helper()
	v, err := engine.ReadState(context.Background(), p, q)
	if err != nil {
		t.Fatalf("state at epoch %d: %v", q.Epoch, err)
	}
	return v
}

func diffState(t *testing.T, p *spec.Pipeline, from, to int64) *engine.StateDiff {
	t.Helper()
	d, err := engine.DiffState(context.Background(), p, from, to, 0)
	if err != nil {
		t.Fatalf("diff %d -> %d: %v", from, to, err)
	}
	return d
}

func sameMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %q", what, k, got[k])
		}
	}
}

func users(rows []engine.StateRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Key[0].(string))
	}
	slices.Sort(out)
	return out
}

func changedUsers(cs []engine.RowChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.New.Key[0].(string))
	}
	slices.Sort(out)
	return out
}

// touched returns, for the events of files [from, to), the users they touch
// that existed before (changed) and those that did not (added).
func touched(before, epoch []inspectEvent) (added, changed []string) {
	old := map[string]bool{}
	for _, e := range before {
		old[e.user] = true
	}
	seen := map[string]bool{}
	for _, e := range epoch {
		if e.bytes < 0 || seen[e.user] {
			continue
		}
		seen[e.user] = true
		if old[e.user] {
			changed = append(changed, e.user)
		} else {
			added = append(added, e.user)
		}
	}
	slices.Sort(added)
	slices.Sort(changed)
	return added, changed
}

// TestStateCatDiffExport: the decoded state of retained epochs (bases plus
// deltas, across a rescale 2 -> 5) equals aggregates computed from the
// input independently; diff shows exactly the windows an epoch touched and
// nothing across a rescale that changed nothing; the export reads back with
// a plain Parquet reader; cat of the last epoch is what a drain emits.
func TestStateCatDiffExport(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, inspectSpec)
	var files [][]inspectEvent
	for i := range 6 {
		files = append(files, inspectFile(i))
		putEvents(t, e, fmt.Sprintf("f-%03d.jsonl", i), files[i])
	}
	upTo := func(n int) []inspectEvent { return slices.Concat(files[:n]...) }
	if res := run(t, p, engine.Options{}); res.LastEpoch != 6 {
		t.Fatalf("head %d, want 6", res.LastEpoch)
	}
	chain := headChain(t, p, 10)
	var deltas int
	for _, m := range chain {
		deltas += len(m.Operators[0].Deltas)
	}
	if deltas == 0 {
		t.Fatalf("no epoch has deltas: the test would not exercise base + delta restore")
	}

	for _, n := range []int64{3, 6} {
		v := readState(t, p, engine.StateQuery{Epoch: n})
		if v.Epoch != n || v.Generation != 1 || v.Parallelism != 2 {
			t.Fatalf("epoch %d: read epoch %d generation %d parallelism %d", n, v.Epoch, v.Generation, v.Parallelism)
		}
		sameMap(t, fmt.Sprintf("epoch %d", n), gotState(t, v), expectState(upTo(int(n))))
	}
	head := readState(t, p, engine.StateQuery{})
	if head.Epoch != 6 {
		t.Fatalf("default epoch %d, want the head 6", head.Epoch)
	}
	one := readState(t, p, engine.StateQuery{Keys: []string{"u05", "u07"}})
	if got := users(one.Ops[0].Rows); !slices.Equal(got, []string{"u05", "u07"}) || one.Ops[0].Total != len(head.Ops[0].Rows) {
		t.Fatalf("--key u05 --key u07: %v (of %d)", got, one.Ops[0].Total)
	}

	d := diffState(t, p, 3, 6)
	added, changed := touched(upTo(3), slices.Concat(files[3:6]...))
	od := d.Ops[0]
	if d.Identical || od.Removed != 0 || !slices.Equal(users(od.AddedRows), added) || !slices.Equal(changedUsers(od.ChangedRows), changed) ||
		od.Added != len(added) || od.Changed != len(changed) || od.Unchanged != len(expectState(upTo(3)))-len(changed) {
		t.Fatalf("diff 3 -> 6: %+v\nwant added %v changed %v", od, added, changed)
	}
	if d := diffState(t, p, 6, 6); !d.Identical {
		t.Fatalf("epoch 6 differs from itself: %+v", d.Ops)
	}

	// Rescale 2 -> 5 on a file whose rows are all filtered out: a new
	// generation, the same logical state.
	files = append(files, []inspectEvent{{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), user: "u01", page: "/x", bytes: -1}})
	putEvents(t, e, "f-006.jsonl", files[6])
	run(t, p, engine.Options{Parallelism: 5})
	d = diffState(t, p, 6, 7)
	if !d.Identical || d.From.Generation != 1 || d.To.Generation != 2 || d.From.Parallelism != 2 || d.To.Parallelism != 5 {
		t.Fatalf("diff across the rescale: %+v", d)
	}
	if od := d.Ops[0]; od.Unchanged != len(expectState(upTo(6))) {
		t.Fatalf("diff across the rescale: %d unchanged, want %d", od.Unchanged, len(expectState(upTo(6))))
	}
	files = append(files, []inspectEvent{
		{t: time.Date(2024, 1, 1, 7, 0, 0, 0, time.UTC), user: "u00", page: "/p9", bytes: 10},
		{t: time.Date(2024, 1, 1, 7, 1, 0, 0, time.UTC), user: "u99", page: "/p1", bytes: 3}})
	putEvents(t, e, "f-007.jsonl", files[7])
	run(t, p, engine.Options{Parallelism: 5})
	v8 := readState(t, p, engine.StateQuery{Epoch: 8})
	if v8.Generation != 2 || v8.Parallelism != 5 {
		t.Fatalf("epoch 8: generation %d parallelism %d", v8.Generation, v8.Parallelism)
	}
	sameMap(t, "epoch 8", gotState(t, v8), expectState(upTo(8)))
	for _, from := range []int64{6, 7} { // within generation 2, and across generations
		od := diffState(t, p, from, 8).Ops[0]
		if od.Removed != 0 || !slices.Equal(users(od.AddedRows), []string{"u99"}) || !slices.Equal(changedUsers(od.ChangedRows), []string{"u00"}) {
			t.Fatalf("diff %d -> 8: %+v", from, od)
		}
		c := od.ChangedRows[0]
		if c.Old.Values[0] != int64(len(slices.DeleteFunc(upTo(6), func(e inspectEvent) bool { return e.user != "u00" }))) ||
			c.New.Values[0] != c.Old.Values[0].(int64)+1 {
			t.Fatalf("diff %d -> 8: u00 clicks %v -> %v", from, c.Old.Values[0], c.New.Values[0])
		}
	}

	// Export: one Parquet table, read back with a plain reader.
	data, err := v8.Parquet()
	if err != nil {
		t.Fatal(err)
	}
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	wantCols := "operator user_id window_start window_end clicks pages total lo hi mean first_page last_page key_group subtask"
	if strings.Join(names, " ") != wantCols {
		t.Fatalf("export columns %v, want %s", names, wantCols)
	}
	exp := map[string]string{}
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			col := func(n string) arrow.Array { return rec.Column(schema.FieldIndices(n)[0]) }
			if op := col("operator").(*array.String).Value(i); op != v8.Ops[0].ID {
				t.Fatalf("operator %q", op)
			}
			ws := col("window_start").(*array.Timestamp).Value(i).ToTime(arrow.Microsecond).UTC()
			exp[col("user_id").(*array.String).Value(i)] = fmt.Sprintf("%s %d %d %g %d/%d", ws.Format(time.RFC3339),
				col("clicks").(*array.Int64).Value(i), col("total").(*array.Int64).Value(i), col("mean").(*array.Float64).Value(i),
				col("key_group").(*array.Int32).Value(i), col("subtask").(*array.Int32).Value(i))
		}
		rec.Release()
	}
	want := map[string]string{}
	for _, r := range v8.Ops[0].Rows {
		want[r.Key[0].(string)] = fmt.Sprintf("%s %d %d %g %d/%d", r.WindowStart.Format(time.RFC3339), r.Values[0], r.Values[2], r.Values[5], r.KeyGroup, r.Subtask)
	}
	sameMap(t, "export", exp, want)

	// Errors name what exists.
	if _, err := engine.ReadState(context.Background(), p, engine.StateQuery{Epoch: 1}); err == nil ||
		!strings.Contains(err.Error(), "epoch 1 is not retained") || !strings.Contains(err.Error(), "retained epochs are 4..8") {
		t.Fatalf("epoch 1: %v", err)
	}
	if _, err := engine.ReadState(context.Background(), p, engine.StateQuery{Epoch: 9}); err == nil || !strings.Contains(err.Error(), "4..8") {
		t.Fatalf("epoch 9: %v", err)
	}
	if _, err := engine.ReadState(context.Background(), p, engine.StateQuery{Op: "nope"}); err == nil || !strings.Contains(err.Error(), v8.Ops[0].ID) {
		t.Fatalf("unknown op: %v", err)
	}

	// What cat shows is what a drain emits.
	before := committedRows(t, p)
	run(t, p, engine.Options{Parallelism: 5, Drain: true})
	assertCatIsDrain(t, p, v8, before)
}

// assertCatIsDrain checks that the rows a drain just emitted (committed
// rows not in before) are exactly the state v decoded.
func assertCatIsDrain(t *testing.T, p *spec.Pipeline, v *engine.StateView, before []string) {
	t.Helper()
	var emitted []string
	old := map[string]int{}
	for _, r := range before {
		old[r]++
	}
	for _, r := range committedRows(t, p) {
		if old[r] > 0 {
			old[r]--
			continue
		}
		emitted = append(emitted, r)
	}
	var cat []string
	op := v.Ops[0]
	for _, r := range op.Rows {
		var parts []string
		for i, k := range op.Keys {
			parts = append(parts, k+"="+cell(r.Key[i]))
		}
		parts = append(parts, "window_start="+r.WindowStart.Format(time.RFC3339), "window_end="+r.WindowEnd.Format(time.RFC3339))
		for i, a := range op.Aggregates {
			parts = append(parts, a+"="+cell(r.Values[i]))
		}
		cat = append(cat, strings.Join(parts, ","))
	}
	slices.Sort(cat)
	slices.Sort(emitted)
	if len(cat) == 0 || !slices.Equal(cat, emitted) {
		t.Fatalf("cat (%d rows) is not what the drain emitted (%d rows):\ncat:\n%s\ndrain:\n%s", len(cat), len(emitted),
			strings.Join(cat, "\n"), strings.Join(emitted, "\n"))
	}
}

// cell renders a value as recordRows (helpers_test.go) renders Arrow cells.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return array.NullValueStr
	case float64:
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.Append(x)
		a := b.NewArray()
		defer a.Release()
		return a.ValueStr(0)
	case time.Time:
		return x.Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}

// TestStateCatIsWhatDrainEmits: for tumbling (with lateness), sliding and
// session windows, the rows cat decodes at the head (restored at another
// parallelism than they were written, through deltas) are exactly the rows
// a drain then emits.
func TestStateCatIsWhatDrainEmits(t *testing.T) {
	for _, tc := range []struct{ name, window string }{
		{"tumbling", `tumbling: 5m, allowed_lateness: 1m`},
		{"sliding", `sliding: {size: 10m, slide: 2m}`},
		{"session", `session: {gap: 3m}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fileEnv(t)
			p := e.pipeline(t, `
name: kinds
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1, watermark: {max_out_of_orderness: 2m}}
operators:
  - window: {key: [user_id, page], `+tc.window+`,
             aggregates: {n: "count()", s: "sum(bytes)", a: "avg(bytes)", f: "first(bytes)", l: "last(page)", d: "count_distinct(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 3}
`)
			for i := range 8 {
				var lines []string
				for j := range 5 {
					m := i*3 + j%4
					lines = append(lines, fmt.Sprintf(`{"event_time":"2024-01-01T00:%02d:%02dZ","user_id":"u%d","page":"/p%d","bytes":%d}`,
						m, j*7, (i+j)%4, j%2, (i*j)%5))
				}
				e.put(t, fmt.Sprintf("f-%03d.jsonl", i), jsonl(lines...))
			}
			run(t, p, engine.Options{UntilEpoch: 5})
			run(t, p, engine.Options{Parallelism: 2})
			v := readState(t, p, engine.StateQuery{})
			if v.Epoch != 8 || v.Parallelism != 2 {
				t.Fatalf("head epoch %d parallelism %d", v.Epoch, v.Parallelism)
			}
			// --key on two key columns: the values joined by ",".
			key := v.Ops[0].Rows[len(v.Ops[0].Rows)/2].Key
			text := key[0].(string) + "," + key[1].(string)
			sel := readState(t, p, engine.StateQuery{Keys: []string{text}})
			var want int
			for _, r := range v.Ops[0].Rows {
				if r.KeyText() == text {
					want++
				}
			}
			if len(sel.Ops[0].Rows) != want || want == 0 {
				t.Fatalf("--key %s: %d rows, want %d", text, len(sel.Ops[0].Rows), want)
			}
			for _, r := range sel.Ops[0].Rows {
				if r.Key[0] != key[0] || r.Key[1] != key[1] {
					t.Fatalf("--key %s selected %v", text, r.Key)
				}
			}
			before := committedRows(t, p)
			run(t, p, engine.Options{Parallelism: 4, Drain: true})
			assertCatIsDrain(t, p, v, before)
		})
	}
}
