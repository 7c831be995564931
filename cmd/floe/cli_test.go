package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleSpec writes a copy of the sample spec whose state and sink live in a
// temp dir, and returns its path.
func sampleSpec(t *testing.T) (spec, dir string) {
	t.Helper()
	dir = t.TempDir()
	events, err := filepath.Abs("../../testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../testdata/pipelines/clicks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(`"../events"`, `"`+events+`"`, `"../../out/clicks"`, `"out"`, `"../../.floe"`, `"state"`).Replace(string(data))
	spec = filepath.Join(dir, "clicks.yaml")
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, dir
}

func floe(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCLIRunTwiceAndOutputs(t *testing.T) {
	spec, dir := sampleSpec(t)
	code, out, errOut := floe("run", spec)
	if code != 0 || !strings.Contains(out, "committed epochs 1..3") {
		t.Fatalf("first run: code %d\n%s%s", code, out, errOut)
	}
	code, out, _ = floe("run", spec)
	if code != 0 || !strings.Contains(out, "nothing new") {
		t.Fatalf("second run: code %d\n%s", code, out)
	}
	code, out, _ = floe("outputs", spec)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 6 {
		t.Fatalf("outputs: code %d, %d lines:\n%s", code, len(lines), out)
	}
	for _, l := range lines {
		p := strings.TrimPrefix(l, "file://")
		if !strings.HasPrefix(p, filepath.Join(dir, "out")) {
			t.Fatalf("output %s not under the sink", l)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("listed output missing: %v", err)
		}
	}
}

func TestCLIPlanWritesNothing(t *testing.T) {
	spec, dir := sampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	before := tree(t, dir)
	code, out, _ := floe("plan", spec, "--parallelism", "3")
	if code != 0 {
		t.Fatalf("plan: code %d\n%s", code, out)
	}
	for _, want := range []string{"parallelism 2 -> 3", "state: compatible", "[0, 43)", "[43, 86)", "[86, 128)", "op=window/s=0001.parquet"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("plan wrote files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nsource: {type: files, url: in, format: jsonl, schema: {t: timestamp}, event_time: t}\n"+
		"operators:\n  - window: {key: [u], tumbling: 1 minute, aggregates: {n: \"count()\"}}\nsink: {type: files, url: out, format: parquet}\nstate: {url: st}\n"), 0o644)
	code, _, errOut := floe("run", bad)
	if code != 2 || !strings.Contains(errOut, "bad.yaml:4:") || !strings.Contains(errOut, "tumbling") {
		t.Fatalf("bad spec: code %d, stderr %q; want exit 2 naming bad.yaml:4 and the field", code, errOut)
	}
	code, _, errOut = floe("run", filepath.Join(dir, "missing.yaml"))
	if code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("missing spec: code %d, stderr %q", code, errOut)
	}
	spec, _ := sampleSpec(t)
	if code, _, errOut = floe("run", spec, "--once", "--trigger", "1s"); code != 2 || !strings.Contains(errOut, "--once") {
		t.Fatalf("conflicting flags: code %d, stderr %q", code, errOut)
	}
}

func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b.WriteString(p + "\n")
		}
		return nil
	})
	return b.String()
}

// TestCLIVerify: a healthy pipeline verifies clean; one flipped byte in a
// state file is reported by name with exit 1, and nothing is written.
func TestCLIVerify(t *testing.T) {
	spec, dir := sampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	code, out, _ := floe("verify", spec)
	if code != 0 || !strings.Contains(out, "0 problems") {
		t.Fatalf("verify of a healthy pipeline: code %d\n%s", code, out)
	}
	var victim string
	filepath.Walk(filepath.Join(dir, "state"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			victim = p
		}
		return nil
	})
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	os.WriteFile(victim, data, 0o644)
	before := tree(t, dir)
	code, out, _ = floe("verify", spec)
	if code != 1 || !strings.Contains(out, filepath.Base(victim)) || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("verify of a damaged state file: code %d\n%s", code, out)
	}
	if tree(t, dir) != before {
		t.Fatal("verify wrote files")
	}
}

