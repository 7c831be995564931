// Command floe-unusedcol measures what a column no stage reads costs a
// graph pipeline: an interval join of bids with auctions, then a window
// over the join, run over the same Parquet files with and without a pad
// column (--pad bytes a row, random letters) on both streams.
//
//	floe-unusedcol --bids 500000 --pad 1024 --data /tmp/unusedcol --runs 3
//
// Each run is a child process (this binary re-executed), timed inside the
// child; CPU seconds are the child's user+sys, peak RSS its VmHWM. The
// outputs of the two variants must be equal (the command fails if not).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/bench"
	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "floe-unusedcol: %v\n", err)
		os.Exit(1)
	}
}

// job is one floe run of a child.
type job struct {
	Data, Sink, State string
	Pad               bool
	MaxFiles          int
	CPUProfile        string
}

type result struct {
	Seconds float64
	Epochs  int
	RowsOut int64
	Outputs []string
}

const pipeline = `name: unusedcol
sources:
  auctions:
    type: files
    url: "%[1]s/auctions"
    format: parquet
    schema: {id: int64, seller: int64, category: int64, ts: timestamp%[3]s}
    event_time: ts
    max_files_per_epoch: %[4]d
    watermark: {max_out_of_orderness: 2s}
  bids:
    type: files
    url: "%[1]s/bids"
    format: parquet
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp%[3]s}
    event_time: ts
    max_files_per_epoch: %[4]d
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: joined
    inputs: [bids, auctions]
    join: {left_on: [auction], right_on: [id], interval: {lower: 60s, upper: 0s}}
  - name: per-category
    input: joined
    window: {key: [category], tumbling: 10s, aggregates: {bids: "count()", volume: "sum(price)"}}
sinks:
  out: {input: per-category, type: files, url: "%[2]s", format: parquet}
state: {url: "%[5]s"}
`

