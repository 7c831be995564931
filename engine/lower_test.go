package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/store"
)

// The differential test of the executors: every linear spec below runs
// through the linear executor and through the graph executor it lowers
// onto (engine/lower.go), at several parallelisms, with a rescale in
// between and with crashes at state-store calls followed by a restart, and
// the two must commit the same thing: the same manifests (attempt ids,
// times, request figures and checksums aside), the same generation records,
// the same state files and the same output and side-output bytes under the
// same names (attempt tags aside).

var diffSpecs = map[string]string{
	// window -> project -> filter, late and rejected rows, deltas on bases.
	"window-post": `
name: d
source: {type: files, url: "{{source}}", format: jsonl, late_url: "{{late}}",
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2,
         watermark: {max_out_of_orderness: 5s}}
operators:
  - filter: "bytes > 100"
  - window: {key: [user_id], tumbling: 1m, allowed_lateness: 10s,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)", pages: "count_distinct(page)",
                          first_page: "first(page)", last_page: "last(page)"}}
  - project: {user_id: user_id, window_end: window_end, clicks: clicks, avg: "total_bytes / clicks", pages: pages,
               first_page: first_page, last_page: last_page}
  - filter: "clicks > 1"
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2, max_parallelism: 16}
`,
	// A sliding window over two keys, pruned source columns.
	"sliding": `
name: d
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1}
operators:
  - window: {key: [user_id, page], sliding: {size: 2m, slide: 30s},
             aggregates: {n: "count()", mx: "max(bytes)", mn: "min(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2, max_parallelism: 16}
`,
	// Sessions.
	"session": `
name: d
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2}
operators:
  - window: {key: [user_id], session: {gap: 40s}, allowed_lateness: 20s,
             aggregates: {n: "count()", b: "sum(bytes)"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2, max_parallelism: 16}
`,
	// No window: filter and project into JSON lines.
	"stateless": `
name: d
source: {type: files, url: "{{source}}", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 3}
operators:
  - filter: "page != '/p3'"
  - project: {event_time: event_time, u: "upper(user_id)", kb: "bytes / 1024.0"}
sink:  {type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 1}
`,
}

// diffData is the differential test's input, in two rounds of files.
var diffData = []datagen.Options{
	{Rows: 900, Files: 3, Users: 40, Pages: 6, Span: 6 * time.Minute, Seed: 71, OutOfOrder: 8 * time.Second,
		LateFraction: 0.04, MalformedFraction: 0.01},
	{Rows: 600, Files: 4, Users: 40, Pages: 6, Span: 5 * time.Minute, Seed: 72, OutOfOrder: 8 * time.Second,
		LateFraction: 0.04, MalformedFraction: 0.01, Start: datagen.DefaultStart.Add(6 * time.Minute)},
}

// diffRun is one schedule of runs: parallelism per round, and the state
// call to crash at in round 2 (-1: none).
type diffRun struct {
	p1, p2  int
	crashAt int
}

func TestExecutorsCommitTheSame(t *testing.T) {
	schedules := []diffRun{{1, 1, -1}, {2, 2, -1}, {3, 3, -1}, {2, 3, -1}, {2, 2, 4}, {2, 2, 9}, {3, 1, 6}}
	if testing.Short() {
		schedules = schedules[:3]
	}
	names := make([]string, 0, len(diffSpecs))
	for n := range diffSpecs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, sc := range schedules {
			t.Run(fmt.Sprintf("%s/p%d-p%d-crash%d", name, sc.p1, sc.p2, sc.crashAt), func(t *testing.T) {
				lin := runDiff(t, diffSpecs[name], "linear", sc)
				gra := runDiff(t, diffSpecs[name], "graph", sc)
				compareTrees(t, "state", lin, gra, func(d diffDirs) string { return d.state })
				compareTrees(t, "sink", lin, gra, func(d diffDirs) string { return d.sink })
				if strings.Contains(diffSpecs[name], "late_url") {
					compareTrees(t, "late", lin, gra, func(d diffDirs) string { return d.late })
				}
			})
		}
	}
}

type diffDirs struct{ root, state, sink, late string }

