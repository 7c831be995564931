// Command floe-workers runs issue 27's workers benchmark: floe-bench's
// tumbling case (a 1-minute tumbling count and sum per user over Parquet
// files, max_files_per_epoch 10, drained, file:// state) run two ways,
//
//	(a) one process at --parallelism P (GOMAXPROCS --gomaxprocs-one);
//	(b) --workers W worker processes (engine.Options Workers W, Worker
//	    0..W-1) at the same parallelism, each with GOMAXPROCS
//	    --gomaxprocs-worker, started together,
//
// alternating which goes first, each in fresh directories:
//
//	floe-workers --rows 10000000 --files 100 --users 10000 --data DIR --runs 3
//
// Wall time runs from starting the first child until the last one exits;
// CPU time is the children's user+sys summed; peak RSS is each child's
// VmHWM. Every run's committed outputs are compared row by row with
// DuckDB's over the same files and (b)'s with (a)'s of the same run. The
// requests per epoch are read from the manifests' stats (gets, puts and
// lists of the epochs that read files, summed over the workers' parts:
// the decision and the commit are not in them) and from the children's
// own request counters (everything, barrier polls included), next to the
// cost model's figure for the same shape (what `floe plan --workers W`
// prints: cluster.Protocol + cluster.Work). --scale-workers then measures
// CPU per worker as W grows over a --scale-rows data set at
// --scale-parallelism.
//
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
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

type config struct {
	rows                     int64
	files, users             int
	data, work               string
	runs                     int
	parallelism, workers     int
	procsOne, procsWorker    int
	scaleRows                int64
	scaleWorkers             []int
	scaleParallelism         int
	scaleProcs, scaleProcsW1 int
	pprof                    string
	logDebug                 bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("floe-workers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var scale, child, job string
	var base bench.FloeJob
	fs.Int64Var(&c.rows, "rows", 10_000_000, "rows in the data set")
	fs.IntVar(&c.files, "files", 100, "Parquet files in the data set")
	fs.IntVar(&c.users, "users", 10_000, "distinct users")
	fs.StringVar(&c.data, "data", "", "directory for the generated data sets (required; shared with floe-bench)")
	fs.StringVar(&c.work, "work", "", "directory for run outputs and state (default: a temporary directory)")
	fs.IntVar(&c.runs, "runs", 3, "timed runs of each way (the median is reported)")
	fs.IntVar(&c.parallelism, "parallelism", 2, "state.parallelism of both ways")
	fs.IntVar(&c.workers, "workers", 2, "worker processes of way (b)")
	fs.IntVar(&c.procsOne, "gomaxprocs-one", 2, "GOMAXPROCS of the one process of way (a)")
	fs.IntVar(&c.procsWorker, "gomaxprocs-worker", 1, "GOMAXPROCS of each worker process of way (b)")
	fs.Int64Var(&c.scaleRows, "scale-rows", 1_000_000, "rows of the CPU-per-worker data set (same files and users)")
	fs.StringVar(&scale, "scale-workers", "1,2,4", "worker counts of the CPU-per-worker runs (empty: none)")
	fs.IntVar(&c.scaleParallelism, "scale-parallelism", 4, "state.parallelism of the CPU-per-worker runs")
	fs.IntVar(&c.scaleProcs, "scale-gomaxprocs", 1, "GOMAXPROCS of each process of the CPU-per-worker runs with W > 1")
	fs.IntVar(&c.scaleProcsW1, "scale-gomaxprocs-one", 2, "GOMAXPROCS of the CPU-per-worker run with W = 1")
	fs.StringVar(&c.pprof, "pprof", "", "after the timed runs, one profiled run of each way: CPU profiles DIR/w<W>-<worker>.cpu.pprof")
	fs.BoolVar(&base.LogDebug, "log-debug", false, "the engine's debug log of every child on stderr")
	fs.StringVar(&child, "child", "", "internal: run one floe job and report JSON")
	fs.StringVar(&job, "job", "", "internal: the child's job, JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if child != "" {
		if err := runChild(ctx, child, job, stdout); err != nil {
			fmt.Fprintf(stderr, "floe-workers child %s: %v\n", child, err)
			return 2
		}
		return 0
	}
	for _, f := range strings.Split(scale, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > c.scaleParallelism {
			fmt.Fprintf(stderr, "floe-workers: --scale-workers: %q is not a worker count in 1..%d (--scale-parallelism)\n", f, c.scaleParallelism)
			return 2
		}
		c.scaleWorkers = append(c.scaleWorkers, n)
	}
	if c.data == "" || c.runs < 1 || c.workers < 2 || c.workers > c.parallelism || c.procsOne < 1 || c.procsWorker < 1 ||
		c.scaleProcs < 1 || c.scaleProcsW1 < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "floe-workers: --data is required; --runs and --gomaxprocs-* must be >= 1; 2 <= --workers <= --parallelism; no arguments")
		return 2
	}
	c.logDebug = base.LogDebug
	ok, err := benchmark(ctx, c, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "floe-workers: %v\n", err)
		return 2
	}
	if !ok {
		return 1
	}
	return 0
}