// TestCLISpecErrorFirst: a run whose spec does not compile (an unknown
// column in a filter, a bad aggregate, a window keyed by an unknown
// column) prints the error first, with the spec's line and column, and no
// "committed nothing" summary: there is nothing to summarise. A run that
// read a head and failed in its first epoch says so after the reason.
func TestCLISpecErrorFirst(t *testing.T) {
	events, err := filepath.Abs("../../testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	const good = `name: fz
source: {type: files, url: "EVENTS", format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, max_files_per_epoch: 2}
operators:
  - filter: "bytes > 0"
  - window: {key: [user_id], tumbling: 1m,
             aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: out, format: parquet}
state: {url: state, parallelism: 2}
`
	for _, c := range []struct{ name, old, new, want string }{
		{"filter", `"bytes > 0"`, `"nope > 0"`, `spec.yaml:6:13: operators[0].filter: `},
		{"aggregate", `sum(bytes)`, `sum(nope)`, `spec.yaml:7:14: operators[1].window: `},
		{"window key", `key: [user_id]`, `key: [nope]`, `spec.yaml:7:14: operators[1].window: `},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := filepath.Join(dir, "spec.yaml")
			s := strings.Replace(strings.ReplaceAll(good, "EVENTS", events), c.old, c.new, 1)
			if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := floe("run", spec)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != 2 || out != "" || !strings.HasPrefix(lines[0], "floe: "+filepath.Join(dir, c.want)) {
				t.Fatalf("code %d, stdout %q; want stderr to start with %q:\n%s", code, out, "floe: "+c.want, errOut)
			}
			if strings.Contains(errOut, "committed nothing") || len(lines) != 1 {
				t.Fatalf("a compile error is the only line; stderr:\n%s", errOut)
			}
			if after := tree(t, dir); after != spec+"\n" {
				t.Fatalf("a run that does not compile wrote:\n%s", after)
			}
		})
	}

	t.Run("first epoch fails", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "in")
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "a.jsonl"), []byte(`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"/","bytes":1}`+"\n"), 0o644)
		spec := filepath.Join(dir, "p.yaml")
		os.WriteFile(spec, []byte(`name: p
source: {type: files, url: in, format: jsonl, on_error: fail,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}, event_time: event_time}
operators: [{filter: "bytes > 0"}]
sink: {type: files, url: out, format: parquet}
state: {url: state}
`), 0o644)
		if code, out, errOut := floe("run", spec); code != 0 {
			t.Fatalf("first run: code %d\n%s%s", code, out, errOut)
		}
		os.WriteFile(filepath.Join(src, "b.jsonl"), []byte("not json\n"), 0o644)
		code, out, errOut := floe("run", spec)
		lines := lastLines(errOut, 2)
		if code != 2 || out != "" || !strings.HasPrefix(lines[0], "floe: ") || !strings.Contains(lines[0], "on_error: fail") ||
			lines[1] != "pipeline p: this run committed nothing; the head is still epoch 1, where the next run continues" {
			t.Fatalf("code %d, stdout %q, stderr:\n%s", code, out, errOut)
		}
	})
}

// listing lists every file and folder under dir (folders end in "/").
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			if info.IsDir() {
				rel += "/"
			}
			b.WriteString(rel + "\n")
		}
		return nil
	})
	return b.String()
}

// TestCLINothingToCommitWritesNothing: a run that commits nothing writes
// nothing: not with --parallelism 3 and no new input (the new generation
// would be gen=000002), not when its first epoch fails before it writes
// (no uncommitted generation left behind), not the first run of a pipeline
// whose source is empty (no generation, no sink marker). The plan and the
// run log say that --parallelism holds for one run.
func TestCLINothingToCommitWritesNothing(t *testing.T) {
	spec, dir := copiedSampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	state := filepath.Join(filepath.Dir(spec), "state")
	before := listing(t, state)
	sinkBefore := listing(t, filepath.Join(filepath.Dir(spec), "out"))

	code, out, errOut := floe("run", spec, "--parallelism", "3")
	if code != 0 || !strings.Contains(out, "nothing new") {
		t.Fatalf("run with nothing new: code %d\n%s%s", code, out, errOut)
	}
	if after := listing(t, state); after != before {
		t.Fatalf("a run that committed nothing changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !strings.Contains(errOut, "nothing to commit: no generation started") {
		t.Errorf("the run log does not say the generation was not started:\n%s", errOut)
	}

	// New input that fails the first epoch (on_error: fail) before it
	// writes: no gen=000002 either.
	s := strings.Replace(mustRead(t, spec), "max_files_per_epoch: 2,", "max_files_per_epoch: 2, on_error: fail,", 1)
	if !strings.Contains(s, "on_error: fail") {
		t.Fatalf("spec:\n%s", s)
	}
	os.WriteFile(spec, []byte(s), 0o644)
	os.WriteFile(filepath.Join(dir, "events-00009.jsonl"), []byte("not json\n"), 0o644)
	if code, out, errOut := floe("run", spec, "--parallelism", "3"); code != 2 || !strings.Contains(errOut, "on_error: fail") {
		t.Fatalf("failing run: code %d\n%s%s", code, out, errOut)
	}
	if after := listing(t, state); after != before {
		t.Fatalf("a failed run that committed nothing changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := listing(t, filepath.Join(filepath.Dir(spec), "out")); after != sinkBefore {
		t.Fatalf("a failed run that committed nothing changed the sink:\nbefore:\n%s\nafter:\n%s", sinkBefore, after)
	}

	// The plan says the override holds for one run; the run that commits
	// says so too, and starts gen=000002.
	code, out, _ = floe("plan", spec, "--parallelism", "3")
	if code != 0 || !strings.Contains(out, "--parallelism 3 holds for this run only: the next run without --parallelism goes back to state.parallelism 2") {
		t.Fatalf("plan --parallelism 3: code %d\n%s", code, out)
	}
	os.Remove(filepath.Join(dir, "events-00009.jsonl"))
	line := `{"event_time":"2024-01-01T00:20:00Z","user_id":"u1","page":"/","bytes":7}` + "\n"
	os.WriteFile(filepath.Join(dir, "events-00010.jsonl"), []byte(line), 0o644)
	code, out, errOut = floe("run", spec, "--parallelism", "3")
	if code != 0 || !strings.Contains(out, "committed epochs 4..4") || !strings.Contains(errOut, "--parallelism 3 holds for this run only") {
		t.Fatalf("run with input: code %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(state, "clicks-per-user", "gen=000002", "_generation.json")); err != nil {
		t.Fatalf("the run that committed did not start gen=000002: %v", err)
	}
	code, out, _ = floe("plan", spec)
	if code != 0 || !strings.Contains(out, "parallelism 3 -> 2") {
		t.Fatalf("plan without --parallelism after a --parallelism 3 run: code %d\n%s", code, out)
	}

	// A pipeline whose source is empty: its first run writes nothing.
	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "in"), 0o755)
	espec := filepath.Join(empty, "p.yaml")
	os.WriteFile(espec, []byte(`name: p
