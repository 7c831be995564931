package manifest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden/v1 from the literals below (only when adding a new golden file; v1 files must never change)")

// The literals below are written out in full, not built with the layout
// helpers, so that a change to the layout, a json tag or the encoding breaks
// this test instead of silently rewriting what old files mean.

func goldenLatestV1() *Latest {
	return &Latest{
		FormatVersion: 1,
		Generation:    3,
		Epoch:         41,
		Manifest:      "gen=000003/epoch=0000000041/_manifest.json",
		Attempt:       "0f8fad5b-d9cb-469f-a165-70867728950e",
	}
}

func goldenGenerationV1() *Generation {
	return &Generation{
		FormatVersion:  1,
		Pipeline:       "clicks-per-user",
		Generation:     3,
		Parent:         &Ref{Generation: 2, Epoch: 40},
		Parallelism:    2,
		MaxParallelism: 128,
		Plan: []OpPlan{
			{ID: "window-0", Kind: "window", StateSchema: "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
		},
		PlanHash:  "sha256:2222222222222222222222222222222222222222222222222222222222222222",
		Attempt:   "7c9e6679-7425-40de-944b-e07fc1f90ae7",
		CreatedAt: time.Date(2026, 11, 29, 9, 59, 0, 0, time.UTC),
	}
}

func goldenManifestV1() *Manifest {
	sum := func(c byte) string { return "sha256:" + string(bytes.Repeat([]byte{c}, 64)) }
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	return &Manifest{
		FormatVersion: 1,
		Pipeline:      "clicks-per-user",
		Generation:    3,
		Epoch:         41,
		Attempt:       "0f8fad5b-d9cb-469f-a165-70867728950e",
		Parent:        &Ref{Generation: 3, Epoch: 40},
		CreatedAt:     at,
		Watermark:     1764410000000000,
		Source: SourceState{
			Inline: []string{"events/2026/11/29/a.jsonl"},
			Segments: []FileRef{{
				Path:     "gen=000003/epoch=0000000040/7c9e6679-7425-40de-944b-e07fc1f90ae7/source/seen-000001.jsonl",
				Size:     4,
				Checksum: sum('a'),
			}},
			Count:  3,
			Inputs: map[string]InputState{"events": {MaxEventTime: 1764410005000000, LastActive: at}},
		},
		Counters: Counters{FilesIn: 3, RowsIn: 100, RowsOut: 5, RowsLate: 2, RowsRejected: 1, RowsFiltered: 3, Windows: 5},
		Operators: []OperatorState{{
			ID:             "window-0",
			EmittedThrough: 1764409940000000,
			Files: []FileRef{
				{Path: "gen=000003/epoch=0000000041/0f8fad5b-d9cb-469f-a165-70867728950e/op=window-0/s=0000.parquet",
					Size: 1024, Checksum: sum('b'), Rows: 10, Subtask: 0, KeyGroupLo: 0, KeyGroupHi: 64},
				{Path: "s3://archive/savepoints/nightly/op=window-0/s=0001.parquet",
					Size: 2048, Checksum: sum('c'), Rows: 20, Subtask: 1, KeyGroupLo: 64, KeyGroupHi: 128},
			},
		}},
		Outputs: []FileRef{{
			Path: "dt=2026-11-29/part-g000003-e0000000041-s0001-0f8fad5b.parquet", Size: 512, Checksum: sum('d'), Rows: 5, Subtask: 1,
		}},
		SideOutputs: []FileRef{{
			Path: "late/part-g000003-e0000000041-s0000-0f8fad5b.parquet", Size: 256, Checksum: sum('e'), Rows: 2, Kind: "late",
		}},
	}
}

func TestGoldenV1(t *testing.T) {
	dir := filepath.Join("testdata", "golden", "v1")
	tests := []struct {
		file   string
		want   any
		encode func() ([]byte, error)
		decode func(name string, data []byte) (any, error)
	}{
		{"latest.json", goldenLatestV1(),
			func() ([]byte, error) { return EncodeLatest(goldenLatestV1()) },
			func(n string, d []byte) (any, error) { return DecodeLatest(n, d) }},
		{"generation.json", goldenGenerationV1(),
			func() ([]byte, error) { return EncodeGeneration(goldenGenerationV1()) },
			func(n string, d []byte) (any, error) { return DecodeGeneration(n, d) }},
		{"manifest.json", goldenManifestV1(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestV1()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if *updateGolden {
				data, err := tt.encode()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.decode(path, data)
			if err != nil {
				t.Fatalf("a v1 golden file no longer decodes: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, tt.want)
			}
			// While v1 is the current format, writing must reproduce the
			// file byte for byte: the encoding is part of the format.
			enc, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Errorf("encoding changed:\n%s\nwant\n%s", enc, data)
			}
		})
	}
}