func runChild(ctx context.Context, kind, job string, stdout io.Writer) error {
	if kind != "floe" {
		return fmt.Errorf("unknown child kind %q", kind)
	}
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
	return bench.WriteChildResult(stdout, r)
}

// measurement is one run of the pipeline by w processes.
type measurement struct {
	w         int
	dir       string    // the run's directory
	wall, cpu float64   // seconds: start to the last exit; user+sys of all
	engine    []float64 // per process: engine.Run's own time
	rss       []float64 // per process: peak RSS MiB
	epochs    int       // committed epochs
	epochSec  float64   // the manifests' durations summed (the slowest worker's per epoch), decision and commit excluded
	reqEpochs int       // epochs that read files
	manifest  cluster.Requests
	counted   engine.Requests // the children's own counters, summed
	load      string          // /proc/loadavg before the run
	outputs   []string
	duck      *bench.Comparison // against DuckDB
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// measure runs j in a fresh directory dir by w processes (one process
// when w == 1) with GOMAXPROCS procs each.
func measure(ctx context.Context, j bench.FloeJob, dir string, hist []string, w, procs int, log io.Writer) (*measurement, bench.FloeJob, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, j, err
	}
	j.Source, j.Sink, j.State = filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
	if err := bench.LinkFiles(j.Source, hist...); err != nil {
		return nil, j, err
	}
	m := &measurement{w: w, dir: dir, load: loadAvg()}
	env := []string{"GOMAXPROCS=" + strconv.Itoa(procs)}
	res := make([]bench.FloeResult, w)
	// A worker that fails leaves its peers waiting for it until their
	// --worker-timeout: the first failure stops them all.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type done struct {
		rss, cpu float64
		err      error
	}
	dones := make([]chan done, w)
	t0 := time.Now()
	for i := range w {
		wj := j
		if w > 1 {
			wj.Workers, wj.Worker = w, i
		}
		if j.CPUProfile != "" {
			wj.CPUProfile = filepath.Join(j.CPUProfile, fmt.Sprintf("w%d-%d.cpu.pprof", w, i))
		}
		dones[i] = make(chan done, 1)
		k, err := bench.Start(ctx, "floe", wj, &res[i], log, env)
		if err != nil {
			dones[i] <- done{err: err}
			cancel()
			continue
		}
		go func() {
			rss, cpu, err := k.Wait()
			if err != nil {
				cancel()
			}
			dones[i] <- done{rss, cpu, err}
		}()
	}
	var errs []error
	for i := range w {
		d := <-dones[i]
		if d.err != nil {
			errs = append(errs, fmt.Errorf("worker %d of %d: %w", i, w, d.err))
			continue
		}
		m.rss = append(m.rss, d.rss)
		m.cpu += d.cpu
		m.engine = append(m.engine, res[i].Seconds)
		m.counted = m.counted.Add(res[i].Requests)
	}
	m.wall = time.Since(t0).Seconds()
	if len(errs) > 0 {
		return nil, j, fmt.Errorf("%d process(es): %v", w, errs)
	}
	m.epochs = res[0].Epochs
	var err error
	if m.reqEpochs, m.manifest, err = bench.ManifestRequests(j.State, "clickstream"); err != nil {
		return nil, j, err
	}
	costs, err := bench.EpochCosts(j.State, "clickstream")
	if err != nil {
		return nil, j, err
	}
	for _, c := range costs {
		m.epochSec += c.Seconds
	}
	if m.outputs, err = bench.CommittedOutputs(ctx, j); err != nil {
		return nil, j, err
	}
	return m, j, nil
}

func (m *measurement) String() string {
	return fmt.Sprintf("W=%d: wall %.2fs, CPU %.2fs, engine %v s, epochs' own %.2fs, peak RSS %v MiB, %d epochs, load %s",
		m.w, m.wall, m.cpu, round(m.engine, 2), m.epochSec, round(m.rss, 0), m.epochs, m.load)
}

func round(xs []float64, d int) []string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', d, 64)
	}
	return s
}

