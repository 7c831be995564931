package engine_test

import (
	"context"
	"encoding/json"
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
