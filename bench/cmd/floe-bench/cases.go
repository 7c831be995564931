package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/internal/datagen"
)

// caseResult is one line of the issue-8 table: floe against DuckDB (or, for
// the comparison runs named in note, against floe).
type caseResult struct {
	name               string
	floeRuns, duckRuns []float64 // wall seconds per run
	floeCPU, duckCPU   []float64 // CPU seconds (user+sys) per run
	floeRSS, duckRSS   float64   // peak RSS MiB, the largest of the runs
	agree              string    // "true", "false" or why not compared
	target             string
	note               string
	raw                []string // extra lines printed under the table
	daily              *dailyReport
}

func (r *caseResult) ok() bool { return r.agree != "false" }

// dailyReport is the growing-state case's per-epoch account.
type dailyReport struct {
	costs   []bench.EpochCost   // of the last run
	seconds [][]float64         // per epoch: the wall time of each run
	groups  []bench.GroupStat   // per input group (epoch without the drain)
	perRow  []float64           // per epoch: estimated bytes of one window in a full snapshot
	runs    [][]bench.EpochCost // every run
}

func agreeText(cmp *bench.Comparison) string {
	return fmt.Sprintf("%v", cmp.Equal())
}

func cmpNote(cmp *bench.Comparison) string {
	return fmt.Sprintf("floe %d rows (a %d, b %d, checksum %s); DuckDB %d rows (a %d, b %d, checksum %s); only-floe %d, only-DuckDB %d",
		cmp.Floe.Windows, cmp.Floe.Clicks, cmp.Floe.TotalBytes, cmp.Floe.Checksum,
		cmp.DuckDB.Windows, cmp.DuckDB.Clicks, cmp.DuckDB.TotalBytes, cmp.DuckDB.Checksum, cmp.OnlyFloe, cmp.OnlyDuckDB)
}

// keysResults turns the keys1m case's row into its two issue-8 lines: the
// catch-up over many keys, and the incremental run after it.
func keysResults(c config, r *row) []*caseResult {
	return []*caseResult{
		{
			name:     fmt.Sprintf("1. tumbling 1m, %d keys (%s), catch-up drained", r.users, datagen.Parquet),
			floeRuns: r.floeRuns, duckRuns: r.duckRuns, floeCPU: r.floeCPU, duckCPU: r.duckCPU,
			floeRSS: r.floeRSS, duckRSS: r.duckRSS, agree: agreeText(r.cmp),
			target: "floe <= 1.5x DuckDB; peak RSS <= DuckDB's",
			raw:    []string{"1. outputs: " + cmpNote(r.cmp)},
		},
		{
			name:     fmt.Sprintf("5. incremental: 1 new file (%d rows) after %d-row %d-key history", c.rows/int64(c.files), c.rows, r.users),
			floeRuns: r.incRuns, duckRuns: r.duckAllRuns, floeCPU: r.incCPU, duckCPU: r.duckAllCPU,
			floeRSS: r.incRSS, duckRSS: r.duckAllRSS,
			agree:  "not compared here (TestIncrementalManyKeysMatchesDuckDB)",
			target: "floe <= 0.1x DuckDB recomputing all files",
			note:   fmt.Sprintf("history catch-up without drain %.2fs", r.catchupNoDrain),
		},
	}
}

// floeRun spawns one floe child in a fresh run directory under base/name
// with its own links to files; it returns the result and the directory.
func floeRun(ctx context.Context, j bench.FloeJob, base, name string, files []string, log io.Writer, cpu *[]float64) (*bench.FloeResult, float64, string, error) {
	dir := filepath.Join(base, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, 0, "", err
	}
	j.Source, j.Sink, j.State = filepath.Join(dir, "src"), filepath.Join(dir, "out"), filepath.Join(dir, "state")
	if err := bench.LinkFiles(j.Source, files...); err != nil {
		return nil, 0, "", err
	}
	var fr bench.FloeResult
	rss, err := bench.Spawn(ctx, "floe", j, &fr, log, cpu)
	if err != nil {
		return nil, 0, "", err
	}
	return &fr, rss, dir, nil
}