func runJob(ctx context.Context, j job) (*result, error) {
	pad := ""
	if j.Pad {
		pad = ", pad: string"
	}
	text := fmt.Sprintf(pipeline, j.Data, j.Sink, pad, j.MaxFiles, j.State)
	p, err := spec.Parse("unusedcol.yaml", []byte(text), j.Data)
	if err != nil {
		return nil, err
	}
	if j.CPUProfile != "" {
		f, err := os.Create(j.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	res, err := engine.Run(ctx, p, engine.Options{Drain: true})
	if err != nil {
		return nil, err
	}
	out := &result{Seconds: time.Since(t0).Seconds(), Epochs: res.Epochs, RowsOut: res.RowsOut}
	for _, o := range res.Outputs {
		out.Outputs = append(out.Outputs, filepath.Join(j.Sink, filepath.FromSlash(o)))
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("floe-unusedcol", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var child, jobText, data, pprofDir string
	var bids, files, padBytes, runs, maxFiles int
	fs.IntVar(&bids, "bids", 500_000, "bids to generate (one auction per 10 bids)")
	fs.IntVar(&files, "files", 20, "files per stream")
	fs.IntVar(&padBytes, "pad", 1024, "bytes of the unused column, per row")
	fs.IntVar(&runs, "runs", 3, "timed runs per variant (the median is reported)")
	fs.IntVar(&maxFiles, "max-files-per-epoch", 5, "source max_files_per_epoch")
	fs.StringVar(&data, "data", "", "folder for the generated files and the runs (required)")
	fs.StringVar(&pprofDir, "pprof", "", "write a CPU profile of each variant's last run here")
	fs.StringVar(&child, "child", "", "internal: run one job and report JSON")
	fs.StringVar(&jobText, "job", "", "internal: the child's job, JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if child != "" {
		var j job
		if err := json.Unmarshal([]byte(jobText), &j); err != nil {
			return err
		}
		r, err := runJob(ctx, j)
		if err != nil {
			return err
		}
		return bench.WriteChildResult(stdout, r)
	}
	if data == "" {
		return errors.New("--data is required")
	}
	set := filepath.Join(data, fmt.Sprintf("b%d-f%d-p%d", bids, files, padBytes))
	if err := generate(set, bids, files, padBytes, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "interval join of %d bids with %d auctions, then a 10 s window; %d files a stream, %d an epoch, then drain\n\n", bids, bids/10, files, maxFiles)
	fmt.Fprintln(stdout, "| variant | wall s | CPU s | peak RSS MiB | rows out | runs (wall) |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|")
	type stat struct{ wall, cpu, rss float64 }
	var stats []stat
	var outs [][]string
	for _, v := range []string{"plain", "padded"} {
		var walls, cpus, rsss []float64
		var r result
		for i := range runs {
			base := filepath.Join(data, "runs", v)
			os.RemoveAll(base)
			j := job{Data: filepath.Join(set, v), Sink: filepath.Join(base, "out"), State: filepath.Join(base, "state"), Pad: v == "padded", MaxFiles: maxFiles}
			if pprofDir != "" && i == runs-1 {
				os.MkdirAll(pprofDir, 0o755)
				j.CPUProfile = filepath.Join(pprofDir, v+".pprof")
			}
			rss, err := bench.Spawn(ctx, "floe", j, &r, stderr, &cpus)
			if err != nil {
				return err
			}
			walls, rsss = append(walls, r.Seconds), append(rsss, rss)
		}
		rows, err := outputRows(r.Outputs)
		if err != nil {
			return err
		}
		outs = append(outs, rows)
		s := stat{bench.Median(walls), bench.Median(cpus), bench.Median(rsss)}
		stats = append(stats, s)
		fmt.Fprintf(stdout, "| %s | %.2f | %.2f | %.0f | %d | %.2f |\n", v, s.wall, s.cpu, s.rss, r.RowsOut, walls)
	}
	fmt.Fprintf(stdout, "\npadded / plain: wall %.2fx, CPU %.2fx, peak RSS %.2fx\n",
		stats[1].wall/stats[0].wall, stats[1].cpu/stats[0].cpu, stats[1].rss/stats[0].rss)
	if !slices.Equal(outs[0], outs[1]) {
		return fmt.Errorf("the outputs differ: %d rows plain, %d padded", len(outs[0]), len(outs[1]))
	}
	fmt.Fprintf(stdout, "outputs equal (%d rows)\n", len(outs[0]))
	return nil
}

// outputRows returns the rows of Parquet files as sorted strings.
func outputRows(files []string) ([]string, error) {
	var rows []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		_, recs, err := formats.ReadParquet(data, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				var b strings.Builder
				for c := range int(rec.NumCols()) {
					fmt.Fprintf(&b, "%s|", rec.Column(c).ValueStr(i))
				}
				rows = append(rows, b.String())
			}
			rec.Release()
		}
	}
	slices.Sort(rows)
	return rows, nil
}

// generate writes dir/{plain,padded}/{auctions,bids}/f-NNN.parquet once:
// bids at 1,000 a second of event time, in order, each on one of the last
// 100 auctions (one every 10 bids); padded adds pad random letters a row.
func generate(dir string, bids, files, pad int, log io.Writer) error {
	marker := filepath.Join(dir, ".complete")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	fmt.Fprintf(log, "generating %s\n", dir)
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	start := time.Date(2024, 6, 1, 8, 0, 0, 0, time.UTC).UnixMicro()
	var rng *rand.Rand
	padRng := rand.New(rand.NewPCG(1, 2)) // its own stream: the rows do not depend on the pad
	letters := func(b []byte) string {
		for i := range b {
			b[i] = 'a' + byte(padRng.IntN(26))
		}
		return string(b)
	}
	buf := make([]byte, pad)
	mem := memory.DefaultAllocator
	per := bids / files
	for f := range files {
		for _, padded := range []bool{false, true} {
			v := "plain"
			if padded {
				v = "padded"
			}
			aFields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "seller", Type: arrow.PrimitiveTypes.Int64},
				{Name: "category", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: ts}}
			bFields := []arrow.Field{{Name: "auction", Type: arrow.PrimitiveTypes.Int64}, {Name: "bidder", Type: arrow.PrimitiveTypes.Int64},
				{Name: "price", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: ts}}
			if padded {
				aFields = append(aFields, arrow.Field{Name: "pad", Type: arrow.BinaryTypes.String})
				bFields = append(bFields, arrow.Field{Name: "pad", Type: arrow.BinaryTypes.String})
			}
			ab := array.NewRecordBuilder(mem, arrow.NewSchema(aFields, nil))
			bb := array.NewRecordBuilder(mem, arrow.NewSchema(bFields, nil))
			// The same rows in both variants: the generator is reseeded
			// per file, and the pad letters have their own.
			rng = rand.New(rand.NewPCG(uint64(f)+1, 2))
			for i := f * per; i < (f+1)*per; i++ {
				t := start + int64(i)*1000 // 1,000 bids a second
				if i%10 == 0 {
					id := int64(i / 10)
					ab.Field(0).(*array.Int64Builder).Append(id)
					ab.Field(1).(*array.Int64Builder).Append(id % 1000)
					ab.Field(2).(*array.Int64Builder).Append(id % 5)
					ab.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(t))
				}
				auction := max(0, int64(i/10)-int64(rng.IntN(100)))
				bb.Field(0).(*array.Int64Builder).Append(auction)
				bb.Field(1).(*array.Int64Builder).Append(int64(rng.IntN(10000)))
				bb.Field(2).(*array.Int64Builder).Append(int64(100 + rng.IntN(100000)))
				bb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(t))
				if padded {
					if i%10 == 0 {
						ab.Field(4).(*array.StringBuilder).Append(letters(buf))
					}
					bb.Field(4).(*array.StringBuilder).Append(letters(buf))
				}
			}
			for _, s := range []struct {
				name string
				b    *array.RecordBuilder
			}{{"auctions", ab}, {"bids", bb}} {
				rec := s.b.NewRecordBatch()
				data, err := formats.EncodeParquet(rec.Schema(), []arrow.RecordBatch{rec}, formats.EncodeOptions{Mem: mem, Compression: "snappy"})
				rec.Release()
				s.b.Release()
				if err != nil {
					return err
				}
				d := filepath.Join(dir, v, s.name)
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f-%03d.parquet", f)), data, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return os.WriteFile(marker, nil, 0o644)
}
