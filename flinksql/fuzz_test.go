package flinksql

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/spec"
)

// FuzzParse: the front end never panics, and a SQL file it refuses gets an
// error that names a position (or says what is wrong with the whole file).
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../testdata/pipelines/clicks.sql"); err == nil {
		f.Add(string(data))
	}
	files, _ := filepath.Glob("../bench/nexmark/queries/*.sql")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(strings.ReplaceAll(strings.ReplaceAll(string(data), "${FORMAT}", "parquet"), "${", "1"))
		}
	}
	for _, s := range []string{
		sink("a BIGINT") + "INSERT INTO out SELECT auction FROM bid WHERE price > 1;",
		sink("a BIGINT") + "INSERT INTO out SELECT COUNT(*) FILTER (WHERE price > 1) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;",
		sink("a BIGINT") + "INSERT INTO out SELECT P.id FROM person P JOIN bid B ON P.id = B.bidder AND B.dateTime BETWEEN P.dateTime - INTERVAL '1' SECOND AND P.dateTime;",
		sink("a BIGINT") + "INSERT INTO out SELECT a FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price) AS rn FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' SECOND))) WHERE rn <= 2;",
		"SET 'pipeline.name' = 'x'; /* unterminated",
		"CREATE TABLE t (a TIMESTAMP(3), WATERMARK FOR a AS a - INTERVAL '1' DAY) WITH ('connector'='filesystem');",
	} {
		f.Add(ddl + s)
	}
	f.Add(fmt.Sprintf(kafkaWindowSQL, "clicks;views", "k1:9092,k2:9092", ",\n  'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '1000'", "/tmp/out", "/tmp/st"))
	f.Fuzz(func(t *testing.T, src string) {
		_, err := Parse("f.sql", []byte(src), "/nonexistent")
		if err == nil {
			return
		}
		if err.Error() == "" {
			t.Fatal("empty error")
		}
		var e *Error
		if errors.As(err, &e) {
			if e.Pos.Line == 0 && e.Msg != "no statements" && !strings.Contains(e.Msg, "larger than") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		var se spec.Errors
		if !errors.As(err, &se) {
			t.Fatalf("error of type %T: %v", err, err)
		}
	})
}
