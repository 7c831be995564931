package formats

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/zstd"
)

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstded(t *testing.T, data []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(data, nil)
}

// TestCompressedInput: gzip and zstd JSON-lines and CSV files decode to the
// same rows and the same per-line rejects (with decompressed line numbers)
// as the plain file, whatever they are named: the magic bytes decide.
func TestCompressedInput(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_us}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	plain := map[string][]byte{
		"jsonl": []byte(`{"t":"2024-01-01T00:00:00Z","n":1}` + "\n" + `{"t":"2024-01-01T00:00:01Z","n":"x"}` + "\n" + `{"t":"2024-01-01T00:00:02Z","n":3}` + "\n"),
		"csv":   []byte("t,n\n2024-01-01T00:00:00Z,1\n2024-01-01T00:00:01Z,x\n2024-01-01T00:00:02Z,3\n"),
	}
	for format, data := range plain {
		want, err := Decode(format, "f", data, DecodeOptions{Schema: schema, EventTime: "t"})
		if err != nil {
			t.Fatal(err)
		}
		defer want.Release()
		if want.Rows != 2 || len(want.Rejects) != 1 {
			t.Fatalf("%s plain: %d rows, %d rejects", format, want.Rows, len(want.Rejects))
		}
		for _, c := range []struct {
			name string
			data []byte
		}{
			{"f." + format + ".gz", gzipped(t, data)},
			{"f." + format + ".zst", zstded(t, data)},
			{"f." + format, gzipped(t, data)}, // no telling name: the magic bytes decide
			{"f.gz", gzipped(t, data)},
		} {
			got, err := Decode(format, c.name, c.data, DecodeOptions{Schema: schema, EventTime: "t"})
			if err != nil {
				t.Fatalf("%s %s: %v", format, c.name, err)
			}
			if got.Rows != want.Rows || len(got.Rejects) != 1 || got.Rejects[0].Line != want.Rejects[0].Line ||
				got.Rejects[0].Reason != want.Rejects[0].Reason || got.Rejects[0].File != c.name {
				t.Fatalf("%s %s: %d rows, rejects %+v; want %d rows, %+v", format, c.name, got.Rows, got.Rejects, want.Rows, want.Rejects)
			}
			if a, b := batchesText(t, got), batchesText(t, want); a != b {
				t.Fatalf("%s %s: rows differ:\n%s\nwant\n%s", format, c.name, a, b)
			}
			got.Release()
		}
	}
	// A file that says it is compressed but is not, and a truncated one:
	// whole-file errors naming the file.
	if _, err := Decode("jsonl", "x.jsonl.gz", plain["jsonl"], DecodeOptions{Schema: schema}); err == nil || !strings.Contains(err.Error(), "x.jsonl.gz: named like a gzip file") {
		t.Fatalf("mislabelled: %v", err)
	}
	gz := gzipped(t, plain["csv"])
	if _, err := Decode("csv", "y.csv.gz", gz[:len(gz)-10], DecodeOptions{Schema: schema}); err == nil || !strings.Contains(err.Error(), "y.csv.gz: gzip") {
		t.Fatalf("truncated: %v", err)
	}
	zs := zstded(t, plain["csv"])
	if _, err := Decode("csv", "z.csv.zst", zs[:len(zs)-3], DecodeOptions{Schema: schema}); err == nil || !strings.Contains(err.Error(), "z.csv.zst: zstd") {
		t.Fatalf("truncated zstd: %v", err)
	}
}

func batchesText(t *testing.T, d *Decoded) string {
	t.Helper()
	var b strings.Builder
	for _, rec := range d.Batches {
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := range rec.Columns() {
				b.WriteString(rec.Column(c).ValueStr(i) + " ")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
