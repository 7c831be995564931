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
