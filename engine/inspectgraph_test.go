package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// visitsGraph: one source; a keep-first dedup per user (10 min scopes)
// feeding a 24 h window per user. visitsTopGraph: a top-2 by bytes per
// user and day over the same source. With max_out_of_orderness 0 and rows
// in time order, what each stage holds at an epoch follows from the files
// read so far and the stage's watermark (visitsExpect).
const visitsGraph = `
name: visits
sources:
  clicks:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {ts: timestamp, user: string, bytes: int64}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 0s}
stages:
  - {name: nonneg, input: clicks, filter: "bytes >= 0"}
  - {name: first-visit, input: nonneg, dedup: {key: [user], keep: first, within: 10m}}
  - name: per-user
    input: first-visit
    window: {key: [user], tumbling: 24h, aggregates: {visits: "count()", lo: "min(bytes)"}}
sinks:
  out: {input: per-user, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`

const visitsTopGraph = `
name: visits-top
sources:
  clicks:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {ts: timestamp, user: string, bytes: int64}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 0s}
stages:
  - {name: top, input: clicks, top_n: {n: 2, key: [user], order_by: [bytes desc], tumbling: 24h}}
sinks:
  out: {input: top, type: files, url: "{{late}}", format: jsonl}
state: {url: "{{state}}/top", parallelism: 2}
`

type visit struct {
	t     time.Time
	user  string
	bytes int64
}

var visitBase = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// visitFile is file i: four clicks of users u0..u5 (distinct bytes), then
// one click of a user of its own (tick-i), the file's latest row.
func visitFile(i int) []visit {
	var out []visit
	for j := range 4 {
		out = append(out, visit{visitBase.Add(time.Duration(i*4)*time.Minute + time.Duration(j*50)*time.Second),
			fmt.Sprintf("u%d", (i*3+j)%6), int64(i*10 + j)})
	}
	return append(out, visit{visitBase.Add(time.Duration(i*4)*time.Minute + 210*time.Second), fmt.Sprintf("tick-%d", i), int64(i*10 + 9)})
}