source: {type: files, url: in, format: jsonl,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}, event_time: event_time}
operators: [{filter: "bytes > 0"}]
sink: {type: files, url: out, format: parquet}
state: {url: state}
`), 0o644)
	ebefore := listing(t, empty)
	if code, out, errOut := floe("run", espec); code != 0 || !strings.Contains(out, "nothing new") {
		t.Fatalf("run over an empty source: code %d\n%s%s", code, out, errOut)
	}
	if after := listing(t, empty); after != ebefore {
		t.Fatalf("the first run over an empty source wrote:\nbefore:\n%s\nafter:\n%s", ebefore, after)
	}
	// Its first file fails (on_error: fail) while the window-less epoch
	// streams: still nothing written.
	os.WriteFile(espec, []byte(strings.Replace(mustRead(t, espec), "format: jsonl,", "format: jsonl, on_error: fail,", 1)), 0o644)
	os.WriteFile(filepath.Join(empty, "in", "a.jsonl"), []byte("not json\n"), 0o644)
	ebefore = listing(t, empty)
	if code, out, errOut := floe("run", espec); code != 2 || !strings.Contains(errOut, "on_error: fail") {
		t.Fatalf("run over a bad first file: code %d\n%s%s", code, out, errOut)
	}
	if after := listing(t, empty); after != ebefore {
		t.Fatalf("a streamed first epoch that failed before writing wrote:\nbefore:\n%s\nafter:\n%s", ebefore, after)
	}
}