// perEpoch divides a request total by n epochs.
func perEpoch(r cluster.Requests, n int) string {
	f := float64(n)
	return fmt.Sprintf("%.1f / %.1f / %.1f", float64(r.Gets)/f, float64(r.Puts)/f, float64(r.Lists)/f)
}

func countedPerEpoch(r engine.Requests, n int) string {
	f := float64(n)
	return fmt.Sprintf("%.1f / %.1f / %.1f", float64(r.Get)/f, float64(r.Put)/f, float64(r.List)/f)
}

func modelText(er *engine.EpochRequests) string {
	t := er.Protocol.Add(er.Work)
	return fmt.Sprintf("%d / %d / %d", t.Gets, t.Puts, t.Lists)
}

// dataset generates (or finds) the Parquet data set of rows rows and
// runs DuckDB's aggregation over it once, untimed: the reference output.
func dataset(ctx context.Context, c config, rows int64, work string, log io.Writer) ([]string, string, error) {
	d := bench.Dataset{Rows: rows, Files: c.files, Users: c.users, Format: datagen.Parquet}
	l, err := bench.Generate(c.data, d, log)
	if err != nil {
		return nil, "", err
	}
	hist, err := l.HistoryFiles()
	if err != nil {
		return nil, "", err
	}
	if len(hist) != c.files {
		return nil, "", fmt.Errorf("data set %s has %d files, want %d", l.History, len(hist), c.files)
	}
	out := filepath.Join(work, fmt.Sprintf("duckdb-%d.parquet", rows))
	if _, err := bench.RunDuckDB(ctx, bench.DuckJob{Files: hist, Format: datagen.Parquet, Out: out}); err != nil {
		return nil, "", err
	}
	return hist, out, nil
}

func benchmark(ctx context.Context, c config, stdout, log io.Writer) (bool, error) {
	work := c.work
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "floe-workers-"); err != nil {
			return false, err
		}
		defer os.RemoveAll(work)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return false, err
	}
	started := time.Now().UTC()
	hist, duckOut, err := dataset(ctx, c, c.rows, work, log)
	if err != nil {
		return false, err
	}
	base := bench.FloeJob{Format: datagen.Parquet, Parallelism: c.parallelism, Drain: true,
		MaxFilesPerEpoch: bench.MaxFilesPerEpoch, RetainEpochs: 1000, LogDebug: c.logDebug}
	allOK := true
	var one, many []*measurement
	var cross []*bench.Comparison
	var model1, modelW *engine.EpochRequests
	for i := range c.runs {
		ways := []int{1, c.workers}
		if i%2 == 1 {
			ways = []int{c.workers, 1}
		}
		var got [2]*measurement
		for _, w := range ways {
			procs := c.procsOne
			if w > 1 {
				procs = c.procsWorker
			}
			dir := filepath.Join(work, fmt.Sprintf("run%d-w%d", i, w))
			if i == 0 {
				j := base
				j.Source, j.Sink, j.State = filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
				if err := bench.LinkFiles(j.Source, hist...); err != nil {
					return false, err
				}
				er, err := bench.ModelRequests(ctx, j, w)
				if err != nil {
					return false, err
				}
				if w == 1 {
					model1 = er
				} else {
					modelW = er
				}
			}
			m, _, err := measure(ctx, base, dir, hist, w, procs, log)
			if err != nil {
				return false, fmt.Errorf("run %d, W=%d: %w", i+1, w, err)
			}
			if m.duck, err = bench.CompareCase(ctx, bench.CaseTumbling, m.outputs, duckOut); err != nil {
				return false, err
			}
			allOK = allOK && m.duck.Equal()
			fmt.Fprintf(log, "run %d %s; equal to DuckDB: %v\n", i+1, m, m.duck.Equal())
			if w == 1 {
				got[0] = m
				one = append(one, m)
			} else {
				got[1] = m
				many = append(many, m)
			}
		}
		x, err := bench.CompareOutputs(ctx, bench.CaseTumbling, got[1].outputs, got[0].outputs)
		if err != nil {
			return false, err
		}
		allOK = allOK && x.Equal()
		cross = append(cross, x)
		fmt.Fprintf(log, "run %d: W=%d equal to one process: %v (%d rows)\n", i+1, c.workers, x.Equal(), x.Floe.Windows)
		for _, m := range got {
			if err := os.RemoveAll(m.dir); err != nil {
				return false, err
			}
		}
	}

	if c.pprof != "" {
		if err := os.MkdirAll(c.pprof, 0o755); err != nil {
			return false, err
		}
		for _, w := range []int{1, c.workers} {
			j := base
			j.CPUProfile = c.pprof
			procs := c.procsOne
			if w > 1 {
				procs = c.procsWorker
			}
			m, _, err := measure(ctx, j, filepath.Join(work, fmt.Sprintf("pprof-w%d", w)), hist, w, procs, log)
			if err != nil {
				return false, fmt.Errorf("profiled run, W=%d: %w", w, err)
			}
			fmt.Fprintf(log, "profiled %s -> %s\n", m, c.pprof)
			if err := os.RemoveAll(m.dir); err != nil {
				return false, err
			}
		}
	}

	var scaled [][]*measurement
	var scaleModels []*engine.EpochRequests
	if len(c.scaleWorkers) > 0 {
		sh, sduck, err := dataset(ctx, c, c.scaleRows, work, log)
		if err != nil {
			return false, err
		}
		sb := base
		sb.Parallelism = c.scaleParallelism
		for _, w := range c.scaleWorkers {
			procs := c.scaleProcs
			if w == 1 {
				procs = c.scaleProcsW1
			}
			var ms []*measurement
			for i := range c.runs {
				dir := filepath.Join(work, fmt.Sprintf("scale-w%d-%d", w, i))
				if i == 0 {
					j := sb
					j.Source, j.Sink, j.State = filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
					if err := bench.LinkFiles(j.Source, sh...); err != nil {
						return false, err
					}
					er, err := bench.ModelRequests(ctx, j, w)
					if err != nil {
						return false, err
					}
					scaleModels = append(scaleModels, er)
				}
				m, _, err := measure(ctx, sb, dir, sh, w, procs, log)
				if err != nil {
					return false, fmt.Errorf("scale W=%d run %d: %w", w, i+1, err)
				}
				if m.duck, err = bench.CompareCase(ctx, bench.CaseTumbling, m.outputs, sduck); err != nil {
					return false, err
				}
				allOK = allOK && m.duck.Equal()
				fmt.Fprintf(log, "scale run %d %s; equal to DuckDB: %v\n", i+1, m, m.duck.Equal())
				if err := os.RemoveAll(dir); err != nil {
					return false, err
				}
				ms = append(ms, m)
			}
			scaled = append(scaled, ms)
		}
	}
	report(stdout, c, started, one, many, cross, model1, modelW, scaled, scaleModels)
	return allOK, nil
}

