package datagen

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

type genFile struct {
	name string
	data []byte
}

func generate(t *testing.T, o Options) []genFile {
	t.Helper()
	var out []genFile
	err := Generate(o, func(name string, data []byte) error {
		out = append(out, genFile{name, bytes.Clone(data)})
		return nil
	})
	if err != nil {
		t.Fatalf("Generate(%+v): %v", o, err)
	}
	return out
}

func TestDeterministic(t *testing.T) {
	for _, format := range []string{JSONL, CSV, Parquet} {
		t.Run(format, func(t *testing.T) {
			o := Options{Rows: 5000, Files: 4, Users: 50, Span: 20 * time.Minute, Seed: 7, Format: format,
				OutOfOrder: 5 * time.Second, LateFraction: 0.01, MalformedFraction: 0.01}
			a, b := generate(t, o), generate(t, o)
			if len(a) != 4 {
				t.Fatalf("%d files, want 4", len(a))
			}
			for i := range a {
				if want := fmt.Sprintf("events-%05d.%s", i, format); a[i].name != want {
					t.Errorf("file %d named %q, want %q", i, a[i].name, want)
				}
				if !bytes.Equal(a[i].data, b[i].data) {
					t.Errorf("%s differs between two runs with the same seed", a[i].name)
				}
			}
			o.Seed = 8
			c := generate(t, o)
			if bytes.Equal(a[0].data, c[0].data) {
				t.Errorf("seeds 7 and 8 gave the same %s", a[0].name)
			}
		})
	}
}

type event struct {
	EventTime time.Time `json:"event_time"`
	UserID    string    `json:"user_id"`
	Page      string    `json:"page"`
	Bytes     int64     `json:"bytes"`
}

// decodeJSONL returns the well-formed events of a file and the number of
// malformed lines.
func decodeJSONL(t *testing.T, data []byte) (evs []event, bad int) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var e event
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			bad++
			continue
		}
		evs = append(evs, e)
	}
	return evs, bad
}

func TestJSONLContent(t *testing.T) {
	o := Options{Rows: 20000, Files: 10, Users: 20, Pages: 25, Span: 100 * time.Minute, Seed: 1,
		OutOfOrder: 10 * time.Second, LateFraction: 0.01, MalformedFraction: 0.005}
	files := generate(t, o)
	var total, malformed, late, zeros int
	users := map[string]int{}
	pages := map[string]bool{}
	for i, f := range files {
		evs, bad := decodeJSONL(t, f.data)
		if got := len(evs) + bad; got != 2000 {
			t.Errorf("%s: %d rows, want 2000", f.name, got)
		}
		total += len(evs) + bad
		malformed += bad
		from := DefaultStart.Add(time.Duration(i) * 10 * time.Minute)
		to := from.Add(10 * time.Minute)
		var maxSeen time.Time
		for _, e := range evs {
			users[e.UserID]++
			pages[e.Page] = true
			if e.Bytes == 0 {
				zeros++
			}
			if e.Bytes < 0 || e.Bytes > 100000 {
				t.Fatalf("bytes %d out of range", e.Bytes)
			}
			if e.EventTime.Before(maxSeen.Add(-o.OutOfOrder)) {
				// Older than the out-of-order bound allows: must be a late row.
				if lag := maxSeen.Sub(e.EventTime); lag < 2*time.Minute-o.OutOfOrder || lag > 5*time.Minute+o.OutOfOrder {
					t.Errorf("%s: row %v lags %v: neither out-of-order (<%v) nor late (2-5m)", f.name, e.EventTime, lag, o.OutOfOrder)
				}
				late++
				continue
			}
			if e.EventTime.Before(from) || !e.EventTime.Before(to) {
				t.Errorf("%s: on-time row at %v outside [%v, %v)", f.name, e.EventTime, from, to)
			}
			if e.EventTime.After(maxSeen) {
				maxSeen = e.EventTime
			}
		}
	}
	if total != 20000 {
		t.Errorf("total rows %d, want 20000", total)
	}
	if malformed < 50 || malformed > 160 {
		t.Errorf("%d malformed rows, want about 100", malformed)
	}
	if late < 100 || late > 300 {
		t.Errorf("%d late rows, want about 200 (minus those at the start)", late)
	}
	if zeros < 200 || zeros > 700 {
		t.Errorf("%d zero-byte rows, want about 2%%", zeros)
	}
	if len(users) != 20 || len(pages) != 25 {
		t.Errorf("%d users, %d pages; want 20, 25", len(users), len(pages))
	}
	if users["u1"] <= users["u20"] {
		t.Errorf("users not skewed: u1 %d rows, u20 %d rows", users["u1"], users["u20"])
	}
}

func TestRowsSplitAcrossFiles(t *testing.T) {
	files := generate(t, Options{Rows: 10, Files: 3, Seed: 3})
	var counts []int
	for _, f := range files {
		counts = append(counts, bytes.Count(f.data, []byte("\n")))
	}
	if fmt.Sprint(counts) != "[4 3 3]" {
		t.Errorf("rows per file %v, want [4 3 3]", counts)
	}
}

