package formats

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func mustSchema(t testing.TB, fields ...Field) *arrow.Schema {
	t.Helper()
	s, err := SchemaFromFields(fields)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func clickSchema(t testing.TB) *arrow.Schema {
	return mustSchema(t, Field{"event_time", "timestamp"}, Field{"user_id", "string"}, Field{"page", "string"}, Field{"bytes", "int64"})
}

// ts parses an RFC 3339 time for expectations.
func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// cellValue converts one Arrow value to a comparable Go value.
func cellValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		return a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit).UTC()
	}
	panic(fmt.Sprintf("unexpected %T", a))
}

// rows flattens batches into rows of Go values.
func rows(bs []arrow.RecordBatch) [][]any {
	var out [][]any
	for _, b := range bs {
		for r := 0; r < int(b.NumRows()); r++ {
			row := make([]any, b.NumCols())
			for c := range row {
				row[c] = cellValue(b.Column(c), r)
			}
			out = append(out, row)
		}
	}
	return out
}

func decode(t testing.TB, format, data string, opts DecodeOptions) *Decoded {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opts.Mem = mem
	d, err := Decode(format, "in."+format, []byte(data), opts)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	t.Cleanup(func() {
		d.Release()
		mem.AssertSize(t, 0)
	})
	return d
}

// genClicks generates n clickstream rows as JSON lines.
func genClicks(n int) []byte {
	pages := []string{"/", "/home", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/product/3",
		"/about", "/help", "/login", "/logout", "/account", "/orders", "/blog", "/blog/post-1", "/blog/post-2",
		"/pricing", "/docs", "/contact"}
	base := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	var sb strings.Builder
	for i := 0; i < n; i++ {
		t := base.Add(time.Duration(i) * 37 * time.Millisecond)
		fmt.Fprintf(&sb, `{"event_time":"%s","user_id":"user-%d","page":"%s","bytes":%d}`+"\n",
			t.Format(time.RFC3339Nano), (i*7919)%10000, pages[(i*31)%len(pages)], (i*131)%65536)
	}
	return []byte(sb.String())
}
