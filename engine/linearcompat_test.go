package engine_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
)

var regenLinearFixtures = flag.Bool("regen-linear-fixtures", false,
	"rewrite testdata/compat/linear-v2 and stream-v2 with the current code (only with a deliberate format version change; see testdata/compat/README-linear.md)")

// A linear fixture is the state and sink a run of a linear spec left after
// stop epochs, written by a release, that every later release must keep
// continuing in the same generation (no new generation, nothing read
// again) with the rows, output names and part splitting of a fresh run.
// They pin the on-storage promise before the linear form is lowered onto
// the graph executor (issue 25).
type linearFixture struct {
	dir  string
	spec string
	stop int64
}

var linearFixtures = []linearFixture{
	{dir: "../testdata/compat/linear-v2", stop: 4, spec: `# testdata/compat/linear-v2: see ../README-linear.md. Do not edit: the state under
# state/ was written by this spec; engine's TestLinearCompat continues it.
name: linear-v2
source: {type: files, url: in, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 1,
         watermark: {max_out_of_orderness: 5s}}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 24h, allowed_lateness: 1m,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)", pages: "count_distinct(page)"}}
  - project: {user_id: user_id, window_start: window_start, clicks: clicks, kb: "total_bytes // 1000", pages: pages}
sink:  {type: files, url: sink, format: parquet}
state: {url: state, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`},
	{dir: "../testdata/compat/stream-v2", stop: 4, spec: `# testdata/compat/stream-v2: see ../README-linear.md. Do not edit: the state under
# state/ was written by this spec; engine's TestLinearCompat continues it.
name: stream-v2
source: {type: files, url: in, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2}
operators:
  - filter: "bytes % 3 != 0"
  - project: {user_id: user_id, page: page, event_time: event_time, kb: "bytes // 1000"}
sink:  {type: files, url: sink, format: parquet}
state: {url: state, parallelism: 1, retain_epochs: 3, memory_limit: 16MiB}
`},
}

// linearFixtureData is the fixtures' input: one large first file, then
// small ones, so that after the first epoch a window state changes a little
// each epoch and is written as deltas on a base.
var linearFixtureData = []datagen.Options{
	{Rows: 800, Files: 1, Users: 400, Pages: 15, Span: time.Hour, Seed: 2026, OutOfOrder: 3 * time.Second},
	{Rows: 270, Files: 9, Users: 400, Pages: 15, Span: 2 * time.Hour, Seed: 2027, OutOfOrder: 3 * time.Second,
		Start: datagen.DefaultStart.Add(time.Hour)},
}

// TestLinearCompat continues each linear fixture with the current code.
func TestLinearCompat(t *testing.T) {
	for _, fx := range linearFixtures {
		t.Run(filepath.Base(fx.dir), func(t *testing.T) {
			if *regenLinearFixtures {
				regenerateLinearFixture(t, fx)
			}
			continueLinearFixture(t, fx)
		})
	}
}

// attemptTag matches the attempt part of an output name.
var attemptTag = regexp.MustCompile(`-[0-9a-f]{8}\.(parquet|jsonl)$`)

// outputShapes returns the committed output names of p without their
// attempt tags, sorted: the naming and splitting of the outputs.
func outputShapes(t *testing.T, p *spec.Pipeline) []string {
	t.Helper()
	outs, err := engine.Outputs(t.Context(), p)
	must(t, err)
	var names []string
	for _, o := range outs {
		names = append(names, attemptTag.ReplaceAllString(o, ".$1"))
	}
	slices.Sort(names)
	return names
}