func TestCSV(t *testing.T) {
	files := generate(t, Options{Rows: 3000, Files: 2, Seed: 5, Format: CSV, MalformedFraction: 0.01})
	var good, bad int
	for _, f := range files {
		r := csv.NewReader(bytes.NewReader(f.data))
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if strings.Join(recs[0], ",") != "event_time,user_id,page,bytes" {
			t.Errorf("%s header %v", f.name, recs[0])
		}
		for _, rec := range recs[1:] {
			if len(rec) != 4 {
				bad++
				continue
			}
			if _, err := time.Parse(time.RFC3339, rec[0]); err != nil {
				bad++
				continue
			}
			var n int64
			if _, err := fmt.Sscan(rec[3], &n); err != nil {
				bad++
				continue
			}
			good++
		}
	}
	if good+bad != 3000 || bad < 10 || bad > 60 {
		t.Errorf("good %d bad %d, want 3000 rows with about 30 bad", good, bad)
	}
}

// TestParquetMatchesJSONL reads the Parquet files back and checks they hold
// the same rows, in the same order, as the JSONL of the same options.
func TestParquetMatchesJSONL(t *testing.T) {
	o := Options{Rows: 3000, Files: 3, Users: 30, Span: 30 * time.Minute, Seed: 11, OutOfOrder: 3 * time.Second, LateFraction: 0.02}
	js := generate(t, o)
	o.Format = Parquet
	pq := generate(t, o)
	for i := range pq {
		want, bad := decodeJSONL(t, js[i].data)
		if bad != 0 {
			t.Fatalf("%d malformed rows without MalformedFraction", bad)
		}
		rdr, err := file.NewParquetReader(bytes.NewReader(pq[i].data))
		if err != nil {
			t.Fatalf("%s: %v", pq[i].name, err)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for k, f := range tbl.Schema().Fields() {
			if w := Schema.Field(k); f.Name != w.Name || !arrow.TypeEqual(f.Type, w.Type) {
				t.Errorf("column %d is %s %s, want %s %s", k, f.Name, f.Type, w.Name, w.Type)
			}
		}
		if int(tbl.NumRows()) != len(want) {
			t.Fatalf("%s: %d rows, want %d", pq[i].name, tbl.NumRows(), len(want))
		}
		rr := array.NewTableReader(tbl, 0)
		j := 0
		for rr.Next() {
			rec := rr.RecordBatch()
			ts := rec.Column(0).(*array.Timestamp)
			us := rec.Column(1).(*array.String)
			ps := rec.Column(2).(*array.String)
			bs := rec.Column(3).(*array.Int64)
			for k := 0; k < int(rec.NumRows()); k, j = k+1, j+1 {
				got := event{EventTime: time.UnixMicro(int64(ts.Value(k))).UTC(), UserID: us.Value(k), Page: ps.Value(k), Bytes: bs.Value(k)}
				if w := want[j]; !got.EventTime.Equal(w.EventTime) || got.UserID != w.UserID || got.Page != w.Page || got.Bytes != w.Bytes {
					t.Fatalf("%s row %d: parquet %+v, jsonl %+v", pq[i].name, j, got, w)
				}
			}
		}
		rr.Release()
		tbl.Release()
	}
}

func TestOptionsErrors(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Format: "xml"}, `datagen: format must be jsonl, csv or parquet, got "xml"`},
		{Options{Rows: -1}, `datagen: rows must be >= 0, got -1`},
		{Options{Files: -2, Span: -time.Second}, "datagen: files must be >= 1, got -2\nspan must be > 0, got -1s"},
		{Options{LateFraction: 1.5}, `datagen: late fraction must be in [0, 1], got 1.5`},
	}
	for _, c := range cases {
		err := Generate(c.o, func(string, []byte) error { t.Fatal("wrote a file"); return nil })
		if err == nil || err.Error() != c.want {
			t.Errorf("Generate(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	stop := fmt.Errorf("disk full")
	err := Generate(Options{Rows: 10, Files: 2}, func(string, []byte) error { return stop })
	if err == nil || err.Error() != "datagen: write events-00000.jsonl: disk full" {
		t.Errorf("writer error = %v", err)
	}
}

func BenchmarkGenerateParquet(b *testing.B) {
	o := Options{Rows: 100000, Files: 1, Users: 10000, Seed: 1, Format: Parquet}
	for b.Loop() {
		if err := Generate(o, func(string, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// sampleOptions made testdata/events, the sample data set of the README run:
//
//	go run ./cmd/floe-gen --rows 2000 --files 6 --users 20 --span 12m --format jsonl \
//	    --out testdata/events --seed 1 --out-of-order 3s --late 0.005 --malformed 0.004
var sampleOptions = Options{Rows: 2000, Files: 6, Users: 20, Span: 12 * time.Minute, Format: JSONL, Seed: 1,
	OutOfOrder: 3 * time.Second, LateFraction: 0.005, MalformedFraction: 0.004}

// TestSampleData: the checked-in sample is exactly what the generator
// makes, so a generator change that alters output is noticed.
func TestSampleData(t *testing.T) {
	for _, f := range generate(t, sampleOptions) {
		got, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", f.name))
		if err != nil {
			t.Fatalf("sample data: %v (regenerate with the command above)", err)
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("testdata/events/%s differs from the generator's output (regenerate with the command above)", f.name)
		}
	}
}
