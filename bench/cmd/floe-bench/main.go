// Command floe-bench runs the clickstream benchmark: floe against DuckDB on
// the same deterministic data set, per input format.
//
//	floe-bench --rows 10000000 --files 100 --users 10000 --data DIR --formats parquet,jsonl --runs 3
//
// For each format it generates the data set once (skipped when DIR already
// holds it), then times, each in its own child process (the bench binary
// re-executed) so that peak RSS is measured per engine:
//   - floe's full catch-up from empty state, an epoch every 10 files, drained;
//   - DuckDB's COPY of the same aggregation to a Parquet file;
//   - floe's incremental run over one new file after a committed catch-up of
//     the history, against DuckDB recomputing all files.
//
// It checks that floe's and DuckDB's outputs agree row by row and prints a
// table. --pprof DIR adds one untimed profiled catch-up per format.
//
// That is the "tumbling" case; --cases (default all) adds the issue-8 cases
// over Parquet: keys1m (the same over --users-large users, with the
// incremental run), sliding (5m/1m against tumbling), growing (a 24 h window
// per user with count_distinct over many epochs, with per-epoch state bytes
// read from the manifests) and filter (a filter-only pipeline at several
// epoch sizes). floe and DuckDB runs alternate; a second table gives wall
// and CPU medians, peak RSS and agreement per case (see README.md).
// Exit status: 0 success, 1 the outputs differ, 2 could not run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/internal/datagen"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

type config struct {
	rows    int64
	files   int
	users   int
	data    string
	work    string
	formats []string
	runs    int
	pprof   string
	// Issue 8 cases.
	cases        []string
	usersLarge   int   // keys1m: distinct users
	growRows     int64 // growing: rows in the history files
	growUsers    int   // growing: distinct users
	dailyPer     int   // growing: files per epoch
	filterEpochs []int // filter: files per epoch, one measurement each
}

// allCases lists --cases in the order they run.
var allCases = []string{"tumbling", "keys1m", "sliding", "growing", "filter"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("floe-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var formats, cases, filterEpochs, child, job string
	fs.Int64Var(&c.rows, "rows", 10_000_000, "rows in the history files")
	fs.IntVar(&c.files, "files", 100, "history files (one more is generated for the incremental run)")
	fs.IntVar(&c.users, "users", 10_000, "distinct users")
	fs.StringVar(&c.data, "data", "", "directory for the generated data sets (required)")
	fs.StringVar(&c.work, "work", "", "directory for run outputs and state (default: a temporary directory)")
	fs.StringVar(&formats, "formats", "parquet,jsonl", "input formats to benchmark")
	fs.IntVar(&c.runs, "runs", 3, "timed runs per measurement (the median is reported)")
	fs.StringVar(&c.pprof, "pprof", "", "write a CPU profile of one extra floe catch-up per format here")
	fs.StringVar(&cases, "cases", strings.Join(allCases, ","), "comma list of cases to run: "+strings.Join(allCases, ", ")+
		" (tumbling: the original benchmark per --formats; keys1m: tumbling over --users-large users, with the incremental run;"+
		" sliding: 5m/1m sliding vs the same tumbling; growing: a 24h window per user over many epochs; filter: a filter-only pipeline)")
	fs.IntVar(&c.usersLarge, "users-large", 1_000_000, "distinct users of the keys1m case")
	fs.Int64Var(&c.growRows, "growing-rows", 2_000_000, "growing: rows in the --files history files")
	fs.IntVar(&c.growUsers, "growing-users", 200_000, "growing: distinct users")
	fs.IntVar(&c.dailyPer, "growing-files-per-epoch", 4, "growing: files per epoch (100 files / 4 = 25 epochs)")
	fs.StringVar(&filterEpochs, "filter-files-per-epoch", "10,50,100", "filter: epoch sizes to measure, files per epoch")
	fs.StringVar(&child, "child", "", "internal: run one job (floe or duckdb) and report JSON")
	fs.StringVar(&job, "job", "", "internal: the child's job, JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if child != "" {
		if err := runChild(ctx, child, job, stdout); err != nil {
			fmt.Fprintf(stderr, "floe-bench child %s: %v\n", child, err)
			return 2
		}
		return 0
	}
	c.formats = strings.Split(formats, ",")
	c.cases = strings.Split(cases, ",")
	for _, k := range c.cases {
		if !slices.Contains(allCases, k) {
			fmt.Fprintf(stderr, "floe-bench: --cases: unknown case %q (want some of %s)\n", k, strings.Join(allCases, ","))
			return 2
		}
	}
	for _, f := range strings.Split(filterEpochs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "floe-bench: --filter-files-per-epoch: %q is not a positive number\n", f)
			return 2
		}
		c.filterEpochs = append(c.filterEpochs, n)
	}
	if c.data == "" || c.runs < 1 || c.dailyPer < 1 || c.usersLarge < 1 || c.growRows < 1 || c.growUsers < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "floe-bench: --data is required, --runs, --growing-* and --users-large must be >= 1, no arguments")
		return 2
	}
	ok, err := benchmark(ctx, c, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "floe-bench: %v\n", err)
		return 2
	}
	if !ok {
		return 1
	}
	return 0
}

