// Package datagen generates deterministic clickstream data sets for floe's
// tests, benchmarks and examples.
//
// A data set is Files time-ordered files named events-%05d.<ext>; file i
// holds the events of the i-th of Files equal slices of [Start, Start+Span).
// Every row has the columns
//
//	event_time timestamp  (RFC 3339 UTC with milliseconds in JSONL/CSV;
//	                       timestamp[us, UTC] in Parquet)
//	user_id    string     "u1".."u<Users>", skewed towards low numbers
//	page       string     one of Pages paths
//	bytes      int64      1..100000 (log-uniform), about 2% zeros
//
// The same Options (Seed included) always yield byte-identical files, and
// file i depends only on the Options and i.
package datagen

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Formats Generate writes.
const (
	JSONL   = "jsonl"
	CSV     = "csv"
	Parquet = "parquet"
)

// Options describes a data set. Zero values take the defaults noted.
type Options struct {
	// Rows is the total number of rows, malformed and late ones included.
	Rows int64
	// Files is the number of files (default 1).
	Files int
	// Users is the number of distinct users (default 100).
	Users int
	// Pages is the number of distinct pages (default 20).
	Pages int
	// Span is the event-time range the files cover (default 1h).
	Span time.Duration
	// Start is the first event time (default 2024-01-01T00:00:00Z).
	Start time.Time
	// Seed makes the data set; equal seeds give equal bytes.
	Seed uint64
	// Format is "jsonl" (default), "csv" or "parquet".
	Format string
	// OutOfOrder shuffles the rows of a file: a row may appear after rows
	// up to this much younger than it.
	OutOfOrder time.Duration
	// LateFraction of rows (0..1) carry an event time 2 to 5 minutes
	// older than their place in the stream, so that a watermark has
	// usually passed them. Rows that would fall before Start stay on time.
	LateFraction float64
	// MalformedFraction of rows (0..1) are undecodable: broken JSON, a
	// wrong type, a bad timestamp, a wrong column count. Ignored for
	// Parquet, whose rows are typed.
	MalformedFraction float64
}

// DefaultStart is the Start used when Options.Start is zero.
var DefaultStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Columns is the column order of every generated file.
var Columns = []string{"event_time", "user_id", "page", "bytes"}

// basePages are the first pages; more are "/p/<n>".
var basePages = []string{
	"/", "/home", "/search", "/login", "/logout", "/cart", "/checkout", "/account",
	"/settings", "/help", "/about", "/blog", "/blog/post", "/products", "/products/item",
	"/pricing", "/docs", "/docs/start", "/contact", "/careers",
}

