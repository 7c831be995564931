// Command floe-gen writes a deterministic clickstream data set (see
// internal/datagen) into a local directory:
//
//	floe-gen --rows 10000000 --files 100 --users 10000 --span 100m --format parquet --out DIR --seed 1
//
// Each file is written to a temporary name and renamed into place, so a
// pipeline watching DIR never sees a partial file. Exit status: 0 success,
// 2 bad flags or a failed write.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/floe-dev/floe/internal/datagen"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("floe-gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o datagen.Options
	var out, start string
	fs.Int64Var(&o.Rows, "rows", 10000, "total rows")
	fs.IntVar(&o.Files, "files", 10, "number of files")
	fs.IntVar(&o.Users, "users", 100, "distinct users")
	fs.IntVar(&o.Pages, "pages", 20, "distinct pages")
	fs.DurationVar(&o.Span, "span", time.Hour, "event-time range covered by all files")
	fs.StringVar(&start, "start", datagen.DefaultStart.Format(time.RFC3339), "first event time (RFC 3339)")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed; equal seeds give identical files")
	fs.StringVar(&o.Format, "format", datagen.JSONL, "jsonl, csv or parquet")
	fs.DurationVar(&o.OutOfOrder, "out-of-order", 0, "how far rows in a file may be out of event-time order")
	fs.Float64Var(&o.LateFraction, "late", 0, "fraction of rows 2-5 minutes late")
	fs.Float64Var(&o.MalformedFraction, "malformed", 0, "fraction of undecodable rows (jsonl, csv)")
	fs.StringVar(&out, "out", "", "output directory (created if missing)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "floe-gen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if out == "" {
		fmt.Fprintln(stderr, "floe-gen: --out is required")
		return 2
	}
	t, err := time.Parse(time.RFC3339, start)
	if err != nil {
		fmt.Fprintf(stderr, "floe-gen: --start: %v\n", err)
		return 2
	}
	o.Start = t
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintf(stderr, "floe-gen: %v\n", err)
		return 2
	}
	var files, size int64
	err = datagen.Generate(o, func(name string, data []byte) error {
		files++
		size += int64(len(data))
		return writeFile(filepath.Join(out, name), data)
	})
	if err != nil {
		fmt.Fprintf(stderr, "floe-gen: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "wrote %d files, %d rows, %d bytes to %s\n", files, o.Rows, size, out)
	return 0
}

// writeFile writes data to a temporary file beside path and renames it
// into place.
func writeFile(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
