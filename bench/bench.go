// Package bench runs floe's clickstream benchmark: a deterministic data set
// (internal/datagen), floe's 1-minute tumbling count and sum per user over it,
// and the same aggregation in DuckDB, with the outputs compared row by row;
// and the issue-8 shapes of the same (sliding, daily with count_distinct,
// filter only; see cases.go).
//
// It is its own Go module so that the engine module never links DuckDB (cgo).
// The command cmd/floe-bench orchestrates full runs in child processes so
// that each engine's peak RSS is measured alone; the functions here are the
// in-process building blocks it and bench_test.go share.
package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
)

// Seed is the datagen seed of every benchmark data set.
const Seed = 1

// Span is the event-time range the history (all files but the extra one)
// covers.
const Span = 100 * time.Minute

// Dataset describes a clickstream data set: Files history files covering
// Span, plus one extra file that continues the time range (the "new file" of
// the incremental run).
type Dataset struct {
	Rows   int64  // rows in the history files
	Files  int    // history files
	Users  int    // distinct users
	Format string // datagen.Parquet or datagen.JSONL
}

// options returns datagen options for Files+1 files whose first Files files
// hold exactly Rows rows over Span; file i depends only on the options and i.
func (d Dataset) options() datagen.Options {
	per, extra := d.Rows/int64(d.Files), d.Rows%int64(d.Files)
	return datagen.Options{
		Rows:   per*int64(d.Files+1) + extra, // the remainder lands in the first files
		Files:  d.Files + 1,
		Users:  d.Users,
		Span:   time.Duration(int64(Span) / int64(d.Files) * int64(d.Files+1)),
		Seed:   Seed,
		Format: d.Format,
	}
}

// Validate reports a data set that cannot be generated.
func (d Dataset) Validate() error {
	var errs []error
	if d.Rows < 1 {
		errs = append(errs, fmt.Errorf("rows must be >= 1, got %d", d.Rows))
	}
	if d.Files < 1 {
		errs = append(errs, fmt.Errorf("files must be >= 1, got %d", d.Files))
	}
	if d.Users < 1 {
		errs = append(errs, fmt.Errorf("users must be >= 1, got %d", d.Users))
	}
	if d.Format != datagen.Parquet && d.Format != datagen.JSONL {
		errs = append(errs, fmt.Errorf("format must be parquet or jsonl, got %q", d.Format))
	}
	return errors.Join(errs...)
}

// Layout is where a generated data set lives.
type Layout struct {
	// History holds the Files history files.
	History string
	// Extra is the path of the extra (Files+1-th) file.
	Extra string
}

// HistoryFiles lists the history files in order.
func (l Layout) HistoryFiles() ([]string, error) {
	m, err := filepath.Glob(filepath.Join(l.History, "events-*"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.History, err)
	}
	slices.Sort(m)
	return m, nil
}