func putVisits(t *testing.T, g *graphEnv, i int, vs []visit) {
	var lines []string
	for _, v := range vs {
		lines = append(lines, fmt.Sprintf(`{"ts":"%s","user":"%s","bytes":%d}`, v.t.Format(time.RFC3339), v.user, v.bytes))
	}
	dir := strings.TrimPrefix(g.bids, "file://")
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f-%03d.jsonl", i)), jsonl(lines...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// visitsExpect derives, from the clicks read and each stage's watermark,
// what every keyed stage of visitsGraph holds, rendered as heldRows and
// windowRows render the decoded state.
func visitsExpect(vs []visit, dedupWM int64) map[string][]string {
	const within = 10 * time.Minute
	cut := time.UnixMicro(dedupWM).UTC()
	byUser := map[string][]visit{}
	for _, v := range vs {
		byUser[v.user] = append(byUser[v.user], v)
	}
	out := map[string][]string{}
	type agg struct{ n, lo int64 }
	win := map[string]*agg{}
	for u, evs := range byUser {
		sort.Slice(evs, func(i, j int) bool { return evs[i].t.Before(evs[j].t) })
		// Greedy scopes: the first row at or after the open scope's end
		// opens the next one. A scope opens (and keep: first emits its
		// row) once the cutoff passed its start; it is held until the
		// cutoff reaches its end. A row at or after the cutoff outside
		// an open scope waits.
		var start time.Time
		open := false
		for _, e := range evs {
			if open && e.t.Before(start.Add(within)) {
				continue // a duplicate in the scope
			}
			if !e.t.Before(cut) {
				out["first-visit"] = append(out["first-visit"], fmt.Sprintf("%s pending=true time=%s bytes=%d", u, e.t.Format(time.RFC3339), e.bytes))
				continue
			}
			start, open = e.t, true
			a := win[u]
			if a == nil {
				a = &agg{lo: e.bytes}
				win[u] = a
			}
			a.n++
			a.lo = min(a.lo, e.bytes)
		}
		if open && start.Add(within).After(cut) {
			out["first-visit"] = append(out["first-visit"], fmt.Sprintf("%s pending=false time=%s bytes=(null)", u, start.Format(time.RFC3339)))
		}
		// top 2 by bytes, per user and day
		top := slices.Clone(evs)
		sort.Slice(top, func(i, j int) bool { return top[i].bytes > top[j].bytes })
		for i, e := range top[:min(2, len(top))] {
			out["top"] = append(out["top"], fmt.Sprintf("%s [2024-01-01T00:00:00Z 2024-01-02T00:00:00Z] rank=%d bytes=%d", u, i+1, e.bytes))
		}
	}
	for u, a := range win {
		out["per-user"] = append(out["per-user"], fmt.Sprintf("%s [2024-01-01T00:00:00Z 2024-01-02T00:00:00Z] visits=%d lo=%d", u, a.n, a.lo))
	}
	for _, rows := range out {
		slices.Sort(rows)
	}
	return out
}

// values renders a row's values but the arrival sequences (a rescale
// renumbers them).
func values(op *engine.WindowState, r *engine.StateRow) string {
	var out []string
	for i, v := range r.Values {
		if i < len(op.Columns) && strings.HasSuffix(op.Columns[i], "seq") {
			continue
		}
		out = append(out, cell(v))
	}
	return strings.Join(out, " ")
}

// col returns the value of a held row's column name.
func col(t *testing.T, op *engine.WindowState, r *engine.StateRow, name string) any {
	t.Helper()
	i := slices.Index(op.Columns, name)
	if i < 0 {
		t.Fatalf("stage %s has no column %q: %v", op.ID, name, op.Columns)
	}
	return r.Values[i]
}

// visitsGot renders the decoded state like visitsExpect, checking every
// row's key group and subtask on the way.
func visitsGot(t *testing.T, v *engine.StateView) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, op := range v.Ops {
		for i := range op.Rows {
			r := &op.Rows[i]
			u := r.Key[0].(string)
			if kg := keygroup.Of(userKey(u), v.MaxParallelism); kg != r.KeyGroup {
				t.Errorf("%s %s: key group %d, want %d", op.ID, u, r.KeyGroup, kg)
			}
			if s := keygroup.SubtaskOf(r.KeyGroup, v.Parallelism, v.MaxParallelism); s != r.Subtask {
				t.Errorf("%s %s: key group %d is subtask %d at parallelism %d, row says %d", op.ID, u, r.KeyGroup, s, v.Parallelism, r.Subtask)
			}
			var line string
			switch op.Kind {
			case "dedup":
				tm := col(t, op, r, "dedup.time").(time.Time)
				line = fmt.Sprintf("%s pending=%v time=%s bytes=%s", u, col(t, op, r, "dedup.pending"), tm.Format(time.RFC3339), cell(col(t, op, r, "bytes")))
			case "top_n":
				ws, we := col(t, op, r, "window_start").(time.Time), col(t, op, r, "window_end").(time.Time)
				line = fmt.Sprintf("%s [%s %s] rank=%v bytes=%v", u, ws.Format(time.RFC3339), we.Format(time.RFC3339), col(t, op, r, "topn.rank"), col(t, op, r, "bytes"))
			case "window":
				line = fmt.Sprintf("%s [%s %s] visits=%v lo=%v", u, r.WindowStart.Format(time.RFC3339), r.WindowEnd.Format(time.RFC3339), r.Values[0], r.Values[1])
			default:
				t.Fatalf("stage %s: kind %q", op.ID, op.Kind)
			}
			out[op.ID] = append(out[op.ID], line)
		}
		slices.Sort(out[op.ID])
	}
	return out
}

// userKey is the key encoding of a one-string-column key (operators.SerializeKey).
func userKey(u string) []byte {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(u)
	a := b.NewArray()
	defer a.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{a}, 1)
	defer rec.Release()
	return operators.SerializeKey(nil, rec, 0, []int{0})
}

