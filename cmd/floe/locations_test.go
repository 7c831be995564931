package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// treeSums returns every file under dir with the sha256 of its content.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[p] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// localSpec writes the sample pipeline with every location in a temp dir
// (its own copy of the sample events, late and rejected folders) and runs
// it once.
func localSpec(t *testing.T) (spec, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "events"), os.DirFS("../../testdata/events")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../testdata/pipelines/clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(`"../events"`, `"events"`, `"../../out/clicks"`, `"out"`, `"../../.floe"`, `"state"`,
		"max_files_per_epoch: 2,", `max_files_per_epoch: 2, late_url: "late", rejected_url: "rejected",`).Replace(string(data))
	spec = filepath.Join(dir, "clicks.yaml")
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	return spec, dir
}

// TestCLIWritePathsRefused: every flag that writes a local file or folder
// (state export --out, replay --out, replay --emit-test, run
// --metrics-file, run --cpuprofile) refuses a destination inside the
// pipeline's state folder, its sink, a side output or its source (a folder
// also when it contains one), however the path is spelled (relative, "..",
// a symbolic link): exit 2, one line naming the flag, the path and the
// location, nothing written. Before, `state export --out
// <state>/<pipeline>/_latest.json` overwrote the head pointer.
func TestCLIWritePathsRefused(t *testing.T) {
	spec, dir := localSpec(t)
	folder := filepath.Join(dir, "state", "clicks-per-user")
	if err := os.Symlink(filepath.Join(dir, "out"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(cwd, filepath.Join(dir, "events", "new.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args       []string
		flag, path string
		where      string
	}{
		{[]string{"state", "export", spec, "--out"}, "--out", filepath.Join(folder, "_latest.json"), "the pipeline's state folder"},
		{[]string{"state", "export", spec, "--out"}, "--out", filepath.Join(dir, "out", "x.parquet"), "sink.url"},
		{[]string{"state", "export", spec, "--out"}, "--out", filepath.Join(dir, "link", "x.parquet"), "sink.url"},
		{[]string{"state", "export", spec, "--out"}, "--out", rel, "source.url"},
		{[]string{"state", "export", spec, "--out"}, "--out", filepath.Join(dir, "late", "x.parquet"), "source.late_url"},
		{[]string{"state", "export", spec, "--out"}, "--out", filepath.Join(dir, "rejected", "x.parquet"), "source.rejected_url"},
		{[]string{"replay", spec, "--epoch", "2", "--out"}, "--out", filepath.Join(folder, "gen=000001", "x.txt"), "the pipeline's state folder"},
		{[]string{"replay", spec, "--epoch", "2", "--out"}, "--out", filepath.Join(dir, "out", "..", "events", "x.jsonl"), "source.url"},
		{[]string{"replay", spec, "--epoch", "2", "--verify", "--out"}, "--out", filepath.Join(dir, "out", "x.txt"), "sink.url"},
		{[]string{"replay", spec, "--epoch", "2", "--emit-test"}, "--emit-test", filepath.Join(dir, "out", "bundle"), "sink.url"},
		{[]string{"replay", spec, "--epoch", "2", "--emit-test"}, "--emit-test", filepath.Join(dir, "state"), "the pipeline's state folder"},
		{[]string{"replay", spec, "--epoch", "2", "--emit-test"}, "--emit-test", dir, "contains"},
		{[]string{"run", spec, "--metrics-file"}, "--metrics-file", filepath.Join(dir, "events", "floe.prom"), "source.url"},
		{[]string{"run", spec, "--metrics-file"}, "--metrics-file", filepath.Join(folder, "floe.prom"), "the pipeline's state folder"},
		{[]string{"run", spec, "--cpuprofile"}, "--cpuprofile", filepath.Join(dir, "out", "cpu.prof"), "sink.url"},
	}
	before := treeSums(t, dir)
	for _, c := range cases {
		args := append(append([]string(nil), c.args...), c.path)
		code, out, errOut := floe(args...)
		line := strings.TrimSpace(errOut)
		if code != 2 || !strings.HasPrefix(line, "floe: "+c.flag+" "+c.path+" ") || !strings.Contains(line, c.where) || strings.Contains(line, "\n") {
			t.Errorf("floe %s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s %s and %s", strings.Join(args, " "), code, out, errOut, c.flag, c.path, c.where)
		}
	}
	if after := treeSums(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused commands changed files:\nbefore %v\nafter  %v", before, after)
	}
	if code, _, errOut := floe("verify", spec); code != 0 {
		t.Fatalf("verify after the refusals: exit %d %s", code, errOut)
	}
	// Beside the pipeline's locations is fine.
	for _, args := range [][]string{
		{"state", "export", spec, "--out", filepath.Join(dir, "export.parquet")},
		{"replay", spec, "--epoch", "2", "--out", filepath.Join(dir, "replay.txt")},
		{"run", spec, "--metrics-file", filepath.Join(dir, "floe.prom")},
	} {
		if code, out, errOut := floe(args...); code != 0 {
			t.Errorf("floe %s: exit %d %s%s", strings.Join(args, " "), code, out, errOut)
		}
		if _, err := os.Stat(args[len(args)-1]); err != nil {
			t.Errorf("floe %s wrote nothing: %v", strings.Join(args, " "), err)
		}
	}
}

// TestCLISavepointMove: the report's sequence with the CLI. floe savepoint
// create in the old state, the folder copied elsewhere, floe run of a spec
// with another state.url and the same sink --from-savepoint the copy: the
// run logs that it takes the sink over; the old spec's next run exits 2
// naming the new owner and deletes nothing from the sink; the new spec runs
// on.
func TestCLISavepointMove(t *testing.T) {
	spec, dir := localSpec(t)
	if code, out, e := floe("savepoint", "create", spec, "tos3"); code != 0 {
		t.Fatalf("savepoint create: %s%s", out, e)
	}
	copied := filepath.Join(t.TempDir(), "tos3")
	if err := os.CopyFS(copied, os.DirFS(filepath.Join(dir, "state", "clicks-per-user", "savepoints", "tos3"))); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	spec2 := filepath.Join(dir, "moved.yaml")
	if err := os.WriteFile(spec2, []byte(strings.Replace(string(text), `url: "state"`, `url: "state2"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := floe("run", spec2, "--from-savepoint", "file://"+copied)
	if code != 0 || !strings.Contains(errOut, "sink taken over") {
		t.Fatalf("restore into the new state: exit %d\n%s%s", code, out, errOut)
	}
	newState := "file://" + filepath.Join(dir, "state2", "clicks-per-user")
	src, err := os.ReadFile("../../testdata/events/events-00000.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events", "events-00099.jsonl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeSums(t, filepath.Join(dir, "out"))
	code, _, errOut = floe("run", spec)
	if code != 2 || !strings.Contains(errOut, "is owned by state "+newState) {
		t.Fatalf("old state's run: exit %d, stderr %q; want exit 2 naming %s", code, errOut, newState)
	}
	if after := treeSums(t, filepath.Join(dir, "out")); !reflect.DeepEqual(before, after) {
		t.Fatalf("the old state's refused run changed the sink:\nbefore %v\nafter  %v", before, after)
	}
	if code, out, errOut := floe("run", spec2); code != 0 || !strings.Contains(out, "committed epoch") {
		t.Fatalf("new state's run: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := floe("verify", spec2); code != 0 {
		t.Fatalf("verify of the new state: exit %d\n%s%s", code, out, errOut)
	}
}