func duckRun(ctx context.Context, j bench.DuckJob, log io.Writer, cpu *[]float64) (float64, float64, error) {
	var dr bench.DuckResult
	rss, err := bench.Spawn(ctx, "duckdb", j, &dr, log, cpu)
	if err != nil {
		return 0, 0, err
	}
	return dr.Seconds, rss, nil
}

// benchCase runs the sliding, growing or filter case over Parquet input.
func benchCase(ctx context.Context, c config, k, work string, log io.Writer) ([]*caseResult, error) {
	d := bench.Dataset{Rows: c.rows, Files: c.files, Users: c.users, Format: datagen.Parquet}
	if k == "growing" {
		d.Rows, d.Users = c.growRows, c.growUsers
	}
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
	base := filepath.Join(work, k)
	defer os.RemoveAll(base)
	switch k {
	case "sliding":
		return benchSliding(ctx, c, hist, base, log)
	case "growing":
		return benchGrowing(ctx, c, d, hist, base, log)
	case "filter":
		return benchFilter(ctx, c, hist, base, log)
	}
	return nil, fmt.Errorf("unknown case %q", k)
}

func checkRows(fr *bench.FloeResult, want int64) error {
	if fr.Rows != want {
		return fmt.Errorf("floe read %d rows, want %d", fr.Rows, want)
	}
	return nil
}

func benchSliding(ctx context.Context, c config, hist []string, base string, log io.Writer) ([]*caseResult, error) {
	r := &caseResult{name: fmt.Sprintf("2. sliding 5m/1m, %d keys (%s), catch-up drained", c.users, datagen.Parquet),
		target: "floe sliding <= 1.3x floe tumbling (same data, same runs)"}
	var tumbRuns, tumbCPU []float64
	var tumbRSS float64
	duckOut := filepath.Join(base, "duckdb.parquet")
	var outputs []string
	for i := range c.runs {
		// Alternate: floe tumbling, floe sliding, DuckDB sliding.
		tr, rss, dir, err := floeRun(ctx, bench.FloeJob{Format: datagen.Parquet, Drain: true}, base, "tumbling", hist, log, &tumbCPU)
		if err != nil {
			return nil, err
		}
		if err := checkRows(tr, c.rows); err != nil {
			return nil, err
		}
		tumbRuns, tumbRSS = append(tumbRuns, tr.Seconds), max(tumbRSS, rss)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		fr, rss, dir, err := floeRun(ctx, bench.FloeJob{Format: datagen.Parquet, Drain: true, Case: bench.CaseSliding}, base, fmt.Sprintf("sliding-%d", i), hist, log, &r.floeCPU)
		if err != nil {
			return nil, err
		}
		if err := checkRows(fr, c.rows); err != nil {
			return nil, err
		}
		r.floeRuns, r.floeRSS = append(r.floeRuns, fr.Seconds), max(r.floeRSS, rss)
		fmt.Fprintf(log, "sliding run %d: floe tumbling %.2fs, floe sliding %.2fs (%d epochs, %d rows out, peak RSS %.0f MiB)\n",
			i+1, tr.Seconds, fr.Seconds, fr.Epochs, fr.RowsOut, rss)
		if i < c.runs-1 {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		} else {
			outputs = fr.Outputs
		}
		sec, drss, err := duckRun(ctx, bench.DuckJob{Files: hist, Format: datagen.Parquet, Out: duckOut, Case: bench.CaseSliding}, log, &r.duckCPU)
		if err != nil {
			return nil, err
		}
		r.duckRuns, r.duckRSS = append(r.duckRuns, sec), max(r.duckRSS, drss)
		fmt.Fprintf(log, "sliding run %d: duckdb %.2fs, peak RSS %.0f MiB\n", i+1, sec, drss)
	}
	cmp, err := bench.CompareCase(ctx, bench.CaseSliding, outputs, duckOut)
	if err != nil {
		return nil, err
	}
	r.agree = agreeText(cmp)
	ts, tc := bench.Median(tumbRuns), bench.Median(tumbCPU)
	r.note = fmt.Sprintf("floe tumbling %.2fs (CPU %.2fs, peak RSS %.0f MiB): sliding/tumbling %.2fx wall, %.2fx CPU",
		ts, tc, tumbRSS, bench.Median(r.floeRuns)/ts, bench.Median(r.floeCPU)/tc)
	r.raw = append(r.raw, "2. floe tumbling runs "+strings.Join(round(tumbRuns), " ")+", CPU "+strings.Join(round(tumbCPU), " "),
		"2. outputs: "+cmpNote(cmp))
	return []*caseResult{r}, nil
}

