package nexmark

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
)

// TestQ6AcrossRescale runs Nexmark q6 (an over stage: the average of a
// seller's last 11 winning prices, DuckDB's AVG(final) OVER (PARTITION BY
// seller ORDER BY expires ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)) for
// part of the input at parallelism 2 and the rest at 3, and compares the
// rows with DuckDB's. The comparison is shown to see the frame: DuckDB's
// answer with 9 preceding rows differs.
func TestQ6AcrossRescale(t *testing.T) {
	l := testData(t)
	ctx := context.Background()
	db, err := OpenDuckDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// q6.yaml's join bounds a bid by auction.dateTime + 15m.
	longest, err := DuckSQL(Query{SQL: "SELECT max(epoch_us(expires) - epoch_us(dateTime)) FROM {auctions}"}, l.Dir, Parquet, 0)
	if err != nil {
		t.Fatal(err)
	}
	var us int64
	if err := db.QueryRowContext(ctx, longest).Scan(&us); err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(us) * time.Microsecond; d > 15*time.Minute || d < time.Minute {
		t.Fatalf("the longest auction lasts %s: q6.yaml's interval upper (15m) must cover it", d)
	}

	q, err := lookupOne("q6")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j := FloeJob{Query: q.Name, Data: l.Dir, Format: Parquet, Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"),
		Parallelism: 2, MaxDelay: testConfig.MaxDelay, MaxFilesPerEpoch: 2}
	p, err := Pipeline(q, j)
	if err != nil {
		t.Fatal(err)
	}
	first, err := engine.Run(ctx, p, engine.Options{UntilEpoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := engine.Run(ctx, p, engine.Options{Drain: true, Parallelism: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("parallelism 2: %d epochs, %d rows out; parallelism 3: %d epochs, %d rows out", first.Epochs, first.RowsOut, rest.Epochs, rest.RowsOut)
	if first.RowsOut == 0 || rest.RowsOut == 0 || first.RowsLate+rest.RowsLate != 0 {
		t.Fatalf("each part must emit rows, none late: %d and %d out, %d late", first.RowsOut, rest.RowsOut, first.RowsLate+rest.RowsLate)
	}
	var outs []string
	for _, o := range append(first.Outputs, rest.Outputs...) {
		outs = append(outs, filepath.Join(j.Sink, filepath.FromSlash(o)))
	}
	want := filepath.Join(dir, "duck.parquet")
	if _, err := RunDuckDB(ctx, DuckJob{Query: q.Name, Data: l.Dir, Format: Parquet, Out: want}); err != nil {
		t.Fatal(err)
	}
	c, err := Compare(ctx, outs, want)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Equal() || c.DuckDBRows < 100 {
		t.Fatalf("q6 across a rescale differs from DuckDB on %v: %s", c.Columns, c)
	}

	narrow := q
	narrow.SQL = strings.Replace(q.SQL, "10 PRECEDING", "9 PRECEDING", 1)
	sel, err := DuckSQL(narrow, l.Dir, Parquet, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "duck9.parquet")
	if _, err := db.ExecContext(ctx, "COPY ("+sel+") TO "+sqlString(other)+" (FORMAT parquet)"); err != nil {
		t.Fatal(err)
	}
	if c, err := Compare(ctx, outs, other); err != nil || c.Equal() {
		t.Fatalf("against 9 preceding rows: %v %v, want a difference", c, err)
	}
}