func median(ms []*measurement, f func(*measurement) float64) float64 {
	xs := make([]float64, len(ms))
	for i, m := range ms {
		xs[i] = f(m)
	}
	return bench.Median(xs)
}

func maxOf(xs []float64) float64 {
	var m float64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func report(w io.Writer, c config, started time.Time, one, many []*measurement, cross []*bench.Comparison,
	model1, modelW *engine.EpochRequests, scaled [][]*measurement, scaleModels []*engine.EpochRequests) {
	fmt.Fprintf(w, "\nworkers benchmark (issue 27) %s-%s UTC: tumbling case, %d rows, %d Parquet files, %d users, max_files_per_epoch %d, drained, file:// state; %d runs a way (median)\n",
		started.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04"), c.rows, c.files, c.users, bench.MaxFilesPerEpoch, c.runs)
	fmt.Fprintf(w, "machine: nproc %d, %s, %s/%s; (a) 1 process, GOMAXPROCS %d; (b) %d processes, GOMAXPROCS %d each; parallelism %d\n\n",
		runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, c.procsOne, c.workers, c.procsWorker, c.parallelism)
	fmt.Fprintf(w, "| way | wall s | CPU s | epochs' own s | peak RSS MiB per process | epochs | requests / epoch, manifests (GET / PUT / LIST) | requests / epoch, all counted | model (GET / PUT / LIST) | equal to DuckDB | load avg (1/5/15 min) per run |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---|---:|---|---|---|---|---|\n")
	row := func(name string, ms []*measurement, er *engine.EpochRequests) {
		last := ms[len(ms)-1]
		var rss []string
		for p := range last.rss {
			rss = append(rss, strconv.FormatFloat(median(ms, func(m *measurement) float64 { return m.rss[p] }), 'f', 0, 64))
		}
		eq := true
		var loads []string
		for _, m := range ms {
			eq = eq && m.duck.Equal()
			loads = append(loads, m.load)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %s | %d | %s | %s | %s | %v | %s |\n", name,
			median(ms, func(m *measurement) float64 { return m.wall }), median(ms, func(m *measurement) float64 { return m.cpu }),
			median(ms, func(m *measurement) float64 { return m.epochSec }),
			strings.Join(rss, ", "), last.epochs, perEpoch(last.manifest, last.reqEpochs), countedPerEpoch(last.counted, last.epochs),
			modelText(er), eq, strings.Join(loads, "; "))
	}
	row("(a) 1 process", one, model1)
	row(fmt.Sprintf("(b) %d workers", c.workers), many, modelW)
	wa, wb := median(one, func(m *measurement) float64 { return m.wall }), median(many, func(m *measurement) float64 { return m.wall })
	ca, cb := median(one, func(m *measurement) float64 { return m.cpu }), median(many, func(m *measurement) float64 { return m.cpu })
	eq := true
	for _, x := range cross {
		eq = eq && x.Equal()
	}
	fmt.Fprintf(w, "\n(b)/(a): wall %.2fx (bar <= 1.25x, goal <= 1.1x), CPU %.2fx; (b) equal to (a) row for row in every run: %v (%d rows, %d clicks, %d bytes)\n",
		wb/wa, cb/ca, eq, cross[0].Floe.Windows, cross[0].Floe.Clicks, cross[0].Floe.TotalBytes)
	for _, ms := range [][]*measurement{one, many} {
		var walls, cpus []float64
		for _, m := range ms {
			walls, cpus = append(walls, m.wall), append(cpus, m.cpu)
		}
		fmt.Fprintf(w, "W=%d runs: wall %v, CPU %v, engine seconds of the last run %v\n", ms[0].w, round(walls, 2), round(cpus, 2), round(ms[len(ms)-1].engine, 2))
	}
	fmt.Fprintf(w, "epochs' own s: the manifests' stats durations summed (with workers the slowest part's: from the decision to the part record, exchange waits included; decisions and commits excluded)\n")
	fmt.Fprintf(w, "model = cluster.Protocol + cluster.Work of Shape{W, P %d, F %d, R %d} (floe plan --workers); manifests: mean over the epochs that read files (%d), decision and commit requests excluded; all counted: every request the children counted (recovery, decisions, commits, barrier polls, the drain epoch, retention) over all committed epochs (%d)\n",
		c.parallelism, modelW.Files, modelW.Rounds, many[len(many)-1].reqEpochs, many[len(many)-1].epochs)
	la, lb := one[len(one)-1], many[len(many)-1]
	fa, fb := float64(la.reqEpochs), float64(lb.reqEpochs)
	in := cluster.Requests{Puts: int64(c.workers) * int64(modelW.Rounds+1), Gets: 2 * int64(modelW.Rounds) * int64(c.workers) * int64(c.workers-1)}
	fmt.Fprintf(w, "coordination per epoch, manifests (b) - (a): %.1f GET, %.1f PUT; the model's protocol %d GET, %d PUT, of which inside the parts' stats (rounds and parts: GET 2RW(W-1), PUT W(R+1)) %d GET, %d PUT\n",
		float64(lb.manifest.Gets)/fb-float64(la.manifest.Gets)/fa, float64(lb.manifest.Puts)/fb-float64(la.manifest.Puts)/fa,
		modelW.Protocol.Gets, modelW.Protocol.Puts, in.Gets, in.Puts)
	if len(scaled) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCPU per worker as W grows: %d rows, %d files, parallelism %d, GOMAXPROCS %d for W = 1 and %d per process otherwise; %d runs (median)\n\n",
		c.scaleRows, c.files, c.scaleParallelism, c.scaleProcsW1, c.scaleProcs, c.runs)
	fmt.Fprintf(w, "| W | wall s | CPU s (all) | CPU s / worker | max peak RSS MiB | requests / epoch, manifests (GET / PUT / LIST) | model (GET / PUT / LIST) | equal to DuckDB | load avg per run |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---|---|---|---|\n")
	for i, ms := range scaled {
		last := ms[len(ms)-1]
		eq := true
		var loads []string
		for _, m := range ms {
			eq = eq && m.duck.Equal()
			loads = append(loads, m.load)
		}
		cpu := median(ms, func(m *measurement) float64 { return m.cpu })
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.2f | %.0f | %s | %s | %v | %s |\n", last.w,
			median(ms, func(m *measurement) float64 { return m.wall }), cpu, cpu/float64(last.w),
			median(ms, func(m *measurement) float64 { return maxOf(m.rss) }), perEpoch(last.manifest, last.reqEpochs),
			modelText(scaleModels[i]), eq, strings.Join(loads, "; "))
	}
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "CPU unknown"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU unknown"
}