func benchGrowing(ctx context.Context, c config, d bench.Dataset, hist []string, base string, log io.Writer) ([]*caseResult, error) {
	groups := bench.EpochGroups(hist, c.dailyPer)
	r := &caseResult{
		name: fmt.Sprintf("3. growing state: 24h window per user, count + count_distinct(page), %d rows, %d keys, %d files/epoch (%d epochs + drain)",
			d.Rows, d.Users, c.dailyPer, len(groups)),
		target: "epoch 20 / epoch 2 <= 1.2x; state bytes written <= 2x the changed windows' bytes",
		daily:  &dailyReport{},
	}
	duckOut := filepath.Join(base, "duckdb.parquet")
	var outputs []string
	for i := range c.runs {
		j := bench.FloeJob{Format: datagen.Parquet, Drain: true, Case: bench.CaseDaily, MaxFilesPerEpoch: c.dailyPer, RetainEpochs: 100000}
		fr, rss, dir, err := floeRun(ctx, j, base, fmt.Sprintf("daily-%d", i), hist, log, &r.floeCPU)
		if err != nil {
			return nil, err
		}
		if err := checkRows(fr, d.Rows); err != nil {
			return nil, err
		}
		r.floeRuns, r.floeRSS = append(r.floeRuns, fr.Seconds), max(r.floeRSS, rss)
		costs, err := bench.EpochCosts(filepath.Join(dir, "state"), "clickstream")
		if err != nil {
			return nil, err
		}
		r.daily.runs = append(r.daily.runs, costs)
		fmt.Fprintf(log, "growing run %d: floe %.2fs, %d epochs, peak RSS %.0f MiB\n", i+1, fr.Seconds, fr.Epochs, rss)
		if i < c.runs-1 {
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		} else {
			outputs = fr.Outputs
		}
		sec, drss, err := duckRun(ctx, bench.DuckJob{Files: hist, Format: datagen.Parquet, Out: duckOut, Case: bench.CaseDaily}, log, &r.duckCPU)
		if err != nil {
			return nil, err
		}
		r.duckRuns, r.duckRSS = append(r.duckRuns, sec), max(r.duckRSS, drss)
		fmt.Fprintf(log, "growing run %d: duckdb %.2fs, peak RSS %.0f MiB\n", i+1, sec, drss)
	}
	cmp, err := bench.CompareCase(ctx, bench.CaseDaily, outputs, duckOut)
	if err != nil {
		return nil, err
	}
	r.agree = agreeText(cmp)
	r.raw = append(r.raw, "3. outputs: "+cmpNote(cmp))
	if r.daily.groups, err = bench.GroupStats(ctx, groups); err != nil {
		return nil, err
	}
	rep := r.daily
	rep.costs = rep.runs[len(rep.runs)-1]
	for e := range rep.costs {
		var s []float64
		for _, run := range rep.runs {
			if e < len(run) {
				s = append(s, run[e].Seconds)
			}
		}
		rep.seconds = append(rep.seconds, s)
	}
	// Bytes of one window in a full snapshot: the newest bases written at
	// or before the epoch.
	per := 0.0
	for _, e := range rep.costs {
		if e.BaseRows > 0 {
			per = float64(e.BaseBytes) / float64(e.BaseRows)
		}
		rep.perRow = append(rep.perRow, per)
	}
	r.note = growingNote(rep)
	return []*caseResult{r}, nil
}