// Generate writes d under dir/<rows>-<files>-<users>/<format>/ (history) and
// .../<format>-extra/ (the extra file), unless a completion marker written by
// an earlier identical call is present.
func Generate(dir string, d Dataset, log io.Writer) (Layout, error) {
	if err := d.Validate(); err != nil {
		return Layout{}, fmt.Errorf("dataset: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%d-%d-%d", d.Rows, d.Files, d.Users))
	l := Layout{
		History: filepath.Join(base, d.Format),
		Extra:   filepath.Join(base, d.Format+"-extra", datagen.FileName(d.Files, d.Format)),
	}
	opts := d.options()
	want, err := json.Marshal(opts)
	if err != nil {
		return Layout{}, fmt.Errorf("dataset: %w", err)
	}
	marker := filepath.Join(base, d.Format+".complete")
	if got, err := os.ReadFile(marker); err == nil && string(got) == string(want) {
		return l, nil
	}
	for _, p := range []string{l.History, filepath.Dir(l.Extra)} {
		if err := os.RemoveAll(p); err != nil {
			return Layout{}, fmt.Errorf("dataset: %w", err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return Layout{}, fmt.Errorf("dataset: %w", err)
		}
	}
	t0 := time.Now()
	var size int64
	err = datagen.Generate(opts, func(name string, data []byte) error {
		size += int64(len(data))
		p := filepath.Join(l.History, name)
		if name == filepath.Base(l.Extra) {
			p = l.Extra
		}
		return os.WriteFile(p, data, 0o644)
	})
	if err != nil {
		return Layout{}, fmt.Errorf("dataset %s: %w", d.Format, err)
	}
	if err := os.WriteFile(marker, want, 0o644); err != nil {
		return Layout{}, fmt.Errorf("dataset: %w", err)
	}
	if log != nil {
		fmt.Fprintf(log, "generated %s: %d+1 files, %d MiB in %.1fs\n", l.History, d.Files, size>>20, time.Since(t0).Seconds())
	}
	return l, nil
}

// LinkFiles populates dir with hard links to files (copies where linking
// fails), so that a run gets its own source directory.
func LinkFiles(dir string, files ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("link files: %w", err)
	}
	for _, f := range files {
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.Link(f, dst); err == nil {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("link files: %w", err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("link files: %w", err)
		}
	}
	return nil
}

// FloeJob is one floe run of the benchmark pipeline.
type FloeJob struct {
	Source      string // local directory of input files
	Format      string // datagen.Parquet or datagen.JSONL
	Sink        string // local directory for outputs
	State       string // local directory for state
	Parallelism int    // 0: GOMAXPROCS
	Drain       bool   // emit every window at the end
	CPUProfile  string `json:",omitempty"` // write a CPU profile here (child mode only)
	// Case is the pipeline shape: CaseTumbling (""), CaseSliding,
	// CaseDaily or CaseFilter.
	Case string `json:",omitempty"`
	// MaxFilesPerEpoch is the epoch size; 0 means MaxFilesPerEpoch.
	MaxFilesPerEpoch int `json:",omitempty"`
	// RetainEpochs is state.retain_epochs; 0 means the default.
	RetainEpochs int `json:",omitempty"`
	// Workers > 1 runs this process as worker Worker of Workers
	// (engine.Options.Workers, issue 27); the others run the same job with
	// their own index.
	Workers int `json:",omitempty"`
	Worker  int `json:",omitempty"`
	// LogDebug sends the engine's debug log to stderr.
	LogDebug bool `json:",omitempty"`
}

// FloeResult is what a floe run reports.
type FloeResult struct {
	Seconds  float64
	Rows     int64
	RowsOut  int64
	RowsLate int64
	Epochs   int
	Files    int64
	Outputs  []string // absolute paths of the output files of this run
	// Requests counts the run's object-store requests (all its stores,
	// recovery, decisions, commits and barrier polls included).
	Requests engine.Requests
}

// MaxFilesPerEpoch is the benchmark's default epoch size.
const MaxFilesPerEpoch = 10

// Pipeline builds the benchmark pipeline for j: source j.Source, at most
// j.MaxFilesPerEpoch files an epoch, then by j.Case a 1-minute tumbling
// window per user_id with clicks = count() and total_bytes = sum(bytes)
// (the default), a sliding or daily window, or a filter; a Parquet sink.
func Pipeline(j FloeJob) (*spec.Pipeline, error) {
	par := j.Parallelism
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	var schema []spec.Field
	if j.Format == datagen.JSONL {
		schema = []spec.Field{
			spec.Col("event_time", spec.TypeTimestamp),
			spec.Col("user_id", spec.TypeString),
			spec.Col("page", spec.TypeString),
			spec.Col("bytes", spec.TypeInt64),
		}
	}
	w, err := window(j.Case)
	if err != nil {
		return nil, err
	}
	p := spec.New("clickstream").
		FromFiles(j.Source, spec.Format(j.Format), schema...).
		EventTime("event_time", 5*time.Second)
	if w != nil {
		p.Window(w)
	} else {
		p.Filter(FilterExpr)
	}
	p.ToFiles(j.Sink, spec.Parquet).StateAt(j.State, par)
	p.Source.MaxFilesPerEpoch = MaxFilesPerEpoch
	if j.MaxFilesPerEpoch > 0 {
		p.Source.MaxFilesPerEpoch = j.MaxFilesPerEpoch
	}
	if j.RetainEpochs > 0 {
		p.State.RetainEpochs = j.RetainEpochs
	}
	p.Source.Pattern = "*." + j.Format
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("benchmark pipeline: %w", err)
	}
	return p, nil
}

