// Command floe-nexmark runs the Nexmark queries of bench/nexmark with floe
// and with DuckDB over the same generated files, compares the outputs row
// for row and prints a table of timings.
//
//	floe-nexmark --events 1000000 --data /tmp/nexmark --queries q0,q1,q11 --runs 3
//
// The data set is generated once under --data (a completion marker skips
// generation next time). Each run of each engine is a child process (this
// binary re-executed), so timings, CPU seconds and peak RSS are its own.
// Queries that need a graph (joins, window over window, top-N, dedup,
// lookup) are reported as not runnable yet; DuckDB's reference answer is
// still computed once for them (rows, seconds).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/bench/nexmark"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "floe-nexmark: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	events      int64
	data, work  string
	queries     string
	formats     string
	runs        int
	files       int
	maxFiles    int
	rate        float64
	maxDelay    time.Duration
	seed        uint64
	parallelism int
	keep        bool
	pprof       string
	incremental bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("floe-nexmark", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var child, job string
	fs.Int64Var(&o.events, "events", 1_000_000, "events to generate (persons:auctions:bids = 1:3:46)")
	fs.StringVar(&o.data, "data", "", "folder for the generated data sets (required)")
	fs.StringVar(&o.work, "work", "", "folder for run outputs and state (default: <data>/runs)")
	fs.StringVar(&o.queries, "queries", "all", "comma-separated query names, all, or runnable")
	fs.StringVar(&o.formats, "formats", "parquet", "comma-separated input formats: parquet, jsonl")
	fs.IntVar(&o.runs, "runs", 3, "timed runs per engine and query (the median is reported)")
	fs.IntVar(&o.files, "files", 20, "files per stream")
	fs.IntVar(&o.maxFiles, "max-files-per-epoch", 5, "floe's source.max_files_per_epoch")
	fs.Float64Var(&o.rate, "rate", 10000, "events per second of event time")
	fs.DurationVar(&o.maxDelay, "max-delay", 2*time.Second, "event-time disorder bound (also floe's max_out_of_orderness)")
	fs.Uint64Var(&o.seed, "seed", 1, "generator seed (>= 1)")
	fs.IntVar(&o.parallelism, "parallelism", 0, "floe state.parallelism (0: GOMAXPROCS)")
	fs.BoolVar(&o.keep, "keep", false, "keep the last run's outputs and state")
	fs.StringVar(&o.pprof, "pprof", "", "write a CPU profile of each query's last floe run here (<query>-<format>.pprof)")
	fs.BoolVar(&o.incremental, "incremental", false, "time one more file after a history instead of the catch-up: floe runs over all but the last file of each stream (no drain), then the last file lands and the next run is timed against DuckDB over all files")
	fs.StringVar(&child, "child", "", "internal: run one job (floe or duckdb) and report JSON")
	fs.StringVar(&job, "job", "", "internal: the child's job, JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if child != "" {
		return runChild(ctx, child, job, stdout)
	}
	if o.data == "" {
		return errors.New("--data is required")
	}
	if o.runs < 1 {
		return fmt.Errorf("--runs must be >= 1, got %d", o.runs)
	}
	if o.seed == 0 {
		return errors.New("--seed must be >= 1")
	}
	qs, err := lookupQueries(o.queries)
	if err != nil {
		return err
	}
	formats := strings.Split(o.formats, ",")
	for _, f := range formats {
		if f != nexmark.Parquet && f != nexmark.JSONL {
			return fmt.Errorf("--formats: unknown format %q (parquet, jsonl)", f)
		}
	}
	cfg := nexmark.Config{Events: o.events, Seed: o.seed, EventsPerSecond: o.rate, MaxDelay: o.maxDelay,
		Files: o.files, Formats: formats}
	dir := filepath.Join(o.data, fmt.Sprintf("%d-s%d-r%g-d%s-f%d", o.events, o.seed, o.rate, o.maxDelay, o.files))
	layout, st, err := nexmark.Generate(dir, cfg, stderr)
	if err != nil {
		return err
	}
	if o.work == "" {
		o.work = filepath.Join(o.data, "runs")
	}
	fmt.Fprintf(stdout, "Nexmark: %d events (%d persons, %d auctions, %d bids), %g events/s of event time, disorder < %s, %d files a stream, seed %d; floe %d files an epoch then drain\n\n",
		o.events, st.Persons, st.Auctions, st.Bids, o.rate, o.maxDelay, o.files, o.seed, o.maxFiles)
	if o.incremental {
		fmt.Fprintln(stdout, incrementalHeader)
	} else {
		fmt.Fprintln(stdout, "| query | format | floe s | DuckDB s | ratio | floe CPU s | DuckDB CPU s | CPU ratio | floe peak RSS MiB | rows | agree |")
		fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|---|---|")
	}
	var failed []string
	for _, q := range qs {
		for _, f := range formats {
			run := runQuery
			if o.incremental {
				run = runIncremental
			}
			line, ok, err := run(ctx, o, layout, q, f, stderr)
			if err != nil {
				return fmt.Errorf("%s %s: %w", q.Name, f, err)
			}
			fmt.Fprintln(stdout, line)
			if !ok {
				failed = append(failed, q.Name+"/"+f)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("outputs differ: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runQuery times q in format f with both engines and compares the last
// runs' outputs. ok is false when a runnable query's outputs differ.
func runQuery(ctx context.Context, o options, l nexmark.Layout, q nexmark.Query, f string, stderr io.Writer) (string, bool, error) {
	base := filepath.Join(o.work, q.Name+"-"+f)
	if err := os.RemoveAll(base); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", false, err
	}
	if !o.keep {
		defer os.RemoveAll(base)
	}
	duckOut := filepath.Join(base, "duckdb.parquet")
	runs := o.runs
	if !q.Runnable() {
		runs = 1
	}
	var duckSec, duckCPU []float64
	var dr nexmark.DuckResult
	for range runs {
		if _, err := bench.Spawn(ctx, "duckdb", nexmark.DuckJob{Query: q.Name, Data: l.Dir, Format: f, Out: duckOut}, &dr, stderr, &duckCPU); err != nil {
			return "", false, err
		}
		duckSec = append(duckSec, dr.Seconds)
	}
	if !q.Runnable() {
		return fmt.Sprintf("| %s | %s | - | %.3f | - | - | %.2f | - | - | %d | not runnable yet (needs %s) |",
			q.Name, f, nexmark.Median(duckSec), nexmark.Median(duckCPU), dr.Rows, q.Needs), true, nil
	}
	var floeSec, floeCPU []float64
	var fr nexmark.FloeResult
	var rss float64
	for i := range runs {
		run := filepath.Join(base, fmt.Sprintf("floe-%d", i))
		if i > 0 {
			os.RemoveAll(filepath.Join(base, fmt.Sprintf("floe-%d", i-1)))
		}
		j := nexmark.FloeJob{Query: q.Name, Data: l.Dir, Format: f, Sink: filepath.Join(run, "out"),
			State: filepath.Join(run, "state"), Parallelism: o.parallelism, MaxFilesPerEpoch: o.maxFiles, MaxDelay: o.maxDelay,
			SQL: sqlOnly(q)}
		if o.pprof != "" && i == runs-1 {
			if err := os.MkdirAll(o.pprof, 0o755); err != nil {
				return "", false, err
			}
			j.CPUProfile = filepath.Join(o.pprof, q.Name+"-"+f+".pprof")
		}
		r, err := bench.Spawn(ctx, "floe", j, &fr, stderr, &floeCPU)
		if err != nil {
			return "", false, err
		}
		rss = max(rss, r)
		floeSec = append(floeSec, fr.Seconds)
	}
	c, err := nexmark.Compare(ctx, fr.Outputs, duckOut)
	if err != nil {
		return "", false, err
	}
	agree := fmt.Sprintf("%v", c.Equal())
	if !c.Equal() {
		agree += " (" + c.String() + ")"
	}
	if fr.RowsLate != 0 {
		agree += fmt.Sprintf(" (%d late rows)", fr.RowsLate)
	}
	fs, ds := nexmark.Median(floeSec), nexmark.Median(duckSec)
	fc, dc := nexmark.Median(floeCPU), nexmark.Median(duckCPU)
	fmt.Fprintf(stderr, "%s %s: floe runs %.3f (%d epochs), DuckDB runs %.3f\n", q.Name, f, floeSec, fr.Epochs, duckSec)
	return fmt.Sprintf("| %s | %s | %.3f | %.3f | %.2fx | %.2f | %.2f | %.2fx | %.0f | %d | %s |",
		q.Name, f, fs, ds, fs/ds, fc, dc, fc/dc, rss, c.DuckDBRows, agree), c.Equal() && fr.RowsLate == 0, nil
}

// runChild runs one job in this process and writes its result as JSON.
func runChild(ctx context.Context, kind, job string, stdout io.Writer) error {
	var res any
	switch kind {
	case "floe":
		var j nexmark.FloeJob
		if err := json.Unmarshal([]byte(job), &j); err != nil {
			return fmt.Errorf("child job: %w", err)
		}
		r, err := nexmark.RunFloe(ctx, j)
		if err != nil {
			return err
		}
		res = r
	case "duckdb":
		var j nexmark.DuckJob
		if err := json.Unmarshal([]byte(job), &j); err != nil {
			return fmt.Errorf("child job: %w", err)
		}
		r, err := nexmark.RunDuckDB(ctx, j)
		if err != nil {
			return err
		}
		res = r
	default:
		return fmt.Errorf("unknown child kind %q (floe, duckdb)", kind)
	}
	return bench.WriteChildResult(stdout, res)
}