// growingNote sums the growing case up: the epoch-20 (or last) to epoch-2
// wall ratio and the written/changed byte ratios.
func growingNote(rep *dailyReport) string {
	n := min(len(rep.groups), len(rep.costs)) // epochs with input
	if n < 2 {
		return "fewer than 2 epochs"
	}
	last := min(20, n)
	w2, wl := bench.Median(rep.seconds[1]), bench.Median(rep.seconds[last-1])
	var written, bases, deltas, changed float64
	for e := 1; e < n; e++ { // epoch 1 creates every window it sees: skip it
		c := rep.costs[e]
		written += float64(c.StateWritten())
		bases += float64(c.BaseBytes)
		deltas += float64(c.DeltaBytes)
		changed += float64(rep.groups[e].Users) * rep.perRow[e]
	}
	// Less noisy: the median of epochs 2-4 against that of the last three
	// up to epoch 20.
	var early, late []float64
	for e := 1; e < min(4, n); e++ {
		early = append(early, bench.Median(rep.seconds[e]))
	}
	for e := max(1, last-3); e < last; e++ {
		late = append(late, bench.Median(rep.seconds[e]))
	}
	// Amortised over compactions: the mean of epochs 2-7 against the mean
	// of the last six epochs with input.
	mean := func(lo, hi int) float64 { // epochs lo..hi, 1-based
		var t float64
		for e := lo; e <= hi; e++ {
			t += bench.Median(rep.seconds[e-1])
		}
		return t / float64(hi-lo+1)
	}
	hi := min(7, n)
	return fmt.Sprintf("epoch %d / epoch 2 wall %.2fx (%.3fs / %.3fs; medians of epochs %d-%d / 2-4: %.2fx; means of epochs %d-%d / 2-%d: %.2fx); "+
		"epochs 2-%d: state written / changed-window bytes %.2fx (deltas only %.2fx, bases %.2fx)",
		last, wl/w2, wl, w2, max(2, last-2), last, bench.Median(late)/bench.Median(early),
		max(2, n-hi+2), n, hi, mean(max(2, n-hi+2), n)/mean(2, hi), n, written/changed, deltas/changed, bases/changed)
}

func benchFilter(ctx context.Context, c config, hist []string, base string, log io.Writer) ([]*caseResult, error) {
	var out []*caseResult
	for _, per := range c.filterEpochs {
		r := &caseResult{name: fmt.Sprintf("4. filter only (%s), %d files/epoch, %d keys (%s)", bench.FilterExpr, per, c.users, datagen.Parquet),
			target: "floe peak RSS <= 300 MiB"}
		duckOut := filepath.Join(base, "duckdb.parquet")
		var outputs []string
		var epochs int
		for i := range c.runs {
			j := bench.FloeJob{Format: datagen.Parquet, Drain: true, Case: bench.CaseFilter, MaxFilesPerEpoch: per}
			fr, rss, dir, err := floeRun(ctx, j, base, fmt.Sprintf("filter-%d-%d", per, i), hist, log, &r.floeCPU)
			if err != nil {
				return nil, err
			}
			if err := checkRows(fr, c.rows); err != nil {
				return nil, err
			}
			r.floeRuns, r.floeRSS, epochs = append(r.floeRuns, fr.Seconds), max(r.floeRSS, rss), fr.Epochs
			fmt.Fprintf(log, "filter %d/epoch run %d: floe %.2fs, %d epochs, %d rows out, peak RSS %.0f MiB\n", per, i+1, fr.Seconds, fr.Epochs, fr.RowsOut, rss)
			if i < c.runs-1 {
				if err := os.RemoveAll(dir); err != nil {
					return nil, err
				}
			} else {
				outputs = fr.Outputs
			}
			sec, drss, err := duckRun(ctx, bench.DuckJob{Files: hist, Format: datagen.Parquet, Out: duckOut, Case: bench.CaseFilter}, log, &r.duckCPU)
			if err != nil {
				return nil, err
			}
			r.duckRuns, r.duckRSS = append(r.duckRuns, sec), max(r.duckRSS, drss)
			fmt.Fprintf(log, "filter %d/epoch run %d: duckdb %.2fs, peak RSS %.0f MiB\n", per, i+1, sec, drss)
		}
		cmp, err := bench.CompareCase(ctx, bench.CaseFilter, outputs, duckOut)
		if err != nil {
			return nil, err
		}
		r.agree = agreeText(cmp)
		r.note = fmt.Sprintf("%d epochs, %d rows out", epochs, cmp.Floe.Windows)
		r.raw = append(r.raw, fmt.Sprintf("4. (%d files/epoch) outputs: %s", per, cmpNote(cmp)))
		out = append(out, r)
	}
	return out, nil
}

