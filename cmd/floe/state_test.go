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
