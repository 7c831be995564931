package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// partitionedSinks is fourSinks with three of the sinks partitioned: the
// root sink by category (the top-n), big-bids by bidder, auctions by seller
// and category.
const partitionedSinks = `  out: {input: top, type: files, url: "{{sink}}", format: jsonl, partition_by: [category]}
  per-category: {input: per-category, type: files, url: "{{dir}}/per-category", format: parquet}
  big-bids: {input: big, type: files, url: "{{dir}}/big", format: jsonl, partition_by: bidder}
  auctions: {input: auctions, type: files, url: "{{dir}}/auctions", format: jsonl, partition_by: [seller, category]}
`

// TestGraphSinksPartitioned: each partitioned sink of a graph writes the
// rows of the unpartitioned sink, across rescales 2 -> 5 -> 3, each file in
// the col=value/ folders of its rows' values and without those columns;
// `floe outputs` lists every part file; replaying the head epoch gives
// what it committed.
func TestGraphSinksPartitioned(t *testing.T) {
	want := singleSinkRows(t, 10)
	e := newGraphEnv(t)
	e.putAuctions(t, 10)
	p := e.pipelineWith(t, multiSinkSpec(partitionedSinks))
	run(t, p, engine.Options{UntilEpoch: 2})
	run(t, p, engine.Options{UntilEpoch: 4, Parallelism: 5})
	run(t, p, engine.Options{Drain: true, Parallelism: 3})
	parts := map[string][]string{"out": {"category"}, "big-bids": {"bidder"}, "auctions": {"seller", "category"}}
	for _, s := range fourSinkNames {
		cols := parts[s.name]
		if cols == nil {
			if got := sinkRows(t, p, s.name); !reflect.DeepEqual(got, want[s.name]) {
				t.Errorf("unpartitioned sink %s: %d rows, want %d", s.name, len(got), len(want[s.name]))
			}
			continue
		}
		urls, err := engine.OutputURLs(context.Background(), p, s.name)
		if err != nil {
			t.Fatal(err)
		}
		dir := strings.TrimPrefix(e.sink, "file://")
		if s.dir != "" {
			dir = filepath.Join(e.dir, "sinks", s.dir)
		}
		if files := sinkFiles(t, dir); len(files) != len(urls) {
			t.Errorf("sink %s: %d part files, %d committed", s.name, len(files), len(urls))
		}
		var got []string
		folders := map[string]bool{}
		for _, u := range urls {
			rel := strings.TrimPrefix(strings.TrimPrefix(u, "file://"), dir+"/")
			info, ok := manifest.ParseOutputName(rel)
			segs := strings.Split(info.Partition, "/")
			if !ok || info.Dir != "" || len(segs) != len(cols) {
				t.Fatalf("sink %s: committed file %s is not in %v folders", s.name, rel, cols)
			}
			folders[path.Dir(rel)] = true
			data, err := os.ReadFile(strings.TrimPrefix(u, "file://"))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var row map[string]any
				if err := json.Unmarshal([]byte(l), &row); err != nil {
					t.Fatalf("%s: %v", rel, err)
				}
				for i, c := range cols {
					if _, in := row[c]; in {
						t.Fatalf("sink %s: file %s holds partition column %s", s.name, rel, c)
					}
					name, val, _ := strings.Cut(segs[i], "=")
					if name != c {
						t.Fatalf("sink %s: folder %s, want %s=", s.name, segs[i], c)
					}
					row[c] = json.Number(val)
				}
				got = append(got, canonicalJSON(t, row))
			}
		}
		var wantRows []string
		for _, l := range want[s.name] {
			var row map[string]any
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatal(err)
			}
			wantRows = append(wantRows, canonicalJSON(t, row))
		}
		slices.Sort(got)
		slices.Sort(wantRows)
		if !reflect.DeepEqual(got, wantRows) {
			t.Errorf("sink %s: %d rows read back with the folder values, want %d\n%s", s.name, len(got), len(wantRows),
				diffLines(strings.Join(wantRows, "\n"), strings.Join(got, "\n")))
		}
		if len(folders) < 2 {
			t.Errorf("sink %s: files in %d folders", s.name, len(folders))
		}
	}
	v, err := engine.VerifyReplay(context.Background(), p, engine.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Identical() || len(v.Committed) == 0 {
		t.Errorf("replay of the head epoch differs from what it committed: %+v %v", v.Diff, v.Counters)
	}
}

