package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/floe-dev/floe/bench/nexmark"
)

// TestMain lets the test binary act as the harness's child process
// (bench.Spawn re-executes the running binary with --child KIND --job JSON).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "--child" {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLinkHistory: the history holds every file of a stream but its last
// (by name), and the side input whole; the held-back files are returned.
func TestLinkHistory(t *testing.T) {
	src, dst := nexmark.Layout{Dir: t.TempDir()}, nexmark.Layout{Dir: t.TempDir()}
	write := func(stream string, names ...string) {
		d := src.StreamDir(nexmark.Parquet, stream)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(d, n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(nexmark.Bids, "bids-00002.parquet", "bids-00000.parquet", "bids-00001.parquet")
	write(nexmark.SideInput, "side-00000.parquet")
	last, err := linkHistory(src, dst, nexmark.Parquet)
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 || filepath.Base(last[0][0]) != "bids-00002.parquet" ||
		last[0][1] != filepath.Join(dst.StreamDir(nexmark.Parquet, nexmark.Bids), "bids-00002.parquet") {
		t.Fatalf("held back %v, want bids-00002.parquet only", last)
	}
	got := func(stream string) []string {
		m, _ := filepath.Glob(filepath.Join(dst.StreamDir(nexmark.Parquet, stream), "*"))
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		return m
	}
	if b := got(nexmark.Bids); len(b) != 2 || b[0] != "bids-00000.parquet" || b[1] != "bids-00001.parquet" {
		t.Errorf("history bids %v, want the first two files", b)
	}
	if s := got(nexmark.SideInput); len(s) != 1 {
		t.Errorf("history side input %v, want its one file", s)
	}
	write(nexmark.Persons, "persons-00000.parquet")
	if _, err := linkHistory(src, nexmark.Layout{Dir: t.TempDir()}, nexmark.Parquet); err == nil {
		t.Error("a stream of one file: no error, want one (nothing to hold back)")
	}
}

// TestIncremental runs --incremental end to end on a small data set: a join
// from YAML (q3) and one from Flink SQL (q20). The timed run must read the
// held-back files (rows in > 0) and the outputs must equal DuckDB's.
func TestIncremental(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns floe and DuckDB")
	}
	data := t.TempDir()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--events", "20000", "--files", "4", "--max-files-per-epoch", "2",
		"--data", data, "--runs", "1", "--queries", "q3,q20", "--incremental", "--rate", "20", "--max-delay", "30s"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errb.String())
	}
	rows := regexp.MustCompile(`(?m)^\| (q3|q20) \| parquet \|.*\| (\d+) / (\d+) \| (\d+) \| (\w+) \|$`).FindAllStringSubmatch(out.String(), -1)
	if len(rows) != 2 {
		t.Fatalf("want a table row for q3 and q20, got:\n%s", out.String())
	}
	for _, r := range rows {
		in, _ := strconv.Atoi(r[2])
		if in == 0 || r[5] != "true" {
			t.Errorf("%s: %s rows in after the history, agree %s; want rows in > 0 and agree true\n%s", r[1], r[2], r[5], errb.String())
		}
	}
}