func runDiff(t *testing.T, tmpl, executor string, sc diffRun) diffDirs {
	t.Helper()
	e := fileEnv(t)
	p := e.pipeline(t, tmpl)
	files := map[int][]string{}
	data := map[string][]byte{}
	for round, g := range diffData {
		prefix := fmt.Sprintf("r%d-", round)
		if err := datagen.Generate(g, func(n string, b []byte) error {
			files[round] = append(files[round], prefix+n)
			data[prefix+n] = b
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	opts := func(par int) engine.Options {
		o := engine.Options{Parallelism: par, Now: now}
		engine.SetExecutor(&o, executor)
		return o
	}
	for _, f := range files[0] {
		e.put(t, f, data[f])
	}
	run(t, p, opts(sc.p1))
	for _, f := range files[1] {
		e.put(t, f, data[f])
	}
	if sc.crashAt >= 0 {
		o := opts(sc.p2)
		o.Retry = store.RetryPolicy{MaxAttempts: 1}
		o.WrapStore = func(n string, s store.Store) store.Store {
			if n != "state" {
				return s
			}
			return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: sc.crashAt, Mode: store.CrashAfter}}})
		}
		_, err := engine.Run(context.Background(), p, o)
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("%s executor: crash at state call %d: got %v", executor, sc.crashAt, err)
		}
	}
	run(t, p, opts(sc.p2))
	return diffDirs{root: filepath.Dir(e.sourceDir), state: urlPath(e.state), sink: urlPath(e.sink), late: urlPath(e.late)}
}

func urlPath(u string) string { return strings.TrimPrefix(u, "file://") }

var (
	uuidRE    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	attTagRE  = regexp.MustCompile(`-[0-9a-f]{8}\.(parquet|jsonl|json)`)
	volatileK = map[string]bool{"attempt": true, "created_at": true, "last_active": true, "stats": true, "checksum": true,
		"committed_at": true, "started_at": true, "claimed_at": true, "at": true, "time": true}
)

// normName strips attempt ids and tags from a path.
func normName(p string) string {
	return attTagRE.ReplaceAllString(uuidRE.ReplaceAllString(p, "ATTEMPT"), "-TAG.$1")
}

// readTree reads every file under dir by normalised name; JSON documents
// are normalised (volatile fields dropped, attempt ids stripped).
func readNormTree(t *testing.T, root, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			if d.Name() == ".floe-locks" {
				return filepath.SkipDir // lock objects have random names
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			b = normJSON(t, path, bytes.ReplaceAll(b, []byte(root), []byte("ROOT")))
		case !strings.HasSuffix(path, ".parquet"):
			b = []byte(normName(strings.ReplaceAll(string(b), root, "ROOT")))
		}
		name := normName(filepath.ToSlash(rel))
		if _, dup := out[name]; dup {
			name += "#2" // two attempts' orphans under one normalised name
		}
		out[name] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func normJSON(t *testing.T, path string, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if volatileK[k] {
					delete(x, k)
					continue
				}
				x[k] = walk(v)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case string:
			return normName(x)
		}
		return x
	}
	out, err := json.MarshalIndent(walk(v), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compareTrees(t *testing.T, what string, a, b diffDirs, dir func(diffDirs) string) {
	t.Helper()
	ta, tb := readNormTree(t, a.root, dir(a)), readNormTree(t, b.root, dir(b))
	var names []string
	for n := range ta {
		names = append(names, n)
	}
	for n := range tb {
		if _, ok := ta[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	bad := 0
	for _, n := range names {
		x, okA := ta[n]
		y, okB := tb[n]
		switch {
		case !okA:
			t.Errorf("%s: %s written only by the graph executor", what, n)
		case !okB:
			t.Errorf("%s: %s written only by the linear executor", what, n)
		case !bytes.Equal(x, y):
			if strings.HasSuffix(n, ".json") {
				t.Errorf("%s: %s differs:\nlinear: %s\ngraph:  %s", what, n, x, y)
			} else {
				t.Errorf("%s: %s differs (%d vs %d bytes)", what, n, len(x), len(y))
			}
		default:
			continue
		}
		if bad++; bad > 6 {
			t.Fatalf("%s: more differences not shown", what)
		}
	}
	if len(ta) == 0 {
		t.Fatalf("%s: nothing written: the test compares nothing", what)
	}
}