// runChild runs one job in this process and writes its result as JSON.
func runChild(ctx context.Context, kind, job string, stdout io.Writer) error {
	var res any
	switch kind {
	case "floe":
		var j bench.FloeJob
		if err := json.Unmarshal([]byte(job), &j); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		if j.CPUProfile != "" {
			f, err := os.Create(j.CPUProfile)
			if err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		r, err := bench.RunFloe(ctx, j)
		if err != nil {
			return err
		}
		res = r
	case "duckdb":
		var j bench.DuckJob
		if err := json.Unmarshal([]byte(job), &j); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		r, err := bench.RunDuckDB(ctx, j)
		if err != nil {
			return err
		}
		res = r
	default:
		return fmt.Errorf("unknown child kind %q", kind)
	}
	return bench.WriteChildResult(stdout, res)
}

// row is one format's line of the result table.
type row struct {
	format                      string // label: the format, and the key count when not --users
	users                       int
	floeSec, duckSec            float64
	floeRSS, duckRSS            float64
	rows                        int64
	incSec, duckAllSec, incRSS  float64
	cmp                         *bench.Comparison
	floeRuns, duckRuns, incRuns []float64
	duckAllRuns                 []float64
	catchupNoDrain, duckAllRSS  float64
	epochs                      int
	floeCPU, duckCPU            []float64 // CPU seconds (user+sys) per run
	incCPU, duckAllCPU          []float64
}

func benchmark(ctx context.Context, c config, stdout, stderr io.Writer) (bool, error) {
	work := c.work
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "floe-bench-"); err != nil {
			return false, err
		}
		defer os.RemoveAll(work)
	}
	if c.pprof != "" {
		if err := os.MkdirAll(c.pprof, 0o755); err != nil {
			return false, err
		}
	}
	var rows []*row
	var results []*caseResult
	allOK := true
	stopLoad := sampleLoad(ctx)
	for _, k := range c.cases {
		switch k {
		case "tumbling":
			for _, format := range c.formats {
				r, err := benchFormat(ctx, c, format, c.users, work, stderr)
				if err != nil {
					return false, fmt.Errorf("%s: %w", format, err)
				}
				rows = append(rows, r)
				allOK = allOK && r.cmp.Equal()
			}
		case "keys1m":
			r, err := benchFormat(ctx, c, datagen.Parquet, c.usersLarge, work, stderr)
			if err != nil {
				return false, fmt.Errorf("keys1m: %w", err)
			}
			rows = append(rows, r)
			allOK = allOK && r.cmp.Equal()
			results = append(results, keysResults(c, r)...)
		default:
			res, err := benchCase(ctx, c, k, work, stderr)
			if err != nil {
				return false, fmt.Errorf("%s: %w", k, err)
			}
			for _, r := range res {
				allOK = allOK && r.ok()
			}
			results = append(results, res...)
		}
	}
	load := stopLoad()
	if len(rows) > 0 {
		printTable(stdout, c, rows)
	}
	if len(results) > 0 {
		printCases(stdout, c, results, load)
	}
	return allOK, nil
}

