package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	args := []string{"--rows", "1000", "--files", "3", "--users", "7", "--span", "6m", "--format", "csv", "--out", dir, "--seed", "4"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "events-00000.csv,events-00001.csv,events-00002.csv" {
		t.Errorf("files %s", got)
	}
	first, _ := os.ReadFile(filepath.Join(dir, "events-00000.csv"))
	if !strings.HasPrefix(string(first), "event_time,user_id,page,bytes\n2024-01-01T00:00:") {
		t.Errorf("events-00000.csv starts %q", first[:min(len(first), 60)])
	}
	// Same flags again: identical bytes.
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("second run exit %d", code)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "events-00000.csv"))
	if !bytes.Equal(first, again) {
		t.Error("second run wrote different bytes")
	}
}

func TestRunErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--rows", "10"}, "floe-gen: --out is required"},
		{[]string{"--out", t.TempDir(), "--format", "xml"}, `floe-gen: datagen: format must be jsonl, csv or parquet, got "xml"`},
		{[]string{"--out", t.TempDir(), "--start", "monday"}, `floe-gen: --start: parsing time "monday"`},
		{[]string{"--span", "1 hour"}, `invalid value "1 hour" for flag -span`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: stderr %q, want it to contain %q", c.args, stderr.String(), c.want)
		}
	}
}
