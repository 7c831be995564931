package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestSinkPartitionBy: a files sink takes a list of columns (or one), an
// iceberg sink one of its transforms; anything else is an error naming
// the field.
func TestSinkPartitionBy(t *testing.T) {
	const sink = "sink: {type: files, url: ../../out/clicks, format: parquet}"
	for _, tc := range []struct {
		sink string
		cols []string
		pb   string
		err  string
	}{
		{"sink: {type: files, url: ../../out/clicks, format: parquet, partition_by: [dt, hm]}", []string{"dt", "hm"}, "", ""},
		{"sink: {type: files, url: ../../out/clicks, format: jsonl, partition_by: dt}", []string{"dt"}, "", ""},
		{"sink: {type: files, url: ../../out/clicks, format: jsonl, partition_by: [dt, dt]}", nil, "", `sink.partition_by[1]: column "dt" listed twice`},
		{"sink: {type: files, url: ../../out/clicks, format: jsonl, partition_by: [\"\"]}", nil, "", "sink.partition_by[0]: empty column name"},
		{"sink: {type: files, url: ../../out/clicks, format: jsonl, partition_by: {a: 1}}", nil, "", "sink.partition_by"},
		{"sink: {type: iceberg, url: /t, partition_by: \"identity(user_id)\"}", nil, "identity(user_id)", ""},
		{"sink: {type: iceberg, url: /t, partition_by: \"hour(ts)\"}", nil, "hour(ts)", ""},
		{"sink: {type: iceberg, url: /t, partition_by: \"month(ts)\"}", nil, "month(ts)", ""},
		{"sink: {type: iceberg, url: /t, partition_by: \"year(ts)\"}", nil, "year(ts)", ""},
		{"sink: {type: iceberg, url: /t, partition_by: \"minute(ts)\"}", nil, "", `sink.partition_by: invalid value "minute(ts)"`},
		{"sink: {type: iceberg, url: /t, partition_by: \"identity()\"}", nil, "", `sink.partition_by: invalid value "identity()"`},
		{"sink: {type: iceberg, url: /t, partition_by: [a, b]}", nil, "", "sink.partition_by"},
	} {
		p, err := Parse("p.yaml", []byte(strings.Replace(base, sink, tc.sink, 1)), "/srv/specs")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.sink, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.sink, err)
			continue
		}
		if !reflect.DeepEqual(p.Sink.PartitionColumns, tc.cols) || p.Sink.PartitionBy != tc.pb {
			t.Errorf("%s: columns %v, partition_by %q", tc.sink, p.Sink.PartitionColumns, p.Sink.PartitionBy)
		}
	}
}
