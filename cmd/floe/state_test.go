package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
)

// TestCLIState: cat (text, --key, --json), diff (exit 1 different, 0
// identical), export (file and stdout, read back) and the errors for an
// epoch that is not retained and an unknown operator; nothing is written
// to the pipeline's state or sink.
func TestCLIState(t *testing.T) {
	spec, dir := sampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	before := tree(t, dir)

	code, out, e := floe("state", "cat", spec)
	if code != 0 {
		t.Fatalf("cat: code %d\n%s%s", code, out, e)
	}
	if !strings.HasPrefix(out, "# pipeline clicks-per-user: epoch 3, the head, generation 1, parallelism 2") {
		t.Fatalf("cat header:\n%s", out)
	}
	line := regexp.MustCompile(`^op=(\S+) user_id=(\S+) window_start=(\S+) window_end=(\S+) clicks=(\d+) total_bytes=(\d+) key_group=(\d+) subtask=([01])$`)
	var rows int
	var clicks, bytes int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("cat line %q does not match %s", l, line)
		}
		rows++
		c, _ := strconv.ParseInt(m[5], 10, 64)
		b, _ := strconv.ParseInt(m[6], 10, 64)
		clicks, bytes = clicks+c, bytes+b
	}
	if rows == 0 {
		t.Fatalf("cat printed no rows:\n%s", out)
	}

	code, out, _ = floe("state", "cat", spec, "--epoch", "2", "--key", "u1")
	if n := strings.Count(out, "\nop="); code != 0 || n != 1 || !strings.Contains(out, " user_id=u1 ") {
		t.Fatalf("cat --key u1: code %d, %d rows\n%s", code, n, out)
	}

	code, out, _ = floe("state", "cat", spec, "--json")
	var doc struct {
		Epoch     int64 `json:"epoch"`
		Operators []struct {
			ID   string `json:"id"`
			Rows []struct {
				Key        map[string]any   `json:"key"`
				Aggregates map[string]int64 `json:"aggregates"`
				KeyGroup   int              `json:"key_group"`
			} `json:"rows"`
		} `json:"operators"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
		t.Fatalf("cat --json: code %d, %v\n%s", code, err, out)
	}
	if doc.Epoch != 3 || len(doc.Operators) != 1 || len(doc.Operators[0].Rows) != rows {
		t.Fatalf("cat --json: epoch %d, %d operators, want %d rows:\n%s", doc.Epoch, len(doc.Operators), rows, out)
	}
	var jclicks int64
	for _, r := range doc.Operators[0].Rows {
		jclicks += r.Aggregates["clicks"]
	}
	if jclicks != clicks {
		t.Fatalf("cat --json: %d clicks, text says %d", jclicks, clicks)
	}

	code, out, e = floe("state", "diff", spec, "--from", "1", "--to", "3", "--sample", "2")
	if code != 1 || !strings.Contains(out, "operator window:") || !strings.HasSuffix(out, "different\n") ||
		!strings.Contains(out, "\n+ user_id=") || !strings.Contains(out, "more added") || !strings.Contains(e, "differs") {
		t.Fatalf("diff 1 -> 3: code %d\n%s%s", code, out, e)
	}
	code, out, _ = floe("state", "diff", spec, "--from", "3", "--to", "3", "--json")
	var d struct {
		Identical bool `json:"identical"`
		Operators []struct {
			Unchanged int `json:"unchanged"`
		} `json:"operators"`
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || !d.Identical || d.Operators[0].Unchanged != rows {
		t.Fatalf("diff 3 -> 3: code %d, %v\n%s", code, err, out)
	}
	if code, _, e = floe("state", "diff", spec, "--to", "3"); code != 2 || !strings.Contains(e, "--from is required") {
		t.Fatalf("diff without --from: code %d %s", code, e)
	}

	file := filepath.Join(t.TempDir(), "state.parquet")
	if code, out, e = floe("state", "export", spec, "--epoch", "3", "--out", file); code != 0 {
		t.Fatalf("export: code %d\n%s%s", code, out, e)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := floe("state", "export", spec, "--out", "-")
	if code != 0 {
		t.Fatalf("export --out -: code %d", code)
	}
	for name, b := range map[string][]byte{"file": data, "stdout": []byte(stdout)} {
		schema, recs, err := formats.ReadParquet(b, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("export to %s: %v", name, err)
		}
		var n int
		var c, by int64
		for _, rec := range recs {
			n += int(rec.NumRows())
			cc := rec.Column(schema.FieldIndices("clicks")[0]).(*array.Int64)
			bb := rec.Column(schema.FieldIndices("total_bytes")[0]).(*array.Int64)
			for i := range cc.Len() {
				c, by = c+cc.Value(i), by+bb.Value(i)
			}
			rec.Release()
		}
		if n != rows || c != clicks || by != bytes {
			t.Fatalf("export to %s: %d rows, %d clicks, %d bytes; cat: %d, %d, %d", name, n, c, by, rows, clicks, bytes)
		}
	}

	if code, _, e = floe("state", "cat", spec, "--epoch", "9"); code != 2 || !strings.Contains(e, "epoch 9 is not retained: retained epochs are 1..3") {
		t.Fatalf("cat --epoch 9: code %d %s", code, e)
	}
	if code, _, e = floe("state", "cat", spec, "--op", "nope"); code != 2 || !strings.Contains(e, `unknown operator "nope": the stateful operators are window`) {
		t.Fatalf("cat --op nope: code %d %s", code, e)
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("state commands wrote files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// graphSampleSpec writes testdata/pipelines/auctions-graph.yaml into a
// temporary folder, reading the sample auctions in place.
func graphSampleSpec(t *testing.T) (spec, dir string) {
	t.Helper()
	dir = t.TempDir()
	auctions, err := filepath.Abs("../../testdata/auctions")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../testdata/pipelines/auctions-graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(`"../auctions/`, `"`+auctions+`/`, `"../../out/`, `"out/`, `"../../.floe"`, `"state"`).Replace(string(data))
	spec = filepath.Join(dir, "auctions-graph.yaml")
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, dir
}

// TestCLIStateGraph: the state commands on a pipeline in the graph form:
// cat prints every keyed stage (text and --json agree), --op selects a
// stage and an unknown one names the keyed stages, diff exits 1 / 0,
// export needs --op with several stages and writes the stage's rows;
// nothing is written to the pipeline's state or sink.
func TestCLIStateGraph(t *testing.T) {
	spec, dir := graphSampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	before := tree(t, dir)
	stages := []string{"last-bid", "bid-auction", "per-category", "top"}

	code, out, e := floe("state", "cat", spec)
	if code != 0 {
		t.Fatalf("cat: code %d\n%s%s", code, out, e)
	}
	m := regexp.MustCompile(`^# pipeline hot-categories: epoch (\d+), the head, generation 1, parallelism 2, 128 key groups`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("cat header:\n%s", out)
	}
	head := m[1]
	for _, h := range []string{
		"\n# operator last-bid: dedup keep last within 10s, allowed lateness 0s; key [auction, bidder]; watermark ",
		"\n# operator bid-auction: inner join on [auction] = [id], window tumbling 10s, allowed lateness 0s; key [auction]; watermark ",
		"\n# operator per-category: tumbling 10s, allowed lateness 0s; key [category]; bids=count() volume=sum(price); emitted through ",
		"\n# operator top: top_n 2 by volume desc, category per input window, allowed lateness 0s; key []; watermark ",
	} {
		if !strings.Contains(out, h) {
			t.Fatalf("cat lacks %q:\n%s", h, out)
		}
	}
	rowRe := map[string]*regexp.Regexp{
		"last-bid": regexp.MustCompile(`^op=last-bid auction=(\d+) bidder=(\d+) dedup\.pending=(true|false) dedup\.time=\S+ dedup\.seq=\S+ price=\S+ ts=\S+ key_group=\d+ subtask=[01]$`),
		"bid-auction": regexp.MustCompile(`^op=bid-auction auction=(\d+) side=(?:0 seq=\d+ pending=(?:true|false) matched=(?:true|false) left\.auction=(\d+) left\.bidder=\d+ left\.price=\d+ left\.ts=\S+` +
			`|1 seq=\d+ pending=(?:true|false) matched=(?:true|false) right\.id=(\d+) right\.seller=\d+ right\.category=\d+ right\.ts=\S+) key_group=\d+ subtask=[01]$`),
	}
	rows := map[string]int{}
	var key string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		op, _, _ := strings.Cut(strings.TrimPrefix(l, "op="), " ")
		re := rowRe[op]
		if re == nil {
			t.Fatalf("cat: a row of stage %q: %s", op, l)
		}
		sm := re.FindStringSubmatch(l)
		if sm == nil {
			t.Fatalf("cat line %q does not match %s", l, re)
		}
		if op == "bid-auction" && sm[1] != sm[2]+sm[3] {
			t.Fatalf("cat: the key is not the row's auction: %s", l)
		}
		if op == "last-bid" && key == "" {
			key = sm[1] + "," + sm[2]
		}
		rows[op]++
	}
	if rows["last-bid"] == 0 || rows["bid-auction"] == 0 {
		t.Fatalf("cat printed %v rows:\n%s", rows, out)
	}

	code, out, _ = floe("state", "cat", spec, "--json")
	var doc struct {
		Epoch     json.Number `json:"epoch"`
		Operators []struct {
			ID   string           `json:"id"`
			Kind string           `json:"kind"`
			Rows []map[string]any `json:"rows"`
		} `json:"operators"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Epoch.String() != head || len(doc.Operators) != 4 {
		t.Fatalf("cat --json: code %d, %v\n%s", code, err, out)
	}
	for i, op := range doc.Operators {
		if op.ID != stages[i] || len(op.Rows) != rows[op.ID] {
			t.Fatalf("cat --json: operator %d is %s with %d rows; text: %s with %d", i, op.ID, len(op.Rows), stages[i], rows[stages[i]])
		}
	}

	code, out, _ = floe("state", "cat", spec, "--op", "last-bid", "--key", key)
	if n := strings.Count(out, "\nop="); code != 0 || n == 0 || strings.Count(out, "\n# operator ") != 1 ||
		strings.Count(out, " auction="+strings.Replace(key, ",", " bidder=", 1)+" ") != n {
		t.Fatalf("cat --op last-bid --key %s: code %d, %d rows\n%s", key, code, n, out)
	}
	for op, want := range map[string]string{
		"nope":     `unknown stage "nope": the keyed stages are last-bid, bid-auction, per-category, top`,
		"auctions": `"auctions" is a source, not a stage: the keyed stages are last-bid, bid-auction, per-category, top`,
	} {
		if code, _, e = floe("state", "cat", spec, "--op", op); code != 2 || !strings.Contains(e, want) {
			t.Fatalf("cat --op %s: code %d %s", op, code, e)
		}
	}

	code, out, e = floe("state", "diff", spec, "--from", "1", "--to", head, "--sample", "2")
	if code != 1 || !strings.Contains(out, "\noperator last-bid: ") || !strings.Contains(out, "\noperator bid-auction: ") ||
		!strings.Contains(out, "\n+ auction=") || !strings.HasSuffix(out, "different\n") || !strings.Contains(e, "differs") {
		t.Fatalf("diff 1 -> %s: code %d\n%s%s", head, code, out, e)
	}
	code, out, _ = floe("state", "diff", spec, "--from", head, "--to", head, "--json")
	var d struct {
		Identical bool `json:"identical"`
		Operators []struct {
			ID        string `json:"id"`
			Unchanged int    `json:"unchanged"`
		} `json:"operators"`
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || !d.Identical || len(d.Operators) != 4 ||
		d.Operators[0].Unchanged != rows["last-bid"] || d.Operators[1].Unchanged != rows["bid-auction"] {
		t.Fatalf("diff %s -> %s: code %d, %v\n%s", head, head, code, err, out)
	}

	if code, _, e = floe("state", "export", spec, "--out", filepath.Join(t.TempDir(), "x.parquet")); code != 2 ||
		!strings.Contains(e, "export one operator at a time (--op): pipeline hot-categories keeps state in last-bid, bid-auction, per-category, top") {
		t.Fatalf("export without --op: code %d %s", code, e)
	}
	code, data, e := floe("state", "export", spec, "--op", "bid-auction", "--out", "-")
	if code != 0 {
		t.Fatalf("export --op bid-auction: code %d %s", code, e)
	}
	schema, recs, err := formats.ReadParquet([]byte(data), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	want := "operator auction side seq pending matched left.auction left.bidder left.price left.ts right.id right.seller right.category right.ts key_group subtask"
	if strings.Join(names, " ") != want {
		t.Fatalf("export columns %v, want %s", names, want)
	}
	var n int
	for _, rec := range recs {
		ops := rec.Column(0).(*array.String)
		side := rec.Column(2).(*array.Int8)
		auction := rec.Column(1).(*array.Int64)
		for i := range ops.Len() {
			keyCol := rec.Column(schema.FieldIndices("left.auction")[0]).(*array.Int64)
			if side.Value(i) == 1 {
				keyCol = rec.Column(schema.FieldIndices("right.id")[0]).(*array.Int64)
			}
			if ops.Value(i) != "bid-auction" || keyCol.IsNull(i) || keyCol.Value(i) != auction.Value(i) {
				t.Fatalf("export row %d: operator %s, side %d, auction %d", n, ops.Value(i), side.Value(i), auction.Value(i))
			}
			n++
		}
		rec.Release()
	}
	if n != rows["bid-auction"] {
		t.Fatalf("export: %d rows, cat printed %d", n, rows["bid-auction"])
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("state commands wrote files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