func benchFormat(ctx context.Context, c config, format string, users int, work string, log io.Writer) (*row, error) {
	d := bench.Dataset{Rows: c.rows, Files: c.files, Users: users, Format: format}
	l, err := bench.Generate(c.data, d, log)
	if err != nil {
		return nil, err
	}
	hist, err := l.HistoryFiles()
	if err != nil {
		return nil, err
	}
	if len(hist) != c.files {
		return nil, fmt.Errorf("data set %s has %d files, want %d", l.History, len(hist), c.files)
	}
	r := &row{format: format, rows: c.rows, users: users}
	if users != c.users {
		r.format = fmt.Sprintf("%s, %d users", format, users)
	}
	base := filepath.Join(work, fmt.Sprintf("%s-%d", format, users))
	newRunDir := func(name string, files ...string) (bench.FloeJob, error) {
		dir := filepath.Join(base, name)
		if err := os.RemoveAll(dir); err != nil {
			return bench.FloeJob{}, err
		}
		j := bench.FloeJob{Source: filepath.Join(dir, "src"), Format: format,
			Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state")}
		return j, bench.LinkFiles(j.Source, files...)
	}

	// Full catch-up, drained, alternating with DuckDB over the same files.
	var lastOutputs []string
	duckOut := filepath.Join(base, "duckdb.parquet")
	for i := range c.runs {
		j, err := newRunDir(fmt.Sprintf("full-%d", i), hist...)
		if err != nil {
			return nil, err
		}
		j.Drain = true
		var fr bench.FloeResult
		rss, err := bench.Spawn(ctx, "floe", j, &fr, log, &r.floeCPU)
		if err != nil {
			return nil, err
		}
		if fr.Rows != c.rows {
			return nil, fmt.Errorf("floe read %d rows, want %d", fr.Rows, c.rows)
		}
		fmt.Fprintf(log, "%s floe catch-up run %d: %.2fs, %d epochs, peak RSS %.0f MiB, %d late\n",
			format, i+1, fr.Seconds, fr.Epochs, rss, fr.RowsLate)
		r.floeRuns = append(r.floeRuns, fr.Seconds)
		r.floeRSS = max(r.floeRSS, rss)
		r.epochs = fr.Epochs
		if i == c.runs-1 {
			lastOutputs = fr.Outputs
		} else if err := os.RemoveAll(filepath.Dir(j.Source)); err != nil {
			return nil, err
		}

		var dr bench.DuckResult
		rss, err = bench.Spawn(ctx, "duckdb", bench.DuckJob{Files: hist, Format: format, Out: duckOut}, &dr, log, &r.duckCPU)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "%s duckdb run %d: %.2fs, peak RSS %.0f MiB\n", format, i+1, dr.Seconds, rss)
		r.duckRuns = append(r.duckRuns, dr.Seconds)
		r.duckRSS = max(r.duckRSS, rss)
	}
	r.floeSec = bench.Median(r.floeRuns)
	r.duckSec = bench.Median(r.duckRuns)
	if r.cmp, err = bench.Compare(ctx, lastOutputs, duckOut); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%s outputs: floe %+v, duckdb %+v, only-floe %d, only-duckdb %d\n",
		format, r.cmp.Floe, r.cmp.DuckDB, r.cmp.OnlyFloe, r.cmp.OnlyDuckDB)
	if err := os.RemoveAll(filepath.Join(base, fmt.Sprintf("full-%d", c.runs-1))); err != nil {
		return nil, err
	}

	// Incremental: the history committed (not drained), then one new file.
	hj, err := newRunDir("history", hist...)
	if err != nil {
		return nil, err
	}
	var hr bench.FloeResult
	if _, err := bench.Spawn(ctx, "floe", hj, &hr, log, nil); err != nil {
		return nil, err
	}
	r.catchupNoDrain = hr.Seconds
	for i := range c.runs {
		dir := filepath.Join(base, fmt.Sprintf("inc-%d", i))
		if err := copyTree(filepath.Dir(hj.Source), dir); err != nil {
			return nil, err
		}
		j := hj
		j.Source, j.Sink, j.State = filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
		if err := bench.LinkFiles(j.Source, l.Extra); err != nil {
			return nil, err
		}
		var ir bench.FloeResult
		rss, err := bench.Spawn(ctx, "floe", j, &ir, log, &r.incCPU)
		if err != nil {
			return nil, err
		}
		if ir.Files != 1 {
			return nil, fmt.Errorf("incremental run read %d files, want 1", ir.Files)
		}
		fmt.Fprintf(log, "%s floe incremental run %d: %.3fs, %d rows, peak RSS %.0f MiB\n", format, i+1, ir.Seconds, ir.Rows, rss)
		r.incRuns = append(r.incRuns, ir.Seconds)
		r.incRSS = max(r.incRSS, rss)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		var dr bench.DuckResult
		rss, err = bench.Spawn(ctx, "duckdb", bench.DuckJob{Files: append(append([]string{}, hist...), l.Extra), Format: format, Out: duckOut}, &dr, log, &r.duckAllCPU)
		if err != nil {
			return nil, err
		}
		r.duckAllRuns = append(r.duckAllRuns, dr.Seconds)
		r.duckAllRSS = max(r.duckAllRSS, rss)
	}
	r.incSec = bench.Median(r.incRuns)
	all := r.duckAllRuns
	r.duckAllSec = bench.Median(all)
	fmt.Fprintf(log, "%s duckdb over %d files: %v\n", format, c.files+1, all)
	if err := os.RemoveAll(filepath.Dir(hj.Source)); err != nil {
		return nil, err
	}

	if c.pprof != "" {
		j, err := newRunDir("pprof", hist...)
		if err != nil {
			return nil, err
		}
		j.Drain = true
		j.CPUProfile = filepath.Join(c.pprof, format+".cpu.pprof")
		var fr bench.FloeResult
		if _, err := bench.Spawn(ctx, "floe", j, &fr, log, nil); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "%s profiled catch-up: %.2fs -> %s\n", format, fr.Seconds, j.CPUProfile)
		if err := os.RemoveAll(filepath.Dir(j.Source)); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// copyTree copies the directory src to dst (files re-linked where possible;
