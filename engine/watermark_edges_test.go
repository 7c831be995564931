package engine_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/store"
)

const review2Session = `
name: s
source: {type: files, url: "{{source}}", format: jsonl, late_url: "{{late}}",
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time, MAXFILES
         watermark: {max_out_of_orderness: 0s}}
operators:
  - window: {key: [user_id], session: {gap: 10s}, allowed_lateness: 0s,
             aggregates: {clicks: "count()"}}
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 2}
`

// TestSessionRowJoiningOpenSessionIsNotLate: results do not depend on how
// files are split into epochs for the case that once did: a row whose own
// [t, t+gap) is behind the watermark but that overlaps a session still open
// is dropped as late, although "a row whose windows were all emitted is
// late" and the session it belongs to was never emitted. One epoch merges it
// into the session ([00:01:28, 00:01:45), 2 clicks); two epochs (a restart,
// or max_files_per_epoch: 1) emit [00:01:35, 00:01:45) with 1 click and
// count the row late.
func TestSessionRowJoiningOpenSessionIsNotLate(t *testing.T) {
	files := map[string][]byte{
		"1.jsonl": jsonl(ev("00:01:35", "a", 1), ev("00:01:40", "b", 1)),
		"2.jsonl": jsonl(ev("00:01:28", "a", 1)),
	}
	results := map[string][]string{}
	for _, mf := range []string{"", "max_files_per_epoch: 1,"} {
		e := fileEnv(t)
		for k, v := range files {
			e.put(t, k, v)
		}
		p := e.pipeline(t, strings.Replace(review2Session, "MAXFILES", mf, 1))
		r := run(t, p, engine.Options{Drain: true})
		if r.RowsLate != 0 {
			t.Errorf("%q: %d rows late; the row at 00:01:28 joins the open session [00:01:35,00:01:45)", mf, r.RowsLate)
		}
		results[mf] = committedRows(t, p)
	}
	if !reflect.DeepEqual(results[""], results["max_files_per_epoch: 1,"]) {
		t.Fatalf("one epoch:\n%s\ntwo epochs:\n%s", strings.Join(results[""], "\n"), strings.Join(results["max_files_per_epoch: 1,"], "\n"))
	}
}

// TestPendingInputHoldsWatermark: results do not depend on
// max_files_per_epoch for the case that once did: with inputs: directory, files
// are taken in key order, so a catch-up with max_files_per_epoch processes
// all of a/ before any of b/. While b has pending (listed, unprocessed)
// files it is not in r.inputs and does not hold the watermark back: a/'s
// second file moves the watermark to 00:05:00 and b's row at 00:00:20 is
// late, although b was never idle. Without the per-epoch limit nothing is
// late.
func TestPendingInputHoldsWatermark(t *testing.T) {
	tmpl := strings.Replace(windowSpec, "watermark: {max_out_of_orderness: 0s}", "inputs: directory, watermark: {max_out_of_orderness: 0s}", 1)
	results := map[bool][]string{}
	for _, limited := range []bool{false, true} {
		e := fileEnv(t)
		e.put(t, "a/0.jsonl", jsonl(ev("00:00:10", "u1", 1)))
		e.put(t, "a/1.jsonl", jsonl(ev("00:05:00", "u1", 1)))
		e.put(t, "b/0.jsonl", jsonl(ev("00:00:20", "u2", 1)))
		s := tmpl
		if !limited {
			s = strings.Replace(s, "max_files_per_epoch: 1", "max_files_per_epoch: 10", 1)
		}
		p := e.pipeline(t, s)
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		r := run(t, p, engine.Options{Drain: true, Now: func() time.Time { return clock }})
		if r.RowsLate != 0 {
			t.Errorf("max_files_per_epoch limited=%v: %d rows late; input b was never idle", limited, r.RowsLate)
		}
		results[limited] = committedRows(t, p)
	}
	if !reflect.DeepEqual(results[false], results[true]) {
		t.Fatalf("one epoch:\n%s\none file per epoch:\n%s", strings.Join(results[false], "\n"), strings.Join(results[true], "\n"))
	}
}

// TestLateRowsKeepTheirColumns: projection pushdown prunes the source to
// the columns the window reads, but late rows are written whole: the
// late_url copy of a late row keeps every source column, also those the
// window does not aggregate (here page), so it can be replayed or inspected.
func TestLateRowsKeepTheirColumns(t *testing.T) {
	e := fileEnv(t)
	p := e.pipeline(t, strings.Replace(windowSpec, "event_time: event_time,", `event_time: event_time, late_url: "{{late}}",`, 1))
	e.put(t, "1.jsonl", jsonl(ev("00:02:30", "u2", 4)))
	e.put(t, "2.jsonl", jsonl(ev("00:00:30", "u1", 8)))
	if r := run(t, p, engine.Options{}); r.RowsLate != 1 {
		t.Fatalf("late = %d, want 1", r.RowsLate)
	}
	ls, err := store.Open(context.Background(), e.late)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	var rows []string
	for _, k := range listKeys(t, e.late) {
		data, _, err := ls.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, parquetRows(t, data)...)
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "page=") {
		t.Fatalf("late rows %q: want the whole source row (with page)", rows)
	}
}

// TestPendingInputIsNotIdle: a listed, pending input is not judged idle;
// the case that once was, with a known input:
// Inputs a and b are both seen in a first run; the next run (cron, 2m
// later, idle_timeout 1m) lists a/1 and b/1. With max_files_per_epoch: 1
// the epoch taking a/1 judges b idle by its LastActive although b/1 is
// listed and pending; the watermark jumps to 00:05:00 and b/1's row at
// 00:00:30 is late. Taking both files in one epoch, nothing is late.
func TestPendingInputIsNotIdle(t *testing.T) {
	tmpl := strings.Replace(windowSpec, "watermark: {max_out_of_orderness: 0s}", "inputs: directory, watermark: {max_out_of_orderness: 0s, idle_timeout: 1m}", 1)
	results := map[bool][]string{}
	for _, limited := range []bool{false, true} {
		e := fileEnv(t)
		s := tmpl
		if !limited {
			s = strings.Replace(s, "max_files_per_epoch: 1", "max_files_per_epoch: 10", 1)
		}
		p := e.pipeline(t, s)
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		e.put(t, "a/0.jsonl", jsonl(ev("00:00:10", "u1", 1)))
		e.put(t, "b/0.jsonl", jsonl(ev("00:00:20", "u2", 1)))
		run(t, p, engine.Options{Now: now})
		clock = clock.Add(2 * time.Minute)
		e.put(t, "a/1.jsonl", jsonl(ev("00:05:00", "u1", 1)))
		e.put(t, "b/1.jsonl", jsonl(ev("00:00:30", "u2", 1)))
		r := run(t, p, engine.Options{Now: now, Drain: true})
		if r.RowsLate != 0 {
			t.Errorf("limited=%v: %d rows late; b/1.jsonl was pending, b was not idle", limited, r.RowsLate)
		}
		results[limited] = committedRows(t, p)
	}
	if !reflect.DeepEqual(results[false], results[true]) {
		t.Fatalf("one epoch:\n%s\none file per epoch:\n%s", strings.Join(results[false], "\n"), strings.Join(results[true], "\n"))
	}
}