// RunFloe runs j in this process and times it.
func RunFloe(ctx context.Context, j FloeJob) (*FloeResult, error) {
	p, err := Pipeline(j)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	opts := engine.Options{Drain: j.Drain, Workers: j.Workers, Worker: j.Worker}
	if j.LogDebug {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("worker", j.Worker)
	}
	res, err := engine.Run(ctx, p, opts)
	if err != nil {
		return nil, fmt.Errorf("floe run: %w", err)
	}
	out := &FloeResult{
		Seconds: time.Since(t0).Seconds(),
		Rows:    res.Rows, RowsOut: res.RowsOut, RowsLate: res.RowsLate,
		Epochs: res.Epochs, Files: res.Files, Requests: res.Requests.Requests,
	}
	for _, o := range res.Outputs {
		out.Outputs = append(out.Outputs, filepath.Join(j.Sink, filepath.FromSlash(o)))
	}
	return out, nil
}

// DuckJob is one DuckDB run of the same aggregation.
type DuckJob struct {
	Files  []string // input files
	Format string   // datagen.Parquet or datagen.JSONL
	Out    string   // output Parquet file
	Case   string   `json:",omitempty"` // the pipeline shape, as FloeJob.Case
}

// DuckResult is what a DuckDB run reports.
type DuckResult struct {
	Seconds float64
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func sqlList(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = sqlString(f)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Query returns the DuckDB statement of j: the benchmark aggregation over
// j.Files, copied to j.Out as Parquet.
func Query(j DuckJob) (string, error) {
	var src string
	switch j.Format {
	case datagen.Parquet:
		src = "read_parquet(" + sqlList(j.Files) + ")"
	case datagen.JSONL:
		src = "read_json(" + sqlList(j.Files) + ", format='newline_delimited', " +
			"columns={event_time: 'TIMESTAMPTZ', user_id: 'VARCHAR', page: 'VARCHAR', bytes: 'BIGINT'})"
	default:
		return "", fmt.Errorf("duckdb: unsupported format %q", j.Format)
	}
	q, err := selectSQL(j.Case, src)
	if err != nil {
		return "", err
	}
	return "COPY (" + q + ") TO " + sqlString(j.Out) + " (FORMAT parquet)", nil
}

// OpenDuckDB opens an in-memory DuckDB with the session set to UTC.
func OpenDuckDB(ctx context.Context) (*sql.DB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("duckdb: open: %w", err)
	}
	db.SetMaxOpenConns(1) // one connection: SET applies to every statement
	if _, err := db.ExecContext(ctx, "SET TimeZone = 'UTC'"); err != nil {
		db.Close()
		return nil, fmt.Errorf("duckdb: set time zone: %w", err)
	}
	return db, nil
}

// CommittedOutputs returns the absolute paths of every output file j's
// pipeline has committed (of all its workers), in commit order.
func CommittedOutputs(ctx context.Context, j FloeJob) ([]string, error) {
	p, err := Pipeline(j)
	if err != nil {
		return nil, err
	}
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("committed outputs of %s: %w", j.State, err)
	}
	abs := make([]string, len(outs))
	for i, o := range outs {
		abs[i] = filepath.Join(j.Sink, filepath.FromSlash(o))
	}
	return abs, nil
}

