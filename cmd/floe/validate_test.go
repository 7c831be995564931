package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCLIValidate: a valid spec exits 0 and writes nothing; a spec with
// problems in its fields and in what only compiling finds (an unknown
// column in a filter) exits 2 with each problem as file:line:col: field:
// message; a source that cannot be read to infer its schema is reported
// as not checked.
func TestCLIValidate(t *testing.T) {
	spec, dir := sampleSpec(t)
	before := tree(t, dir)
	code, out, errOut := floe("validate", spec)
	if code != 0 || !strings.Contains(out, "clicks.yaml: valid") {
		t.Fatalf("valid spec: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("validate wrote files:\n%s", after)
	}

	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A compile-time problem: the filter names a column the source lacks.
	bad := filepath.Join(dir, "bad.yaml")
	s := strings.Replace(string(data), "operators:\n", "operators:\n  - filter: \"bites > 0\"\n", 1)
	if s == string(data) {
		t.Fatal("spec edit did not apply")
	}
	os.WriteFile(bad, []byte(s), 0o644)
	code, out, errOut = floe("validate", bad)
	pos := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(bad) + `:\d+:\d+: operators\[0\]\.filter: .*bites`)
	if code != 2 || !pos.MatchString(errOut) || strings.Contains(out, "valid") {
		t.Fatalf("unknown column: code %d, stdout %q, stderr %q; want exit 2 and %s", code, out, errOut, pos)
	}
	// Field problems: every one, each with its position.
	s2 := strings.Replace(string(data), "tumbling: 1m", "tumbling: 1 minute", 1)
	s2 = strings.Replace(s2, "format: parquet", "format: parquett", 1)
	os.WriteFile(bad, []byte(s2), 0o644)
	code, _, errOut = floe("validate", bad, "--json")
	if code != 2 {
		t.Fatalf("two field problems: code %d, stderr %q", code, errOut)
	}
	_, out, _ = floe("validate", bad, "--json")
	var rep struct {
		Valid    bool
		Problems []string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v in %q", err, out)
	}
	if rep.Valid || len(rep.Problems) != 2 || !strings.Contains(rep.Problems[0], "tumbling") || !strings.Contains(rep.Problems[1], "parquett") {
		t.Fatalf("--json problems %q, want the window's and the sink's", rep.Problems)
	}
	for _, p := range rep.Problems {
		if !regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:\d+:\d+: `).MatchString(p) {
			t.Fatalf("problem %q has no file:line:col", p)
		}
	}

	// A Parquet source without a declared schema, whose folder holds no
	// file yet: valid as far as it can tell, and it says what it did not check.
	pq := filepath.Join(dir, "pq.yaml")
	os.MkdirAll(filepath.Join(dir, "empty"), 0o755)
	os.WriteFile(pq, []byte("name: pq\nsource: {type: files, url: empty, format: parquet, event_time: t}\n"+
		"operators:\n  - filter: \"x > 1\"\nsink: {type: files, url: out2, format: parquet}\nstate: {url: st2}\n"), 0o644)
	code, out, errOut = floe("validate", pq)
	if code != 0 || !strings.Contains(out, "valid") || !strings.Contains(out, "not checked: the operators against the source's schema") {
		t.Fatalf("unreadable schema: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "st2")); err == nil {
		t.Fatal("validate created the state folder")
	}
}

// TestCLIVersion: --version and `floe version` print the build and the
// on-storage formats.
func TestCLIVersion(t *testing.T) {
	code, out, _ := floe("--version")
	if code != 0 || !strings.HasPrefix(out, "floe ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: code %d, %q", code, out)
	}
	code, out, _ = floe("version")
	if code != 0 || !strings.Contains(out, "manifest documents (_latest, _generation, _manifest, sink marker, savepoint): writes 2, reads 1..2") ||
		!strings.Contains(out, "floe-window-state/v1") || !strings.Contains(out, "iceberg table: writes format version 2") {
		t.Fatalf("version: code %d, %q", code, out)
	}
	code, out, _ = floe("version", "--json")
	var v struct {
		Module  string
		Formats []struct{ Name, Writes, Reads string }
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Module != "github.com/floe-dev/floe" || len(v.Formats) < 4 {
		t.Fatalf("version --json: code %d, %v, %+v", code, err, v)
	}
}

// TestCLIWarnsWhenRejecting: a run that rejects most of its rows says so
// on stderr, beside the summary, and status names the pipeline rejecting.
func TestCLIWarnsWhenRejecting(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "in"), 0o755)
	var rows strings.Builder
	for i := range 50 {
		rows.WriteString(`{"t":"2024-01-01T00:00:0` + string(rune('0'+i%10)) + `Z","u":"a","n":1.5}` + "\n")
	}
	os.WriteFile(filepath.Join(dir, "in", "a.jsonl"), []byte(rows.String()), 0o644)
	spec := filepath.Join(dir, "p.yaml")
	os.WriteFile(spec, []byte("name: rj\nsource: {type: files, url: in, format: jsonl, schema: {t: timestamp, u: string, n: int64}, event_time: t}\n"+
		"operators:\n  - filter: \"n > 0\"\nsink: {type: files, url: out, format: jsonl}\nstate: {url: st}\n"), 0o644)
	code, out, errOut := floe("run", spec)
	if code != 0 || !strings.Contains(errOut, "warning: this run rejected 100% of its rows (50 of 50)") {
		t.Fatalf("run: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = floe("status", spec)
	if !strings.Contains(out, "rejecting: 100% of the last epoch's rows (50 of 50) were rejected") {
		t.Fatalf("status: code %d, %q", code, out)
	}
}

// TestCLIResetStateSaysWhatItDropped: --reset-state --yes names each
// operator whose state it dropped and how much there was.
func TestCLIResetStateSaysWhatItDropped(t *testing.T) {
	spec, _ := sampleSpec(t)
	if code, _, errOut := floe("run", spec); code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	code, out, errOut := floe("run", spec, "--reset-state", "--yes")
	if code != 0 || !regexp.MustCompile(`reset: dropped the state of operator \S+ \([1-9]\d* rows in its base files, \d+ delta files on top\)`).MatchString(out) {
		t.Fatalf("reset: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestCLIPlanGraphSubtasks: floe plan of a graph pipeline lists each
// stateful stage's subtasks with their key groups and parent state files,
// and says the parallelism change once.
func TestCLIPlanGraphSubtasks(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/pipelines/auctions-graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../testdata")
	s := strings.ReplaceAll(string(data), `"../`, `"`+abs+`/`)
	s = strings.ReplaceAll(s, abs+"/../out", dir+"/out")
	s = strings.ReplaceAll(s, abs+"/../.floe", dir+"/state")
	spec := filepath.Join(dir, "g.yaml")
	os.WriteFile(spec, []byte(s), 0o644)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s\n%s", out, e, s)
	}
	code, out, _ := floe("plan", spec, "--parallelism", "3")
	if code != 0 || strings.Count(out, "2 -> 3") != 1 {
		t.Fatalf("plan: code %d, want the parallelism change said once:\n%s", code, out)
	}
	for _, want := range []string{"stage ", "subtask", "per-category ", "[86, 128)", "op=per-category/s=0001.parquet"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestCLIFromSavepointPath: --from-savepoint takes a savepoint folder's
// path, relative to the working directory, besides a name and a URL.
func TestCLIFromSavepointPath(t *testing.T) {
	spec, dir := sampleSpec(t)
	if code, out, e := floe("run", spec, "--until-epoch", "2"); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	if code, out, e := floe("savepoint", "create", spec, "sp"); code != 0 {
		t.Fatalf("savepoint: %s%s", out, e)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, filepath.Join(dir, "state", "clicks-per-user", "savepoints", "sp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, rel, "_savepoint.json")); err != nil {
		t.Fatalf("savepoint folder: %v", err)
	}
	data, _ := os.ReadFile(spec)
	spec2 := filepath.Join(dir, "moved.yaml")
	os.WriteFile(spec2, []byte(strings.Replace(string(data), `"state"`, `"state2"`, 1)), 0o644)
	code, out, errOut := floe("run", spec2, "--from-savepoint", rel)
	if code != 0 || !strings.Contains(out, "committed epochs") {
		t.Fatalf("--from-savepoint %s: code %d, stdout %q, stderr %q", rel, code, out, errOut)
	}
	code, _, errOut = floe("run", spec2, "--from-savepoint", "./no/such/savepoint")
	if code == 0 || strings.Contains(errOut, "use 1 to 128 letters") || !strings.Contains(errOut, "no/such/savepoint") {
		t.Fatalf("missing path: code %d, stderr %q", code, errOut)
	}
}

// TestCLIGraphPipelineCopied: a graph pipeline's folder copied whole (spec,
// input, state, every sink) runs in its new place with "moved" warnings,
// as a linear one does, and ends with the rows of the original.
func TestCLIGraphPipelineCopied(t *testing.T) {
	root := t.TempDir()
	job2 := filepath.Join(root, "job2")
	if err := os.CopyFS(filepath.Join(job2, "in"), os.DirFS("../../testdata/auctions")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../testdata/pipelines/auctions-graph.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(`"../auctions/`, `"in/`, `"../../out/`, `"out/`, `"../../.floe"`, `"state"`).Replace(string(data))
	os.WriteFile(filepath.Join(job2, "p.yaml"), []byte(s), 0o644)
	if code, out, e := floe("run", filepath.Join(job2, "p.yaml"), "--until-epoch", "2"); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	job3 := filepath.Join(root, "job3")
	if err := os.CopyFS(job3, os.DirFS(job2)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := floe("plan", filepath.Join(job3, "p.yaml"))
	if code != 0 || !strings.Contains(out, "warning: sink per-category moved") || strings.Contains(out, "url changed") {
		t.Fatalf("plan of the copy: code %d\n%s%s", code, out, errOut)
	}
	lines := func(job string) []string {
		if code, out, e := floe("run", filepath.Join(job, "p.yaml"), "--drain"); code != 0 {
			t.Fatalf("run %s: %s%s", job, out, e)
		}
		_, list, _ := floe("outputs", filepath.Join(job, "p.yaml"))
		var rows []string
		for _, f := range strings.Fields(list) {
			f = strings.TrimPrefix(f, "file://")
			if !strings.HasSuffix(f, ".jsonl") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatalf("listed output %s: %v", f, err)
			}
			rows = append(rows, strings.Split(strings.TrimSpace(string(b)), "\n")...)
		}
		slices.Sort(rows)
		return rows
	}
	got, want := lines(job3), lines(job2)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("copied pipeline: %d rows, the original %d", len(got), len(want))
	}
}
