package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/datagen"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestGenerateLayout(t *testing.T) {
	dir := t.TempDir()
	d := Dataset{Rows: 1003, Files: 10, Users: 50, Format: datagen.JSONL}
	l, err := Generate(dir, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := l.HistoryFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != d.Files {
		t.Fatalf("history has %d files, want %d", len(files), d.Files)
	}
	var lines int64
	for _, f := range files {
		lines += countLines(t, f)
	}
	if lines != d.Rows {
		t.Errorf("history has %d rows, want %d", lines, d.Rows)
	}
	if n := countLines(t, l.Extra); n != d.Rows/int64(d.Files) {
		t.Errorf("extra file has %d rows, want %d", n, d.Rows/int64(d.Files))
	}
	// A second call finds the marker and leaves the files alone.
	st, _ := os.Stat(files[0])
	if _, err := Generate(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(files[0])
	if !st.ModTime().Equal(st2.ModTime()) {
		t.Error("second Generate rewrote a complete data set")
	}
}

func countLines(t *testing.T, f string) int64 {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, b := range data {
		if b == '\n' {
			n++
		}
	}
	return n
}

// TestFloeMatchesDuckDB runs the benchmark pipeline and the DuckDB query on a
// small data set and requires identical outputs, for a drained catch-up and
// for a catch-up followed by an incremental run over the extra file.
func TestFloeMatchesDuckDB(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	for _, format := range []string{datagen.Parquet, datagen.JSONL} {
		t.Run(format, func(t *testing.T) {
			d := Dataset{Rows: 30000, Files: 12, Users: 200, Format: format}
			l, err := Generate(data, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			hist, err := l.HistoryFiles()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			if err := LinkFiles(src, hist...); err != nil {
				t.Fatal(err)
			}
			j := FloeJob{Source: src, Format: format, Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"), Drain: true}
			fr, err := RunFloe(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			if fr.Rows != d.Rows || fr.Epochs != 3 || fr.RowsLate != 0 {
				t.Errorf("floe: rows %d epochs %d late %d, want %d, 3, 0", fr.Rows, fr.Epochs, fr.RowsLate, d.Rows)
			}
			duckOut := filepath.Join(dir, "duck.parquet")
			if _, err := RunDuckDB(ctx, DuckJob{Files: hist, Format: format, Out: duckOut}); err != nil {
				t.Fatal(err)
			}
			c, err := Compare(ctx, fr.Outputs, duckOut)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Equal() || c.Floe.Clicks != d.Rows {
				t.Fatalf("outputs differ: %+v (want %d clicks)", c, d.Rows)
			}

			// Incremental: history without drain, then the extra file, drained
			// so every window is out; the union must equal DuckDB over all.
			src2 := filepath.Join(dir, "src2")
			if err := LinkFiles(src2, hist...); err != nil {
				t.Fatal(err)
			}
			j2 := FloeJob{Source: src2, Format: format, Sink: filepath.Join(dir, "out2"), State: filepath.Join(dir, "state2")}
			first, err := RunFloe(ctx, j2)
			if err != nil {
				t.Fatal(err)
			}
			if err := LinkFiles(src2, l.Extra); err != nil {
				t.Fatal(err)
			}
			j2.Drain = true
			inc, err := RunFloe(ctx, j2)
			if err != nil {
				t.Fatal(err)
			}
			if inc.Files != 1 {
				t.Errorf("incremental run read %d files, want 1", inc.Files)
			}
			all := append(append([]string{}, hist...), l.Extra)
			if _, err := RunDuckDB(ctx, DuckJob{Files: all, Format: format, Out: duckOut}); err != nil {
				t.Fatal(err)
			}
			c, err = Compare(ctx, append(first.Outputs, inc.Outputs...), duckOut)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Equal() {
				t.Fatalf("incremental outputs differ: %+v", c)
			}
		})
	}
}

// BenchmarkClickstream runs floe (drained catch-up) and DuckDB over the same
// data set in-process; FLOE_BENCH_ROWS sets the size (default 1,000,000).
// Peak memory is only measured by cmd/floe-bench, which uses child processes.
func BenchmarkClickstream(b *testing.B) {
	rows := int64(1_000_000)
	if s := os.Getenv("FLOE_BENCH_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("FLOE_BENCH_ROWS: %v", err)
		}
		rows = n
	}
	ctx := context.Background()
	data := b.TempDir()
	for _, format := range []string{datagen.Parquet, datagen.JSONL} {
		d := Dataset{Rows: rows, Files: 100, Users: 10000, Format: format}
		l, err := Generate(data, d, nil)
		if err != nil {
			b.Fatal(err)
		}
		hist, err := l.HistoryFiles()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(format+"/floe", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				dir := filepath.Join(b.TempDir(), strconv.Itoa(i))
				src := filepath.Join(dir, "src")
				if err := LinkFiles(src, hist...); err != nil {
					b.Fatal(err)
				}
				r, err := RunFloe(ctx, FloeJob{Source: src, Format: format, Sink: filepath.Join(dir, "out"),
					State: filepath.Join(dir, "state"), Drain: true})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(r.Rows)/r.Seconds, "rows/s")
			}
		})
		b.Run(format+"/duckdb", func(b *testing.B) {
			for b.Loop() {
				start := time.Now()
				if _, err := RunDuckDB(ctx, DuckJob{Files: hist, Format: format, Out: filepath.Join(b.TempDir(), "d.parquet")}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
			}
		})
	}
}