func continueLinearFixture(t *testing.T, fx linearFixture) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fx.dir)); err != nil {
		t.Fatalf("copy %s: %v", fx.dir, err)
	}
	p, err := spec.Load(filepath.Join(dir, "pipeline.yaml"))
	must(t, err)
	stateDir := filepath.Join(dir, "state", p.Name)
	head := fixtureHead(t, stateDir)
	if head.Epoch != fx.stop || head.Generation != 1 {
		t.Fatalf("fixture head: generation %d epoch %d; want generation 1 epoch %d", head.Generation, head.Epoch, fx.stop)
	}
	fixtureGen := readGeneration(t, stateDir, 1)
	if len(fixtureGen.Plan) > 0 {
		var rows int64
		deltas := 0
		for _, op := range head.Operators {
			for _, f := range op.Files {
				rows += f.Rows
			}
			deltas += len(op.Deltas)
		}
		if rows == 0 || deltas == 0 {
			t.Fatalf("fixture head holds %d base rows and %d deltas: it does not exercise restoring bases and deltas", rows, deltas)
		}
	}
	before := committedRows(t, p)
	if len(before) == 0 && len(fixtureGen.Plan) == 0 {
		t.Fatal("fixture holds no output rows") // a windowed fixture may hold only open windows
	}

	// The plan the current code makes is the fixture's: same generation.
	rep, err := engine.Plan(t.Context(), p, engine.Options{})
	must(t, err)
	if rep.NewGeneration || !rep.Compatible {
		t.Fatalf("plan of the fixture: new generation %v (%s), compatible %v (%s); want the fixture's generation continued",
			rep.NewGeneration, rep.Reason, rep.Compatible, rep.Incompatible)
	}
	res := run(t, p, engine.Options{Drain: true})
	if res.FirstEpoch != head.Epoch+1 || res.Generation != 1 {
		t.Fatalf("continued at generation %d epoch %d; want generation 1 epoch %d", res.Generation, res.FirstEpoch, head.Epoch+1)
	}
	if g := readGeneration(t, stateDir, 1); g.PlanHash != fixtureGen.PlanHash {
		t.Fatalf("plan hash %s, fixture's %s", g.PlanHash, fixtureGen.PlanHash)
	}
	got, gotShapes := committedRows(t, p), outputShapes(t, p)

	// Reference: a fresh, uninterrupted run over the same input.
	rd := t.TempDir()
	must(t, os.CopyFS(filepath.Join(rd, "in"), os.DirFS(filepath.Join(fx.dir, "in"))))
	must(t, os.WriteFile(filepath.Join(rd, "pipeline.yaml"), []byte(fx.spec), 0o644))
	ref, err := spec.Load(filepath.Join(rd, "pipeline.yaml"))
	must(t, err)
	rres := run(t, ref, engine.Options{Drain: true})
	want, wantShapes := committedRows(t, ref), outputShapes(t, ref)
	slices.Sort(got)
	slices.Sort(want)
	if rres.LastEpoch != res.LastEpoch {
		t.Errorf("continued fixture ends at epoch %d, a fresh run at %d", res.LastEpoch, rres.LastEpoch)
	}
	if m, x := sortedDiff(want, got); len(m) > 0 || len(x) > 0 {
		t.Errorf("continued fixture: %d rows, a fresh run %d: %d missing, %d extra\nmissing: %q\nextra: %q",
			len(got), len(want), len(m), len(x), m[:min(len(m), 5)], x[:min(len(x), 5)])
	}
	if !slices.Equal(gotShapes, wantShapes) {
		t.Errorf("output names and splitting differ from a fresh run's:\ncontinued: %q\nfresh:     %q", gotShapes, wantShapes)
	}
	t.Logf("fixture at epoch %d (%d rows) continued to epoch %d; %d rows and %d output names equal a fresh run's",
		head.Epoch, len(before), res.LastEpoch, len(want), len(wantShapes))
}

// regenerateLinearFixture writes fx's directory: spec, input, and the
// state and sink of a run stopped at fx.stop. The run happens in a
// temporary directory (the identity and marker record where it ran), which
// is then copied whole into fx.dir.
func regenerateLinearFixture(t *testing.T, fx linearFixture) {
	tmp := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(tmp, "in"), 0o755))
	must(t, os.WriteFile(filepath.Join(tmp, "pipeline.yaml"), []byte(fx.spec), 0o644))
	for i, o := range linearFixtureData {
		prefix := []string{"a-", "b-"}[i]
		must(t, datagen.Generate(o, func(name string, data []byte) error {
			return os.WriteFile(filepath.Join(tmp, "in", prefix+name), data, 0o644)
		}))
	}
	p, err := spec.Load(filepath.Join(tmp, "pipeline.yaml"))
	must(t, err)
	res := run(t, p, engine.Options{UntilEpoch: fx.stop})
	if res.LastEpoch != fx.stop {
		t.Fatalf("regenerate: stopped at epoch %d, want %d", res.LastEpoch, fx.stop)
	}
	// The file store's lock and temp folders are not part of the state.
	var junk []string
	must(t, filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == ".floe-locks" || d.Name() == ".floe-tmp") {
			junk = append(junk, p)
			return filepath.SkipDir
		}
		return err
	}))
	for _, j := range junk {
		must(t, os.RemoveAll(j))
	}
	must(t, os.RemoveAll(fx.dir))
	must(t, os.CopyFS(fx.dir, os.DirFS(tmp)))
	t.Logf("regenerated %s", fx.dir)
}