// canonicalJSON encodes a decoded row with its keys sorted (numbers as
// float64 or, for folder values, as written).
func canonicalJSON(t *testing.T, row map[string]any) string {
	t.Helper()
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPartitionByErrors: a partition_by the plan cannot honour is refused
// before anything runs, naming the field.
func TestPartitionByErrors(t *testing.T) {
	for _, tc := range []struct{ partitionBy, want string }{
		{"[nope]", `sink.partition_by[0]: the output has no column "nope"`},
		{"[user_id, window_start, window_end, clicks, total_bytes]", "sink.partition_by: lists every output column"},
		{"[user_id, user_id]", `sink.partition_by[1]: column "user_id" listed twice`},
		{`"day(window_start)"`, `sink.partition_by[0]: the output has no column "day(window_start)"`},
	} {
		e := fileEnv(t)
		text := strings.Replace(windowSpec, `format: parquet}`, `format: parquet, partition_by: `+tc.partitionBy+`}`, 1)
		text = strings.NewReplacer("{{source}}", e.source, "{{sink}}", e.sink, "{{state}}", e.state).Replace(text)
		p, err := spec.Parse("t.yaml", []byte(text), "")
		if err == nil {
			_, err = engine.Run(context.Background(), p, engine.Options{Drain: true})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("partition_by %s: %v, want an error with %q", tc.partitionBy, err, tc.want)
		}
	}
}

// TestHivePartitionAwkwardValues: partition values with a slash, an equals
// sign, a percent sign, a tab, non-ASCII letters, a space, dots, an empty
// string and null each get the folder Hive would give them, on file:// and
// S3; reading the folder names back (unescaped, the default partition as
// null) gives every input row once; and an orphan planted in a partition
// folder is removed by the next run.
func TestHivePartitionAwkwardValues(t *testing.T) {
	keys := []string{`"a/b"`, `"x=y"`, `"100%"`, `"東京 é"`, `""`, `null`, `"sp ace"`, `"tab\t"`, `".."`, `"../x"`, `"a+b?c#d"`}
	folders := map[string]string{`"a/b"`: "k=a%2Fb", `"x=y"`: "k=x%3Dy", `"100%"`: "k=100%25", `"東京 é"`: "k=東京 é",
		`""`: "k=__HIVE_DEFAULT_PARTITION__", `null`: "k=__HIVE_DEFAULT_PARTITION__", `"sp ace"`: "k=sp ace", `"tab\t"`: "k=tab%09",
		`".."`: "k=..", `"../x"`: "k=..%2Fx", `"a+b?c#d"`: "k=a+b%3Fc%23d"}
	const tmpl = `
name: awkward
source: {type: files, url: "{{source}}", format: jsonl, schema: {ts: timestamp, k: string, v: int64},
         event_time: ts, max_files_per_epoch: 1}
sink: {type: files, url: "{{sink}}", format: jsonl, partition_by: [k]}
state: {url: "{{state}}", parallelism: 2}
`
	bothEnvs(t, func(t *testing.T, newEnv func(testing.TB) *env) {
		ctx := context.Background()
		e := newEnv(t)
		var want []string
		for f := range 2 {
			var lines []string
			for i, k := range keys {
				v := f*100 + i
				lines = append(lines, fmt.Sprintf(`{"ts": "2026-12-01T00:00:%02dZ", "k": %s, "v": %d}`, i, k, v))
				var dec any
				_ = json.Unmarshal([]byte(k), &dec)
				if dec == "" {
					dec = nil
				}
				want = append(want, canonicalJSON(t, map[string]any{"k": dec, "v": float64(v)}))
			}
			e.put(t, fmt.Sprintf("f%d.jsonl", f), []byte(strings.Join(lines, "\n")+"\n"))
		}
		p := e.pipeline(t, tmpl)
		run(t, p, engine.Options{Drain: true})
		sink, err := store.Open(ctx, e.sink)
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		got, seen := partitionRowsBack(t, ctx, p, sink, e.sink)
		for k, f := range folders {
			if !seen[f] {
				t.Errorf("value %s: no folder %q (folders: %v)", k, f, seen)
			}
		}
		slices.Sort(want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rows read back from the folders:\n%s", diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
		orphan := "k=a%2Fb/" + manifest.OutputName(1, 1, 0, "0f8fad5b-d9cb-469f-a165-70867728950e", "jsonl")
		if _, err := sink.Put(ctx, orphan, []byte(`{"v": 999}`+"\n"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		run(t, p, engine.Options{Drain: true})
		if _, _, err := sink.Get(ctx, orphan); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("orphan %s in a partition folder survived a run: %v", orphan, err)
		}
		if got2, _ := partitionRowsBack(t, ctx, p, sink, e.sink); !reflect.DeepEqual(got2, want) {
			t.Errorf("rows changed after the second run")
		}
	})
}

// partitionRowsBack reads the committed files of a jsonl sink partitioned
// by k and returns the rows with k taken from the folder (unescaped, the
// default partition as null), sorted, and the folders seen.
func partitionRowsBack(t *testing.T, ctx context.Context, p *spec.Pipeline, sink store.Store, sinkURL string) ([]string, map[string]bool) {
	t.Helper()
	urls, err := engine.OutputURLs(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(sinkURL, "/")
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	seen := map[string]bool{}
	var rows []string
	for _, u := range urls {
		key := strings.TrimPrefix(u, base+"/")
		folder := path.Dir(key)
		seen[folder] = true
		data, _, err := sink.Get(ctx, key)
		if err != nil {
			t.Fatalf("committed %s: %v", key, err)
		}
		val, ok := strings.CutPrefix(folder, "k=")
		if !ok {
			t.Fatalf("committed %s is not in a k= folder", key)
		}
		var k any
		if val != manifest.HiveDefaultPartition {
			s, err := url.PathUnescape(val)
			if err != nil {
				t.Fatalf("folder %s: %v", folder, err)
			}
			k = s
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var row map[string]any
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatal(err)
			}
			delete(row, "ts")
			if _, in := row["k"]; in {
				t.Fatalf("%s holds k", key)
			}
			row["k"] = k
			rows = append(rows, canonicalJSON(t, row))
		}
	}
	slices.Sort(rows)
	return rows, seen
}
