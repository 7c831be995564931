package nexmark

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/flinksql"
	"github.com/floe-dev/floe/spec"
)

// DefaultMaxFilesPerEpoch is how many files of a stream one floe epoch
// reads, so a run takes several epochs and the watermark advances between
// them (windows are emitted as it passes, the rest by the drain).
const DefaultMaxFilesPerEpoch = 4

// FloeJob is one floe run of a query.
type FloeJob struct {
	Query            string
	Data             string // Layout.Dir of the generated data set
	Format           string // Parquet or JSONL
	Sink, State      string // local directories, fresh per run
	Parallelism      int    // 0: GOMAXPROCS
	MaxFilesPerEpoch int    // 0: DefaultMaxFilesPerEpoch
	// MaxDelay is the data set's disorder bound, used as the pipeline's
	// max_out_of_orderness so that no row is late.
	MaxDelay time.Duration
	SideRows int // the data set's side input rows (q13)
	// TryGraph runs a query that needs a graph anyway (to check the graph
	// engine against the reference before the query is marked runnable).
	TryGraph bool `json:",omitempty"`
	// SQL runs the query's Flink SQL version (queries/<q>.sql, lowered by
	// package flinksql) instead of its YAML spec.
	SQL bool `json:",omitempty"`
	// CPUProfile, when set, is a file the run writes a CPU profile of
	// itself to (the profiling is outside the timed seconds' start).
	CPUProfile string `json:",omitempty"`
	// NoDrain runs without the drain: the run commits what its files
	// close and leaves the open windows and join state for the next run,
	// as a scheduled (cron) run over a landing folder does.
	NoDrain bool `json:",omitempty"`
}

// FloeResult is what a floe run reports.
type FloeResult struct {
	Seconds  float64
	Rows     int64
	RowsOut  int64
	RowsLate int64
	Epochs   int
	Files    int64
	Outputs  []string // absolute paths of the run's output files
}

func lookupOne(name string) (Query, error) {
	if q, ok := LookupSQLOnly(name); ok {
		return q, nil
	}
	qs, err := Lookup(name)
	if err != nil {
		return Query{}, err
	}
	if len(qs) != 1 {
		return Query{}, fmt.Errorf("nexmark: %q names %d queries, want one", name, len(qs))
	}
	return qs[0], nil
}

// Pipeline fills in q's spec template for j and parses it.
func Pipeline(q Query, j FloeJob) (*spec.Pipeline, error) {
	tmpl, err := q.Spec()
	if j.SQL {
		tmpl = q.SQLSpec()
		if tmpl == nil {
			return nil, fmt.Errorf("nexmark %s: no queries/%s.sql", q.Name, q.Name)
		}
	}
	if err != nil && !j.SQL {
		return nil, err
	}
	par := j.Parallelism
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	maxFiles := j.MaxFilesPerEpoch
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFilesPerEpoch
	}
	sideRows := j.SideRows
	if sideRows <= 0 {
		sideRows = DefaultSideInputRows
	}
	l := Layout{Dir: j.Data}
	vars := map[string]string{
		"BIDS":         l.StreamDir(j.Format, Bids),
		"PERSONS":      l.StreamDir(j.Format, Persons),
		"AUCTIONS":     l.StreamDir(j.Format, Auctions),
		"SIDE_INPUT":   l.StreamDir(j.Format, SideInput),
		"SIDE_ROWS":    strconv.Itoa(sideRows),
		"FORMAT":       j.Format,
		"SINK":         j.Sink,
		"STATE":        j.State,
		"PARALLELISM":  strconv.Itoa(par),
		"MAX_FILES":    strconv.Itoa(maxFiles),
		"MAX_DELAY":    j.MaxDelay.String(),
		"MAX_DELAY_MS": strconv.FormatInt(j.MaxDelay.Milliseconds(), 10),
	}
	data, err := Expand(tmpl, vars)
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: spec: %w", q.Name, err)
	}
	var p *spec.Pipeline
	if j.SQL {
		p, err = flinksql.Parse("queries/"+q.Name+".sql", data, filepath.Dir(j.Sink))
	} else {
		p, err = spec.Parse("queries/"+q.Name+".yaml", data, filepath.Dir(j.Sink))
	}
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	return p, nil
}

