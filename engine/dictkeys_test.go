package engine_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/store"
)

// TestDictionaryKeys: a window reading a Parquet source directly decodes
// its string key as dictionary indices (plan.decodeAs); the committed rows
// and the late rows equal those of the same data read as JSON lines (plain
// strings), across a rescale and with late rows written to late_url.
func TestDictionaryKeys(t *testing.T) {
	gen := datagen.Options{Rows: 6000, Files: 6, Users: 300, Span: 30 * time.Minute, Seed: 5,
		OutOfOrder: 20 * time.Second, LateFraction: 0.02}
	for _, kind := range []string{"tumbling: 1m", "sliding: {size: 5m, slide: 1m}", "session: {gap: 2m}"} {
		t.Run(strings.TrimSuffix(strings.Fields(kind)[0], ":"), func(t *testing.T) {
			if !strings.Contains(windowSpec, "tumbling: 1m") {
				t.Fatal("windowSpec changed")
			}
			// Late rows are 2 to 5 minutes behind: late for 1-minute
			// windows and 2-minute sessions, not for 5-minute ones.
			dictionaryKeys(t, gen, strings.Replace(windowSpec, "tumbling: 1m", kind, 1), !strings.HasPrefix(kind, "sliding"))
		})
	}
}

func dictionaryKeys(t *testing.T, gen datagen.Options, spec string, wantLate bool) {
	rows := map[string][]string{}
	late := map[string][]string{}
	for _, format := range []string{"jsonl", "parquet"} {
		e := fileEnv(t)
		g := gen
		g.Format = format
		genData(t, e, g)
		s := spec
		if format == "parquet" {
			s = strings.Replace(s, `format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},`, "format: parquet,", 1)
		}
		s = strings.Replace(s, "event_time: event_time, max_files_per_epoch: 1,", `event_time: event_time, max_files_per_epoch: 1, late_url: "{{late}}",`, 1)
		p := e.pipeline(t, s)
		run(t, p, engine.Options{UntilEpoch: 3})
		run(t, p, engine.Options{Drain: true, Parallelism: 3})
		rows[format] = committedRows(t, p)
		sort.Strings(rows[format])
		late[format] = lateRows(t, e.late)
	}
	if len(rows["jsonl"]) == 0 || wantLate && len(late["jsonl"]) == 0 {
		t.Fatalf("the JSON-lines run wrote %d rows and %d late rows; the test needs both", len(rows["jsonl"]), len(late["jsonl"]))
	}
	if !reflect.DeepEqual(rows["parquet"], rows["jsonl"]) {
		t.Fatalf("Parquet (dictionary keys) %d rows, JSON lines %d\n%s", len(rows["parquet"]), len(rows["jsonl"]),
			diffLines(strings.Join(rows["jsonl"], "\n"), strings.Join(rows["parquet"], "\n")))
	}
	if !reflect.DeepEqual(late["parquet"], late["jsonl"]) {
		t.Fatalf("late rows: Parquet %d, JSON lines %d\n%s", len(late["parquet"]), len(late["jsonl"]),
			diffLines(strings.Join(late["jsonl"], "\n"), strings.Join(late["parquet"], "\n")))
	}
}

// lateRows reads every Parquet file under a late_url folder, sorted.
func lateRows(t *testing.T, u string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".parquet") {
			continue
		}
		data, _, err := s.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parquetRows(t, data)...)
	}
	sort.Strings(out)
	return out
}