// floe never modifies a file it wrote, so links are safe).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		t := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(t, 0o755)
		}
		if os.Link(p, t) == nil {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(t, data, 0o644)
	})
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func printTable(w io.Writer, c config, rows []*row) {
	fmt.Fprintf(w, "\nclickstream benchmark %s: %d rows, %d files (+1 incremental), %d users, %d runs (median)\n",
		time.Now().UTC().Format("2006-01-02"), c.rows, c.files, c.users, c.runs)
	fmt.Fprintf(w, "machine: nproc %d, GOMAXPROCS %d, %s, %s/%s\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "| format | floe s | DuckDB s | ratio | floe rows/s | floe peak RSS MiB | DuckDB peak RSS MiB | incr. floe s | DuckDB all s | incr. speedup | outputs agree |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2fx | %.0f | %.0f | %.0f | %.3f | %.2f | %.1fx | %v (%d windows, %d clicks, %d bytes) |\n",
			r.format, r.floeSec, r.duckSec, r.floeSec/r.duckSec, float64(r.rows)/r.floeSec, r.floeRSS, r.duckRSS,
			r.incSec, r.duckAllSec, r.duckAllSec/r.incSec, r.cmp.Equal(), r.cmp.Floe.Windows, r.cmp.Floe.Clicks, r.cmp.Floe.TotalBytes)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%s: floe runs %v, DuckDB runs %v, incremental runs %v, DuckDB-all runs %v, %d epochs; history catch-up without drain %.2fs; incremental peak RSS %.0f MiB, DuckDB-all peak RSS %.0f MiB\n",
			r.format, round(r.floeRuns), round(r.duckRuns), round(r.incRuns), round(r.duckAllRuns), r.epochs, r.catchupNoDrain, r.incRSS, r.duckAllRSS)
	}
	for _, r := range rows {
		fc, dc := bench.Median(r.floeCPU), bench.Median(r.duckCPU)
		fmt.Fprintf(w, "%s CPU seconds (user+sys, median; fairer on a busy machine): floe %.2f, DuckDB %.2f, ratio %.2fx\n",
			r.format, fc, dc, fc/dc)
	}
	fmt.Fprintf(w, "targets: catch-up <= 2x DuckDB (parquet), <= 1.5x (jsonl); floe peak RSS < 500 MiB; incremental >= 10x faster than DuckDB recomputing\n")
}

func round(xs []float64) []string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.3f", x)
	}
	return s
}