// Expand replaces each ${NAME} in tmpl with vars[NAME]; a name without a
// value is an error.
func Expand(tmpl []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := os.Expand(string(tmpl), func(name string) string {
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("no value for ${%s}", strings.Join(slices.Compact(missing), "}, ${"))
	}
	return []byte(out), nil
}

// RunFloe runs j's query with floe in this process (drained unless
// j.NoDrain: every window is emitted at the end) and times it.
func RunFloe(ctx context.Context, j FloeJob) (*FloeResult, error) {
	q, err := lookupOne(j.Query)
	if err != nil {
		return nil, err
	}
	if !q.Runnable() && !j.TryGraph && !j.SQL {
		return nil, fmt.Errorf("nexmark %s: not runnable yet (needs %s)", q.Name, q.Needs)
	}
	p, err := Pipeline(q, j)
	if err != nil {
		return nil, err
	}
	return runPipeline(ctx, p, j)
}

// runPipeline runs p (q's pipeline for j), drained unless j.NoDrain, and
// times it.
func runPipeline(ctx context.Context, p *spec.Pipeline, j FloeJob) (*FloeResult, error) {
	q := Query{Name: j.Query}
	if j.CPUProfile != "" {
		f, err := os.Create(j.CPUProfile)
		if err != nil {
			return nil, fmt.Errorf("nexmark %s: cpu profile: %w", q.Name, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("nexmark %s: cpu profile %s: %w", q.Name, j.CPUProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	res, err := engine.Run(ctx, p, engine.Options{Drain: !j.NoDrain})
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: floe run: %w", q.Name, err)
	}
	out := &FloeResult{
		Seconds: time.Since(t0).Seconds(),
		Rows:    res.Rows, RowsOut: res.RowsOut, RowsLate: res.RowsLate,
		Epochs: res.Epochs, Files: res.Files,
	}
	for _, o := range res.Outputs {
		out.Outputs = append(out.Outputs, filepath.Join(j.Sink, filepath.FromSlash(o)))
	}
	return out, nil
}

// DuckJob is one DuckDB run of a query's reference SQL.
type DuckJob struct {
	Query    string
	Data     string // Layout.Dir
	Format   string
	Out      string // output Parquet file
	SideRows int    // 0: DefaultSideInputRows
}

// DuckResult is what a DuckDB run reports.
type DuckResult struct {
	Seconds float64
	Rows    int64
}

// duckColumns are the DuckDB types of each stream's JSON-lines columns.
var duckColumns = map[string]string{
	Persons: `{'id': 'BIGINT', 'name': 'VARCHAR', 'emailAddress': 'VARCHAR', 'creditCard': 'VARCHAR',
'city': 'VARCHAR', 'state': 'VARCHAR', 'dateTime': 'TIMESTAMPTZ', 'extra': 'VARCHAR'}`,
	Auctions: `{'id': 'BIGINT', 'itemName': 'VARCHAR', 'description': 'VARCHAR', 'initialBid': 'BIGINT',
'reserve': 'BIGINT', 'dateTime': 'TIMESTAMPTZ', 'expires': 'TIMESTAMPTZ', 'seller': 'BIGINT',
'category': 'BIGINT', 'extra': 'VARCHAR'}`,
	Bids: `{'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT', 'channel': 'VARCHAR',
'url': 'VARCHAR', 'dateTime': 'TIMESTAMPTZ', 'extra': 'VARCHAR'}`,
	SideInput: `{'key': 'BIGINT', 'value': 'VARCHAR'}`,
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func sqlList(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = sqlString(f)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// DuckSQL returns q's reference SQL over the data set at dir in format.
func DuckSQL(q Query, dir, format string, sideRows int) (string, error) {
	if sideRows <= 0 {
		sideRows = DefaultSideInputRows
	}
	l := Layout{Dir: dir}
	repl := []string{"{side_rows}", strconv.Itoa(sideRows)}
	for _, s := range []string{Persons, Auctions, Bids, SideInput} {
		glob := sqlString(filepath.Join(l.StreamDir(format, s), "*."+format))
		var src string
		switch format {
		case Parquet:
			src = "read_parquet(" + glob + ")"
		case JSONL:
			src = "read_json(" + glob + ", format='newline_delimited', columns=" + duckColumns[s] + ")"
		default:
			return "", fmt.Errorf("nexmark: unsupported format %q", format)
		}
		repl = append(repl, "{"+s+"}", src)
	}
	return strings.NewReplacer(repl...).Replace(q.SQL), nil
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

// RunDuckDB runs j's reference SQL in this process, copies the result to
// j.Out as Parquet and times it.
func RunDuckDB(ctx context.Context, j DuckJob) (*DuckResult, error) {
	q, err := lookupOne(j.Query)
	if err != nil {
		return nil, err
	}
	return runDuck(ctx, q, j)
}

// runDuck runs q's reference SQL for j.
func runDuck(ctx context.Context, q Query, j DuckJob) (*DuckResult, error) {
	sel, err := DuckSQL(q, j.Data, j.Format, j.SideRows)
	if err != nil {
		return nil, err
	}
	db, err := OpenDuckDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	t0 := time.Now()
	res, err := db.ExecContext(ctx, "COPY ("+sel+") TO "+sqlString(j.Out)+" (FORMAT parquet)")
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: duckdb: %w", q.Name, err)
	}
	secs := time.Since(t0).Seconds()
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("nexmark %s: duckdb: rows: %w", q.Name, err)
	}
	return &DuckResult{Seconds: secs, Rows: n}, nil
}

// Comparison is the result of Compare.
type Comparison struct {
	Columns    []string // compared, in the reference's order
	FloeRows   int64
	DuckDBRows int64
	// OnlyFloe and OnlyDuckDB count rows found in one output and not the
	// other (multiset difference, EXCEPT ALL).
	OnlyFloe, OnlyDuckDB int64
}

// Equal reports whether the outputs hold the same rows.
func (c *Comparison) Equal() bool {
	return c.OnlyFloe == 0 && c.OnlyDuckDB == 0 && c.FloeRows == c.DuckDBRows
}

func (c *Comparison) String() string {
	return fmt.Sprintf("floe %d rows, DuckDB %d rows, only in floe %d, only in DuckDB %d",
		c.FloeRows, c.DuckDBRows, c.OnlyFloe, c.OnlyDuckDB)
}

// Compare reads floe's output files and DuckDB's output file and compares
// them row by row on the reference's columns (by name), timestamps as
// microseconds since 1970. floe's files are read with hive_partitioning, so
// the columns of a partitioned sink (partition_by, q10) come back from the
// folder names, as strings.
func Compare(ctx context.Context, floeFiles []string, duckFile string) (*Comparison, error) {
	db, err := OpenDuckDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet("+sqlString(duckFile)+"))")
	if err != nil {
		return nil, fmt.Errorf("compare: columns of %s: %w", duckFile, err)
	}
	c := &Comparison{}
	var sel []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			rows.Close()
			return nil, fmt.Errorf("compare: columns: %w", err)
		}
		c.Columns = append(c.Columns, name)
		col := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		if strings.HasPrefix(typ, "TIMESTAMP") {
			col = "epoch_us(" + col + ")"
		}
		sel = append(sel, col)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("compare: columns: %w", err)
	}
	count := func(q string, n *int64) error {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM ("+q+")").Scan(n); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		return nil
	}
	d := "SELECT " + strings.Join(sel, ", ") + " FROM read_parquet(" + sqlString(duckFile) + ")"
	if err := count(d, &c.DuckDBRows); err != nil {
		return nil, err
	}
	if len(floeFiles) == 0 { // floe wrote nothing: equal only to an empty answer
		c.OnlyDuckDB = c.DuckDBRows
		return c, nil
	}
	f := "SELECT " + strings.Join(sel, ", ") + " FROM read_parquet(" + sqlList(floeFiles) + ", hive_partitioning = true, hive_types_autocast = false)"
	if err := errors.Join(count(f, &c.FloeRows),
		count(f+" EXCEPT ALL "+d, &c.OnlyFloe), count(d+" EXCEPT ALL "+f, &c.OnlyDuckDB)); err != nil {
		return nil, err
	}
	return c, nil
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