func (o *Options) defaults() error {
	if o.Files == 0 {
		o.Files = 1
	}
	if o.Users == 0 {
		o.Users = 100
	}
	if o.Pages == 0 {
		o.Pages = 20
	}
	if o.Span == 0 {
		o.Span = time.Hour
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	if o.Format == "" {
		o.Format = JSONL
	}
	var errs []error
	if o.Rows < 0 {
		errs = append(errs, fmt.Errorf("rows must be >= 0, got %d", o.Rows))
	}
	if o.Files < 1 {
		errs = append(errs, fmt.Errorf("files must be >= 1, got %d", o.Files))
	}
	if o.Users < 1 {
		errs = append(errs, fmt.Errorf("users must be >= 1, got %d", o.Users))
	}
	if o.Pages < 1 {
		errs = append(errs, fmt.Errorf("pages must be >= 1, got %d", o.Pages))
	}
	if o.Span <= 0 {
		errs = append(errs, fmt.Errorf("span must be > 0, got %v", o.Span))
	}
	if o.OutOfOrder < 0 {
		errs = append(errs, fmt.Errorf("out-of-order must be >= 0, got %v", o.OutOfOrder))
	}
	if o.Format != JSONL && o.Format != CSV && o.Format != Parquet {
		errs = append(errs, fmt.Errorf("format must be jsonl, csv or parquet, got %q", o.Format))
	}
	if !(o.LateFraction >= 0 && o.LateFraction <= 1) {
		errs = append(errs, fmt.Errorf("late fraction must be in [0, 1], got %v", o.LateFraction))
	}
	if !(o.MalformedFraction >= 0 && o.MalformedFraction <= 1) {
		errs = append(errs, fmt.Errorf("malformed fraction must be in [0, 1], got %v", o.MalformedFraction))
	}
	return errors.Join(errs...)
}

// FileName returns the name of file i for format.
func FileName(i int, format string) string { return fmt.Sprintf("events-%05d.%s", i, format) }

// Generate produces the data set described by opts and hands each file, in
// order, to w. It stops at the first error.
func Generate(opts Options, w func(name string, data []byte) error) error {
	if err := opts.defaults(); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	pages := make([]string, opts.Pages)
	for i := range pages {
		if i < len(basePages) {
			pages[i] = basePages[i]
		} else {
			pages[i] = "/p/" + strconv.Itoa(i)
		}
	}
	g := &gen{opts: opts, pages: pages}
	per, extra := opts.Rows/int64(opts.Files), opts.Rows%int64(opts.Files)
	for i := 0; i < opts.Files; i++ {
		n := per
		if int64(i) < extra {
			n++
		}
		data, err := g.file(i, n)
		if err != nil {
			return fmt.Errorf("datagen: file %d: %w", i, err)
		}
		name := FileName(i, opts.Format)
		if err := w(name, data); err != nil {
			return fmt.Errorf("datagen: write %s: %w", name, err)
		}
	}
	return nil
}

type gen struct {
	opts  Options
	pages []string
}

type row struct {
	t         time.Time
	order     int64 // emission order key (ns offset)
	user      int
	page      int
	bytes     int64
	malformed int // 0 = well formed, else the kind of damage
}

// rows makes the rows of file i, in emission order.
func (g *gen) rows(i int, n int64) []row {
	o := g.opts
	r := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	from := o.Start.Add(time.Duration(int64(o.Span) / int64(o.Files) * int64(i)))
	slice := time.Duration(int64(o.Span) / int64(o.Files))
	rows := make([]row, n)
	for j := range rows {
		// Evenly spread, jittered, still sorted: row j lies in its own
		// 1/n of the slice.
		off := time.Duration((float64(j) + r.Float64()) * float64(slice) / float64(n))
		t := from.Add(off).Truncate(time.Millisecond)
		order := int64(off)
		if o.OutOfOrder > 0 {
			order += r.Int64N(int64(o.OutOfOrder))
		}
		u := r.Float64()
		b := int64(0)
		if r.Float64() >= 0.02 {
			b = min(100000, max(1, int64(math.Exp(r.Float64()*math.Log(100000)))))
		}
		rw := row{t: t, order: order, user: min(o.Users-1, int(float64(o.Users)*u*u)), page: r.IntN(len(g.pages)), bytes: b}
		if o.LateFraction > 0 && r.Float64() < o.LateFraction {
			late := rw.t.Add(-2*time.Minute - time.Duration(r.Int64N(int64(3*time.Minute)))).Truncate(time.Millisecond)
			if !late.Before(o.Start) {
				rw.t = late
			}
		}
		if o.Format != Parquet && o.MalformedFraction > 0 && r.Float64() < o.MalformedFraction {
			rw.malformed = 1 + r.IntN(4)
		}
		rows[j] = rw
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		switch {
		case a.order < b.order:
			return -1
		case a.order > b.order:
			return 1
		}
		return 0
	})
	return rows
}

const tsLayout = "2006-01-02T15:04:05.000Z07:00"

func (g *gen) file(i int, n int64) ([]byte, error) {
	rows := g.rows(i, n)
	switch g.opts.Format {
	case CSV:
		return g.csv(rows), nil
	case Parquet:
		return g.parquet(rows)
	}
	return g.jsonl(rows), nil
}