// TestInspectGraphState: the state tools on a graph pipeline run across
// rescales 2 -> 3 -> 1: at every retained epoch each keyed stage's decoded
// state (dedup scopes and waiting rows, window aggregates, top-n rows)
// equals what the input read so far implies; diff across a rescale counts
// what changed; --op selects a stage; an unknown stage names the keyed
// ones; export writes each stage's table.
func TestInspectGraphState(t *testing.T) {
	ctx := context.Background()
	g := newGraphEnv(t)
	p, pt := g.pipelineFrom(t, visitsGraph), g.pipelineFrom(t, visitsTopGraph)
	var files [][]visit
	for i := range 6 {
		files = append(files, visitFile(i))
		putVisits(t, g, i, files[i])
	}
	upTo := func(n int64) []visit { return slices.Concat(files[:n]...) }
	for _, q := range []*spec.Pipeline{p, pt} {
		run(t, q, engine.Options{UntilEpoch: 2})
		run(t, q, engine.Options{UntilEpoch: 4, Parallelism: 3})
		run(t, q, engine.Options{Parallelism: 1})
	}

	views, tops := map[int64]*engine.StateView{}, map[int64]*engine.StateView{}
	for n := int64(1); n <= 6; n++ {
		v := readState(t, p, engine.StateQuery{Epoch: n})
		views[n] = v
		tops[n] = readState(t, pt, engine.StateQuery{Epoch: n})
		wantP := map[bool]int{true: 2, false: 3}[n <= 2]
		if n > 4 {
			wantP = 1
		}
		if v.Epoch != n || v.Parallelism != wantP {
			t.Fatalf("epoch %d: read epoch %d at parallelism %d, want %d", n, v.Epoch, v.Parallelism, wantP)
		}
		var ids []string
		for _, op := range v.Ops {
			ids = append(ids, op.ID+"/"+op.Kind)
		}
		if got := strings.Join(ids, " "); got != "first-visit/dedup per-user/window" {
			t.Fatalf("epoch %d: stages %s", n, got)
		}
		// The dedup's watermark is the source's: its latest click.
		last := files[n-1][len(files[n-1])-1].t
		if wm := v.Ops[0].EmittedThrough; wm != last.UnixMicro() {
			t.Fatalf("epoch %d: dedup watermark %s, want %s", n, time.UnixMicro(wm).UTC(), last)
		}
		want := visitsExpect(upTo(n), v.Ops[0].EmittedThrough)
		got := visitsGot(t, v)
		if tv := tops[n]; len(tv.Ops) != 1 || tv.Parallelism != wantP {
			t.Fatalf("epoch %d: visits-top: %d stages at parallelism %d", n, len(tv.Ops), tv.Parallelism)
		}
		got["top"] = visitsGot(t, tops[n])["top"]
		for _, id := range []string{"first-visit", "per-user", "top"} {
			if len(want[id]) == 0 {
				t.Fatalf("epoch %d: the input implies no state for %s: the test checks nothing", n, id)
			}
			if !slices.Equal(got[id], want[id]) {
				t.Errorf("epoch %d (parallelism %d), stage %s:\n got %q\nwant %q", n, v.Parallelism, id, got[id], want[id])
			}
		}
		if v.Ops[0].States != len(v.Ops[0].Rows) {
			t.Errorf("epoch %d: dedup holds %d state rows, shows %d", n, v.Ops[0].States, len(v.Ops[0].Rows))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// --op and --key.
	one := readState(t, p, engine.StateQuery{Epoch: 4, Op: "first-visit", Keys: []string{"u5"}})
	if len(one.Ops) != 1 || one.Ops[0].ID != "first-visit" || len(one.Ops[0].Rows) != 1 || one.Ops[0].Total != len(views[4].Ops[0].Rows) {
		t.Fatalf("--op first-visit --key u5: %+v", one.Ops)
	}
	for _, r := range one.Ops[0].Rows {
		if r.KeyText() != "u5" {
			t.Fatalf("--key u5 selected %v", r.Key)
		}
	}

	// Diff: within a generation and across the rescales, the counts are
	// those of the two epochs' rows by identity (a dedup row: key, pending,
	// time; a window: key and bounds; a top-n row: key, window, arrival).
	ident := func(op *engine.WindowState, r *engine.StateRow) string {
		switch op.Kind {
		case "dedup":
			return fmt.Sprint(r.Key, col(t, op, r, "dedup.pending"), col(t, op, r, "dedup.time"))
		case "top_n":
			return fmt.Sprint(r.Key, col(t, op, r, "window_start"), col(t, op, r, "topn.rank"))
		}
		return fmt.Sprint(r.Key, r.WindowStart)
	}
	for _, ft := range [][2]int64{{1, 2}, {2, 3}, {3, 6}, {4, 5}} {
		for q, vs := range map[*spec.Pipeline]map[int64]*engine.StateView{p: views, pt: tops} {
			d := diffState(t, q, ft[0], ft[1])
			if d.Identical || d.From.Parallelism != vs[ft[0]].Parallelism || d.To.Parallelism != vs[ft[1]].Parallelism {
				t.Fatalf("diff %v: identical %v, parallelism %d -> %d", ft, d.Identical, d.From.Parallelism, d.To.Parallelism)
			}
			for i, od := range d.Ops {
				a, b := vs[ft[0]].Ops[i], vs[ft[1]].Ops[i]
				old := map[string]string{}
				for j := range a.Rows {
					old[ident(a, &a.Rows[j])] = values(a, &a.Rows[j])
				}
				var added, changed, same int
				for j := range b.Rows {
					o, ok := old[ident(b, &b.Rows[j])]
					switch {
					case !ok:
						added++
					case o != values(b, &b.Rows[j]):
						changed++
					default:
						same++
					}
				}
				removed := len(a.Rows) - changed - same
				if od.ID != a.ID || od.Added != added || od.Removed != removed || od.Changed != changed || od.Unchanged != same {
					t.Errorf("diff %v, stage %s: +%d -%d ~%d =%d, want +%d -%d ~%d =%d", ft, od.ID, od.Added, od.Removed, od.Changed, od.Unchanged,
						added, removed, changed, same)
				}
			}
		}
	}
	if d := diffState(t, p, 5, 5); !d.Identical {
		t.Fatalf("epoch 5 differs from itself: %+v", d.Ops)
	}
	// Epoch 5 read the keep-first scopes of u-users from files 0..4; a
	// scope closing (removed) and a visit count growing (changed) show.
	var buf bytes.Buffer
	if err := diffState(t, p, 3, 6).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	txt := buf.String()
	for _, w := range []string{"operator first-visit: ", "operator per-user: ", "\n- user=", "\n~ user=", " visits: ", "\ndifferent\n"} {
		if !strings.Contains(txt, w) {
			t.Errorf("diff 3 -> 6 text lacks %q:\n%s", w, txt)
		}
	}

	// Text and JSON.
	buf.Reset()
	v6 := views[6]
	if err := v6.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	txt = buf.String()
	for _, w := range []string{
		"# pipeline visits: epoch 6, the head, generation 3, parallelism 1",
		"\n# operator first-visit: dedup keep first within 10m0s, allowed lateness 0s; key [user]; watermark 2024-01-01T00:23:30Z; ",
		"\n# operator per-user: tumbling 24h0m0s, allowed lateness 0s; key [user]; visits=count() lo=min(bytes); emitted through ",
		"\nop=first-visit user=tick-5 dedup.pending=true dedup.time=2024-01-01T00:23:30Z dedup.seq=",
		" ts=2024-01-01T00:23:30Z bytes=59 key_group=",
	} {
		if !strings.Contains(txt, w) {
			t.Errorf("cat text lacks %q:\n%s", w, txt)
		}
	}
	if n := strings.Count(txt, "\nop="); n != len(v6.Ops[0].Rows)+len(v6.Ops[1].Rows) {
		t.Errorf("cat text: %d rows", n)
	}
	buf.Reset()
	if err := v6.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Operators []struct {
			ID      string   `json:"id"`
			Kind    string   `json:"kind"`
			Columns []string `json:"columns"`
			Rows    []struct {
				Key     map[string]any `json:"key"`
				Columns map[string]any `json:"columns"`
			} `json:"rows"`
		} `json:"operators"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || len(doc.Operators) != 2 {
		t.Fatalf("cat --json: %v\n%s", err, buf.String())
	}
	if o := doc.Operators[0]; o.Kind != "dedup" || len(o.Rows) != len(v6.Ops[0].Rows) || o.Rows[0].Columns["dedup.pending"] == nil ||
		!slices.Equal(o.Columns, []string{"dedup.pending", "dedup.time", "dedup.seq", "ts", "bytes"}) {
		t.Fatalf("cat --json, dedup: %+v", o)
	}

	// Rescale 1 -> 2 on a file whose rows are all filtered out: a new
	// generation, the same logical state (arrival sequences renumbered or
	// not, nothing differs).
	putVisits(t, g, 6, []visit{{visitBase, "u0", -1}})
	run(t, p, engine.Options{Parallelism: 2})
	d7 := diffState(t, p, 6, 7)
	if !d7.Identical || d7.From.Generation != 3 || d7.To.Generation != 4 || d7.To.Parallelism != 2 ||
		d7.Ops[0].Unchanged != len(v6.Ops[0].Rows) || d7.Ops[1].Unchanged != len(v6.Ops[1].Rows) {
		t.Fatalf("diff across the rescale 1 -> 2: %+v", d7)
	}
	if v7 := readState(t, p, engine.StateQuery{Epoch: 7}); v7.Parallelism != 2 || !slices.Equal(visitsGot(t, v7)["first-visit"], visitsGot(t, v6)["first-visit"]) {
		t.Fatalf("epoch 7 at parallelism %d: %v", v7.Parallelism, visitsGot(t, v7))
	}

	// Errors name the keyed stages.
	for op, want := range map[string]string{
		"nope":   `unknown stage "nope": the keyed stages are first-visit, per-user`,
		"nonneg": `stage "nonneg" (filter) keeps no state: the keyed stages are first-visit, per-user`,
		"clicks": `"clicks" is a source, not a stage: the keyed stages are`,
	} {
		if _, err := engine.ReadState(ctx, p, engine.StateQuery{Op: op}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--op %s: %v, want %q", op, err, want)
		}
	}
	if _, err := v6.Parquet(); err == nil || !strings.Contains(err.Error(), "(--op): pipeline visits keeps state in first-visit, per-user") {
		t.Errorf("export of three stages: %v", err)
	}

	// Export: one stage's table, read back with a plain reader.
	for i, wantCols := range []string{
		"operator user dedup.pending dedup.time dedup.seq ts bytes key_group subtask",
		"operator user window_start window_end visits lo key_group subtask",
		"operator user window_start window_end topn.rank topn.seq ts bytes key_group subtask",
	} {
		q, op := p, (*engine.WindowState)(nil)
		if i < 2 {
			op = v6.Ops[i]
		} else {
			q, op = pt, tops[6].Ops[0]
		}
		sv := readState(t, q, engine.StateQuery{Epoch: 6, Op: op.ID})
		data, err := sv.Parquet()
		if err != nil {
			t.Fatalf("export %s: %v", op.ID, err)
		}
		schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("export %s: %v", op.ID, err)
		}
		var names []string
		for _, f := range schema.Fields() {
			names = append(names, f.Name)
		}
		if strings.Join(names, " ") != wantCols {
			t.Errorf("export %s: columns %v, want %s", op.ID, names, wantCols)
		}
		var got []string
		for _, rec := range recs {
			for _, line := range recordRows(rec) {
				got = append(got, line)
			}
			rec.Release()
		}
		var want []string
		for j := range op.Rows {
			r := &op.Rows[j]
			parts := []string{op.ID, cell(r.Key[0])}
			if op.Kind == "window" {
				parts = append(parts, cell(r.WindowStart), cell(r.WindowEnd))
			}
			for _, x := range r.Values {
				parts = append(parts, cell(x))
			}
			parts = append(parts, fmt.Sprint(r.KeyGroup), fmt.Sprint(r.Subtask))
			for k := range parts {
				parts[k] = names[k] + "=" + parts[k]
			}
			want = append(want, strings.Join(parts, ","))
		}
		if !slices.Equal(got, want) {
			t.Errorf("export %s:\n got %q\nwant %q", op.ID, got, want)
		}
	}
}

// TestInspectGraphJoin: the auction graph (dedup, windowed join, window,
// top-n) run across rescales 2 -> 3 holds, at every epoch, the same
// logical state as an uninterrupted run at parallelism 1 (only subtasks
// differ); the join holds exactly the auctions whose window is still open
// at its watermark, each on the right side with only the right columns.
func TestInspectGraphJoin(t *testing.T) {
	ref, e := newGraphEnv(t), newGraphEnv(t)
	pr, pe := ref.pipelineFrom(t, auctionGraph), e.pipelineFrom(t, auctionGraph)
	all := auctionFiles(8)
	auctions := map[int64]time.Time{} // the auctions read so far: id -> ts
	logical := func(v *engine.StateView) []string {
		var out []string
		for _, op := range v.Ops {
			for _, r := range op.Rows {
				out = append(out, fmt.Sprint(op.ID, r.Key, r.WindowStart, r.WindowEnd, values(op, &r), r.KeyGroup))
			}
		}
		return out
	}
	var rows int
	held := map[string]int{}
	for n, par := range []int{2, 2, 3, 3, 3, 1, 1, 1} {
		// One file of each source per epoch: epoch n+1 reads pair n.
		for _, g := range []*graphEnv{ref, e} {
			for _, src := range []string{"auctions", "bids"} {
				dir := strings.TrimPrefix(map[string]string{"auctions": g.auctions, "bids": g.bids}[src], "file://")
				name := fmt.Sprintf("f-%03d.jsonl", n)
				if err := os.WriteFile(filepath.Join(dir, name), all[src+"/"+name], 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, l := range strings.Split(strings.TrimSpace(string(all[fmt.Sprintf("auctions/f-%03d.jsonl", n)])), "\n") {
			var a struct {
				ID int64     `json:"id"`
				TS time.Time `json:"ts"`
			}
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatal(err)
			}
			auctions[a.ID] = a.TS
		}
		run(t, pr, engine.Options{Parallelism: 1})
		run(t, pe, engine.Options{Parallelism: par})
		a, b := readState(t, pr, engine.StateQuery{}), readState(t, pe, engine.StateQuery{})
		if a.Epoch != int64(n+1) || b.Epoch != a.Epoch || b.Parallelism != par {
			t.Fatalf("pair %d: heads %d and %d (parallelism %d), want epoch %d", n, a.Epoch, b.Epoch, b.Parallelism, n+1)
		}
		if la, lb := logical(a), logical(b); !slices.Equal(la, lb) {
			t.Fatalf("epoch %d: parallelism 1 and %d hold different state:\n%s", b.Epoch, par,
				diffLines(strings.Join(la, "\n"), strings.Join(lb, "\n")))
		}
		rows += len(logical(a))
		byID := map[string]*engine.WindowState{}
		for _, op := range b.Ops {
			byID[op.ID] = op
		}
		join := byID["bid-auction"]
		if join == nil || join.Kind != "join" || !slices.Equal(join.Keys, []string{"auction"}) || byID["top"] == nil || byID["top"].Kind != "top_n" {
			t.Fatalf("epoch %d: stages %+v", b.Epoch, byID)
		}
		var want, got []int64
		for id, ts := range auctions {
			if ts.Truncate(10*time.Second).Add(10*time.Second).UnixMicro() > join.EmittedThrough {
				want = append(want, id)
			}
		}
		var text bytes.Buffer
		if err := b.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, r := range join.Rows {
			if col(t, join, &r, "side") != int8(1) {
				continue
			}
			id := col(t, join, &r, "right.id").(int64)
			if r.Key[0] != id || col(t, join, &r, "left.auction") != nil {
				t.Fatalf("epoch %d: right row key %v, id %d, left.auction %v", b.Epoch, r.Key, id, col(t, join, &r, "left.auction"))
			}
			got = append(got, id)
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("epoch %d: the join holds auctions %v, want %v (watermark %s)", b.Epoch, got, want, time.UnixMicro(join.EmittedThrough).UTC())
		}
		for _, l := range strings.Split(text.String(), "\n") {
			if strings.HasPrefix(l, "op=bid-auction ") && strings.Contains(l, " side=1 ") && strings.Contains(l, " left.") {
				t.Fatalf("epoch %d: a right row shows left columns: %s", b.Epoch, l)
			}
		}
		for _, op := range b.Ops {
			held[op.ID] += len(op.Rows)
		}
	}
	// Empty files at a new parallelism: a new generation holding the same
	// logical state (join rows renumbered by the rescale compare equal).
	for _, src := range []string{e.auctions, e.bids} {
		if err := os.WriteFile(filepath.Join(strings.TrimPrefix(src, "file://"), "f-100.jsonl"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, pe, engine.Options{Parallelism: 3})
	h := readState(t, pe, engine.StateQuery{})
	d := diffState(t, pe, h.Epoch-1, h.Epoch)
	if !d.Identical || d.From.Parallelism != 1 || d.To.Parallelism != 3 {
		t.Fatalf("diff across the rescale 1 -> 3 with no new rows: %+v", d)
	}
	for _, od := range d.Ops {
		if od.ID == "bid-auction" && od.Unchanged == 0 {
			t.Fatalf("diff across the rescale: the join compared no rows: %+v", od)
		}
	}
	t.Logf("rows held over the epochs: %v", held)
	if held["last-bid"] == 0 || held["bid-auction"] == 0 {
		t.Fatalf("rows held over the epochs: %v: the test checks too little", held)
	}
	if rows == 0 {
		t.Fatal("no state read")
	}
	// A join's export keeps both sides' columns (null on the other side).
	v := readState(t, pe, engine.StateQuery{Op: "bid-auction"})
	data, err := v.Parquet()
	if err != nil {
		t.Fatal(err)
	}
	schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, rec := range recs {
		n += int(rec.NumRows())
		rec.Release()
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	want := "operator auction side seq pending matched left.auction left.bidder left.price left.ts right.id right.seller right.category right.ts key_group subtask"
	if strings.Join(names, " ") != want || n != len(v.Ops[0].Rows) || n == 0 {
		t.Fatalf("join export: %d rows (cat %d), columns %v, want %s", n, len(v.Ops[0].Rows), names, want)
	}
}

// TestInspectGraphIntervalJoinOverWindow: an interval join whose left side
// is window results timed by window_end: cat shows the buffered rows with
// their pending / matched flags and without the hidden window-time column
// the stage adds; every left row is one of the window results committed
// or still to come (its key and count agree with the bids).
func TestInspectGraphIntervalJoinOverWindow(t *testing.T) {
	e := newGraphEnv(t)
	e.putAuctions(t, 6)
	p := e.pipelineFrom(t, `
name: interval
sources:
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 1
    watermark: {max_out_of_orderness: 2s}
stages:
  - {name: b-win, input: bids, window: {key: [auction], tumbling: 10s, aggregates: {n: "count()", hi: "max(price)"}}}
  - name: both
    inputs: [b-win, bids]
    join: {left_on: [auction], right_on: [auction], left_time: window_end, interval: {lower: 0s, upper: 10s}}
sinks:
  out: {input: both, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`)
	run(t, p, engine.Options{UntilEpoch: 3})
	run(t, p, engine.Options{Parallelism: 3})
	// The bids per auction and 10 s window, from the input.
	counts := map[string]int64{}
	for name, data := range auctionFiles(6) {
		if !strings.HasPrefix(name, "bids/") {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var b struct {
				Auction int64     `json:"auction"`
				TS      time.Time `json:"ts"`
			}
			if err := json.Unmarshal([]byte(l), &b); err != nil {
				t.Fatal(err)
			}
			counts[fmt.Sprint(b.Auction, b.TS.Truncate(10*time.Second).UTC())]++
		}
	}
	var left, right int
	for n := int64(1); n <= readState(t, p, engine.StateQuery{}).Epoch; n++ {
		v := readState(t, p, engine.StateQuery{Epoch: n, Op: "both"})
		op := v.Ops[0]
		if op.Kind != "join" || !strings.HasPrefix(op.Stage, "inner join on [auction] = [auction], interval [-0s, +10s]") {
			t.Fatalf("epoch %d: %s %q", n, op.Kind, op.Stage)
		}
		for _, c := range op.Columns {
			if strings.Contains(c, "__floe") {
				t.Fatalf("epoch %d: the hidden column shows: %v", n, op.Columns)
			}
		}
		for i := range op.Rows {
			r := &op.Rows[i]
			if col(t, op, r, "side") == int8(1) {
				right++
				continue
			}
			left++
			ws := col(t, op, r, "left.window_start").(time.Time)
			if k := fmt.Sprint(r.Key[0], ws); col(t, op, r, "left.auction") != r.Key[0] || col(t, op, r, "left.n") != counts[k] || counts[k] == 0 {
				t.Fatalf("epoch %d: left row %v %v: count %v, the bids say %d", n, r.Key, ws, col(t, op, r, "left.n"), counts[k])
			}
			if _, ok := col(t, op, r, "matched").(bool); !ok {
				t.Fatalf("epoch %d: matched is %v", n, col(t, op, r, "matched"))
			}
		}
		var buf bytes.Buffer
		if err := v.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "__floe") {
			t.Fatalf("epoch %d: cat shows the hidden column:\n%s", n, buf.String())
		}
		if len(op.Rows) > 0 {
			data, err := v.Parquet()
			if err != nil {
				t.Fatalf("epoch %d: export: %v", n, err)
			}
			schema, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				rec.Release()
			}
			if strings.Contains(schema.String(), "__floe") || schema.NumFields() != 3+len(op.Columns)+1 {
				t.Fatalf("epoch %d: export schema %s", n, schema)
			}
		}
	}
	if left == 0 || right == 0 {
		t.Fatalf("the join held %d left and %d right rows over the epochs: the test checks too little", left, right)
	}
}
