package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/bench/nexmark"
)

// lookupQueries resolves --queries: the names Lookup knows (YAML specs)
// and, named one by one, the queries floe runs from Flink SQL only (q9,
// q16, q20).
func lookupQueries(names string) ([]nexmark.Query, error) {
	var out []nexmark.Query
	var rest []string
	for _, n := range strings.Split(names, ",") {
		if q, ok := nexmark.LookupSQLOnly(n); ok {
			out = append(out, q)
			continue
		}
		rest = append(rest, n)
	}
	if len(rest) == 0 {
		return out, nil
	}
	qs, err := nexmark.Lookup(strings.Join(rest, ","))
	if err != nil {
		return nil, err
	}
	return append(out, qs...), nil
}

// sqlOnly reports whether q runs from its Flink SQL (it has no YAML spec).
func sqlOnly(q nexmark.Query) bool {
	_, ok := nexmark.LookupSQLOnly(q.Name)
	return ok
}

const incrementalHeader = "| query | format | history floe s | incr. floe s | incr. floe CPU s | incr. floe peak RSS MiB | DuckDB all s | DuckDB all CPU s | DuckDB peak RSS MiB | ratio wall | ratio CPU | incr. rows in / out | rows | agree |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// runIncremental measures what one more file costs after a history: floe
// runs once, without the drain, over a folder holding all but the last
// file of every stream (hard links into the data set); the last files are
// linked in and the next floe run (no drain either, what a scheduled run
// does when a file lands) is timed against DuckDB answering the query over
// all files. Every timed run starts from a copy of the same committed
// history. A last, untimed run drains, and the history's, the increment's
// and the drain's outputs together must equal DuckDB's answer.
func runIncremental(ctx context.Context, o options, l nexmark.Layout, q nexmark.Query, f string, stderr io.Writer) (string, bool, error) {
	if !q.Runnable() {
		return fmt.Sprintf("| %s | %s | not runnable yet (needs %s) |", q.Name, f, q.Needs), true, nil
	}
	base := filepath.Join(o.work, q.Name+"-"+f+"-incr")
	if err := os.RemoveAll(base); err != nil {
		return "", false, err
	}
	if !o.keep {
		defer os.RemoveAll(base)
	}
	hist := nexmark.Layout{Dir: filepath.Join(base, "data")}
	last, err := linkHistory(l, hist, f)
	if err != nil {
		return "", false, err
	}
	duckOut := filepath.Join(base, "duckdb.parquet")
	var duckSec, duckCPU []float64
	var dr nexmark.DuckResult
	var duckRSS float64
	for range o.runs {
		r, err := bench.Spawn(ctx, "duckdb", nexmark.DuckJob{Query: q.Name, Data: l.Dir, Format: f, Out: duckOut}, &dr, stderr, &duckCPU)
		if err != nil {
			return "", false, err
		}
		duckRSS = max(duckRSS, r)
		duckSec = append(duckSec, dr.Seconds)
	}
	run, snap := filepath.Join(base, "run"), filepath.Join(base, "history")
	job := nexmark.FloeJob{Query: q.Name, Data: hist.Dir, Format: f, Sink: filepath.Join(run, "out"),
		State: filepath.Join(run, "state"), Parallelism: o.parallelism, MaxFilesPerEpoch: o.maxFiles,
		MaxDelay: o.maxDelay, SQL: sqlOnly(q), NoDrain: true}
	var hr nexmark.FloeResult
	var histCPU []float64
	if _, err := bench.Spawn(ctx, "floe", job, &hr, stderr, &histCPU); err != nil {
		return "", false, fmt.Errorf("history run: %w", err)
	}
	if err := os.CopyFS(snap, os.DirFS(run)); err != nil {
		return "", false, fmt.Errorf("copy of the history: %w", err)
	}
	for _, p := range last {
		if err := linkOrCopy(p[0], p[1]); err != nil {
			return "", false, err
		}
	}
	var incSec, incCPU []float64
	var ir nexmark.FloeResult
	var incRSS float64
	for i := range o.runs {
		if i > 0 {
			if err := os.RemoveAll(run); err != nil {
				return "", false, err
			}
			if err := os.CopyFS(run, os.DirFS(snap)); err != nil {
				return "", false, fmt.Errorf("restore of the history: %w", err)
			}
		}
		j := job
		if o.pprof != "" && i == o.runs-1 {
			if err := os.MkdirAll(o.pprof, 0o755); err != nil {
				return "", false, err
			}
			j.CPUProfile = filepath.Join(o.pprof, q.Name+"-"+f+"-incr.pprof")
		}
		r, err := bench.Spawn(ctx, "floe", j, &ir, stderr, &incCPU)
		if err != nil {
			return "", false, fmt.Errorf("incremental run: %w", err)
		}
		incRSS = max(incRSS, r)
		incSec = append(incSec, ir.Seconds)
	}
	drain := job
	drain.NoDrain = false
	var fr nexmark.FloeResult
	if _, err := bench.Spawn(ctx, "floe", drain, &fr, stderr, nil); err != nil {
		return "", false, fmt.Errorf("drain run: %w", err)
	}
	outs := slices.Concat(hr.Outputs, ir.Outputs, fr.Outputs)
	c, err := nexmark.Compare(ctx, outs, duckOut)
	if err != nil {
		return "", false, err
	}
	agree := fmt.Sprintf("%v", c.Equal())
	if !c.Equal() {
		agree += " (" + c.String() + ")"
	}
	late := hr.RowsLate + ir.RowsLate + fr.RowsLate
	if late != 0 {
		agree += fmt.Sprintf(" (%d late rows)", late)
	}
	fmt.Fprintf(stderr, "%s %s incremental: history %.3f s (CPU %.2f, %d epochs, %d rows), incremental runs %.3f (CPU %.2f, %d epochs, %d rows in, %d out), drain %.3f s (%d rows out), DuckDB all runs %.3f (CPU %.2f)\n",
		q.Name, f, hr.Seconds, histCPU[0], hr.Epochs, hr.Rows, incSec, incCPU, ir.Epochs, ir.Rows, ir.RowsOut, fr.Seconds, fr.RowsOut, duckSec, duckCPU)
	is, ds := nexmark.Median(incSec), nexmark.Median(duckSec)
	ic, dc := nexmark.Median(incCPU), nexmark.Median(duckCPU)
	return fmt.Sprintf("| %s | %s | %.3f | %.3f | %.2f | %.0f | %.3f | %.2f | %.0f | %.3fx | %.3fx | %d / %d | %d | %s |",
			q.Name, f, hr.Seconds, is, ic, incRSS, ds, dc, duckRSS, is/ds, ic/dc, ir.Rows, ir.RowsOut, c.DuckDBRows, agree),
		c.Equal() && late == 0, nil
}

// linkHistory fills hist with hard links (copies across file systems) to
// the files of l in format f: every stream without its last file (by
// name, the generator's order), the side input whole. It returns the
// (source, destination) pairs of the held-back files.
func linkHistory(l, hist nexmark.Layout, f string) ([][2]string, error) {
	var last [][2]string
	for _, s := range []string{nexmark.Persons, nexmark.Auctions, nexmark.Bids, nexmark.SideInput} {
		src, dst := l.StreamDir(f, s), hist.StreamDir(f, s)
		files, err := filepath.Glob(filepath.Join(src, "*."+f))
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", src, err)
		}
		if len(files) == 0 {
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		slices.Sort(files)
		if s != nexmark.SideInput {
			if len(files) < 2 {
				return nil, fmt.Errorf("history of %s: %d file, want at least 2 (--files)", src, len(files))
			}
			n := files[len(files)-1]
			last = append(last, [2]string{n, filepath.Join(dst, filepath.Base(n))})
			files = files[:len(files)-1]
		}
		for _, p := range files {
			if err := linkOrCopy(p, filepath.Join(dst, filepath.Base(p))); err != nil {
				return nil, err
			}
		}
	}
	return last, nil
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}