func (g *gen) jsonl(rows []row) []byte {
	var b bytes.Buffer
	b.Grow(len(rows) * 96)
	var num [24]byte
	for _, r := range rows {
		ts := r.t.UTC().Format(tsLayout)
		switch r.malformed {
		case 1: // truncated line
			b.WriteString(`{"event_time":"` + ts + `","user_id":"u`)
			b.Write(strconv.AppendInt(num[:0], int64(r.user+1), 10))
			b.WriteString("\"\n")
			continue
		case 2: // wrong type
			b.WriteString(`{"event_time":"` + ts + `","user_id":"u1","page":"/","bytes":"lots"}` + "\n")
			continue
		case 3: // bad timestamp
			b.WriteString(`{"event_time":"yesterday","user_id":"u1","page":"/","bytes":1}` + "\n")
			continue
		case 4: // not JSON at all
			b.WriteString("not json\n")
			continue
		}
		b.WriteString(`{"event_time":"`)
		b.WriteString(ts)
		b.WriteString(`","user_id":"u`)
		b.Write(strconv.AppendInt(num[:0], int64(r.user+1), 10))
		b.WriteString(`","page":"`)
		b.WriteString(g.pages[r.page])
		b.WriteString(`","bytes":`)
		b.Write(strconv.AppendInt(num[:0], r.bytes, 10))
		b.WriteString("}\n")
	}
	return b.Bytes()
}

func (g *gen) csv(rows []row) []byte {
	var b bytes.Buffer
	b.Grow(len(rows)*64 + 32)
	b.WriteString("event_time,user_id,page,bytes\n")
	var num [24]byte
	for _, r := range rows {
		ts := r.t.UTC().Format(tsLayout)
		switch r.malformed {
		case 1: // missing columns
			b.WriteString(ts + ",u1\n")
			continue
		case 2: // wrong type
			b.WriteString(ts + ",u1,/,lots\n")
			continue
		case 3: // bad timestamp
			b.WriteString("yesterday,u1,/,1\n")
			continue
		case 4: // extra column
			b.WriteString(ts + ",u1,/,1,extra\n")
			continue
		}
		b.WriteString(ts)
		b.WriteString(",u")
		b.Write(strconv.AppendInt(num[:0], int64(r.user+1), 10))
		b.WriteByte(',')
		b.WriteString(g.pages[r.page])
		b.WriteByte(',')
		b.Write(strconv.AppendInt(num[:0], r.bytes, 10))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Schema is the Arrow schema of generated Parquet files.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "user_id", Type: arrow.BinaryTypes.String},
	{Name: "page", Type: arrow.BinaryTypes.String},
	{Name: "bytes", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// rowGroupRows bounds the rows per Parquet row group.
const rowGroupRows = 128 * 1024

func (g *gen) parquet(rows []row) ([]byte, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(rowGroupRows),
	)
	fw, err := pqarrow.NewFileWriter(Schema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("parquet writer: %w", err)
	}
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
	ts := b.Field(0).(*array.TimestampBuilder)
	users := b.Field(1).(*array.StringBuilder)
	pages := b.Field(2).(*array.StringBuilder)
	sizes := b.Field(3).(*array.Int64Builder)
	userNames := make([]string, g.opts.Users)
	for i := range userNames {
		userNames[i] = "u" + strconv.Itoa(i+1)
	}
	for start := 0; start < len(rows); start += rowGroupRows {
		for _, r := range rows[start:min(len(rows), start+rowGroupRows)] {
			ts.Append(arrow.Timestamp(r.t.UnixMicro()))
			users.Append(userNames[r.user])
			pages.Append(g.pages[r.page])
			sizes.Append(r.bytes)
		}
		rec := b.NewRecordBatch()
		err := fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return nil, fmt.Errorf("parquet write: %w", err)
		}
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("parquet close: %w", err)
	}
	return buf.Bytes(), nil
}