// RunDuckDB runs j in this process (DuckDB uses every core) and times it.
func RunDuckDB(ctx context.Context, j DuckJob) (*DuckResult, error) {
	q, err := Query(j)
	if err != nil {
		return nil, err
	}
	db, err := OpenDuckDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	t0 := time.Now()
	if _, err := db.ExecContext(ctx, q); err != nil {
		return nil, fmt.Errorf("duckdb: %w", err)
	}
	return &DuckResult{Seconds: time.Since(t0).Seconds()}, nil
}

// Summary totals an output. For the window cases Clicks and TotalBytes add
// up the first and second aggregate (CaseDaily: clicks and pages); for
// CaseFilter Windows and Clicks count the rows and TotalBytes adds up bytes.
type Summary struct {
	Windows    int64 // (user, window) rows
	Clicks     int64
	TotalBytes int64
	// Checksum is the sum of DuckDB's hash of every normalised row: equal
	// multisets of rows have equal checksums.
	Checksum string
}

// Comparison is the result of Compare.
type Comparison struct {
	Floe, DuckDB Summary
	// OnlyFloe and OnlyDuckDB count rows (user_id, window_start, clicks,
	// total_bytes) found in one output and not the other (multiset difference).
	OnlyFloe, OnlyDuckDB int64
}

// Equal reports whether the outputs hold the same rows.
func (c *Comparison) Equal() bool {
	return c.OnlyFloe == 0 && c.OnlyDuckDB == 0 && c.Floe == c.DuckDB
}

// Compare reads floe's output files and DuckDB's output file of the
// original tumbling case and compares them row by row.
func Compare(ctx context.Context, floeFiles []string, duckFile string) (*Comparison, error) {
	return CompareCase(ctx, CaseTumbling, floeFiles, duckFile)
}

// CompareCase compares floe's output files and DuckDB's output file of
// case c row by row (multiset difference both ways) and by their summaries.
func CompareCase(ctx context.Context, c string, floeFiles []string, duckFile string) (*Comparison, error) {
	return CompareOutputs(ctx, c, floeFiles, []string{duckFile})
}

// CompareOutputs compares two sets of output files of case c row by row
// (multiset difference both ways) and by their summaries; the result's
// Floe side is floeFiles, its DuckDB side other (DuckDB's output, or
// another floe run's).
func CompareOutputs(ctx context.Context, c string, floeFiles, other []string) (*Comparison, error) {
	cols, err := normSQL(c)
	if err != nil {
		return nil, err
	}
	if len(floeFiles) == 0 || len(other) == 0 {
		return nil, errors.New("compare: a run wrote no output files")
	}
	db, err := OpenDuckDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	norm := func(src string) string {
		return "SELECT " + cols + " FROM read_parquet(" + src + ")"
	}
	f, d := norm(sqlList(floeFiles)), norm(sqlList(other))
	cmp := &Comparison{}
	sum := func(q string, s *Summary) error {
		row := db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(a), 0)::BIGINT, "+
			"coalesce(sum(b), 0)::BIGINT, coalesce(sum(hash(t)), 0)::VARCHAR FROM ("+q+") AS t")
		if err := row.Scan(&s.Windows, &s.Clicks, &s.TotalBytes, &s.Checksum); err != nil {
			return fmt.Errorf("compare: summary: %w", err)
		}
		return nil
	}
	diff := func(a, b string, n *int64) error {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM ("+a+" EXCEPT ALL "+b+")").Scan(n); err != nil {
			return fmt.Errorf("compare: difference: %w", err)
		}
		return nil
	}
	if err := errors.Join(sum(f, &cmp.Floe), sum(d, &cmp.DuckDB), diff(f, d, &cmp.OnlyFloe), diff(d, f, &cmp.OnlyDuckDB)); err != nil {
		return nil, err
	}
	return cmp, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