// sampleLoad records the 1-minute load average every 10 s until ctx ends;
// the returned function stops it and returns the samples.
func sampleLoad(ctx context.Context) func() []float64 {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []float64)
	go func() {
		var s []float64
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			var x float64
			if data, err := os.ReadFile("/proc/loadavg"); err == nil {
				if _, err := fmt.Sscanf(string(data), "%f", &x); err == nil {
					s = append(s, x)
				}
			}
			select {
			case <-ctx.Done():
				done <- s
				return
			case <-t.C:
			}
		}
	}()
	return func() []float64 { cancel(); return <-done }
}

func loadSummary(s []float64) string {
	if len(s) == 0 {
		return "none"
	}
	return fmt.Sprintf("min %.2f, median %.2f, max %.2f over %d samples", slices.Min(s), bench.Median(s), slices.Max(s), len(s))
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kib); err == nil {
				return fmt.Sprintf("%.1f GiB memory", float64(kib)/(1<<20))
			}
		}
	}
	return "memory unknown"
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func printCases(w io.Writer, c config, rs []*caseResult, load []float64) {
	fmt.Fprintf(w, "\nissue 8 cases %s: %d rows (growing: %d rows, %d users), %d files, Parquet input, %d runs each (median; floe and DuckDB alternate)\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), c.rows, c.growRows, c.growUsers, c.files, c.runs)
	fmt.Fprintf(w, "machine: nproc %d, GOMAXPROCS %d, %s, %s/%s, %s; 1-minute load average during the run (every 10 s): %s; at the end %s\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH, memTotal(), loadSummary(load), loadAvg())
	fmt.Fprintf(w, "| case | floe s | DuckDB s | ratio | floe CPU s | DuckDB CPU s | CPU ratio | floe peak RSS MiB | DuckDB peak RSS MiB | outputs agree | target | note |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fs, ds := bench.Median(r.floeRuns), bench.Median(r.duckRuns)
		fc, dc := bench.Median(r.floeCPU), bench.Median(r.duckCPU)
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.2fx | %.2f | %.2f | %.2fx | %.0f | %.0f | %s | %s | %s |\n",
			r.name, fs, ds, fs/ds, fc, dc, fc/dc, r.floeRSS, r.duckRSS, r.agree, r.target, r.note)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "case %s floe runs %s (CPU %s); DuckDB runs %s (CPU %s)\n", strings.SplitN(r.name, " ", 2)[0],
			strings.Join(round(r.floeRuns), " "), strings.Join(round(r.floeCPU), " "),
			strings.Join(round(r.duckRuns), " "), strings.Join(round(r.duckCPU), " "))
		for _, l := range r.raw {
			fmt.Fprintln(w, l)
		}
	}
	for _, r := range rs {
		if r.daily != nil {
			printDaily(w, r.daily)
		}
	}
}

func printDaily(w io.Writer, rep *dailyReport) {
	fmt.Fprintf(w, "\ngrowing state, per epoch (wall: median of the runs, from each manifest's stats; bytes: the last run; "+
		"changed windows: distinct users of the epoch's files, counted by DuckDB; changed-window bytes: changed windows x "+
		"bytes per window of the newest state bases)\n\n")
	fmt.Fprintf(w, "| epoch | files | rows in | wall s | runs | state bases written B | state deltas written B | windows changed | changed-window B | written / changed | state total B | state base rows |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, e := range rep.costs {
		changed, ratio := "-", "-"
		users := "drain"
		if i < len(rep.groups) {
			users = fmt.Sprint(rep.groups[i].Users)
			cb := float64(rep.groups[i].Users) * rep.perRow[i]
			changed = fmt.Sprintf("%.0f", cb)
			if cb > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(e.StateWritten())/cb)
			}
			if rep.groups[i].Rows != e.RowsIn {
				users += fmt.Sprintf(" (floe's epoch read %d rows, the group %d: grouping differs)", e.RowsIn, rep.groups[i].Rows)
			}
		}
		fmt.Fprintf(w, "| %d | %d | %d | %.3f | %s | %d | %d | %s | %s | %s | %d | %d |\n",
			e.Epoch, e.Files, e.RowsIn, bench.Median(rep.seconds[i]), strings.Join(round(rep.seconds[i]), " "),
			e.BaseBytes, e.DeltaBytes, users, changed, ratio, e.StateBytes, e.StateRows)
	}
	fmt.Fprintln(w)
}
