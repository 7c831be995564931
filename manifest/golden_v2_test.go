package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// v2 documents: the v1 literals with format 2, the generation's identity,
// a sink marker; each carries its own checksum.
func goldenLatestV2() *Latest {
	l := goldenLatestV1()
	l.FormatVersion = 2
	return l
}

func goldenGenerationV2() *Generation {
	g := goldenGenerationV1()
	g.FormatVersion = 2
	g.PlanHash = "v2-00112233445566778899aabbccddeeff"
	g.Identity = &Identity{ID: "9b2c7f0e-3d4a-4c5b-8e6f-7a8b9c0d1e2f", State: "s3://bucket/state/clicks-per-user",
		Sink: "s3://bucket/out/clicks", SinkFormat: "parquet", Late: "s3://bucket/late"}
	return g
}

// goldenGenerationSinksV2 is a graph pipeline's generation with two
// further sinks (Identity.Sinks).
func goldenGenerationSinksV2() *Generation {
	g := goldenGenerationV2()
	g.PlanHash = "g2-00112233445566778899aabbccddeeff"
	g.Identity.Sinks = []SinkIdentity{{Name: "hot", URL: "s3://bucket/out/hot", Format: "jsonl"},
		{Name: "top", URL: "file:///data/out/top", Format: "parquet"}}
	return g
}

// goldenGenerationWorkersV2 is the generation of a pipeline run by two
// worker processes (Generation.Workers).
func goldenGenerationWorkersV2() *Generation {
	g := goldenGenerationV2()
	g.Workers = 2 // at parallelism 2: each owns one subtask
	return g
}

func goldenManifestV2() *Manifest {
	m := goldenManifestV1()
	m.FormatVersion = 2
	m.OutputLog = []FileRef{{Path: "gen=000003/epoch=0000000041/0f8fad5b-d9cb-469f-a165-70867728950e/source/outputs-7.txt",
		Size: 70, Checksum: "sha256:" + string(bytes.Repeat([]byte{'f'}, 64)), Rows: 7}}
	return m
}

// goldenManifestListingV2 is a manifest of a source with order: lexical
// (SourceState.ListedAfter, FullListAt).
func goldenManifestListingV2() *Manifest {
	m := goldenManifestV2()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	m.Source.ListedAfter, m.Source.FullListAt = "day=2026-12-01/part-0099.parquet", &at
	return m
}

// goldenManifestSegRangesV2 is a manifest of a source with order: lexical
// whose processed-file and size segments record their key range
// (FileRef.First, Last).
func goldenManifestSegRangesV2() *Manifest {
	m := goldenManifestListingV2()
	m.Source.Inline = nil
	sum := "sha256:" + string(bytes.Repeat([]byte{'e'}, 64))
	m.Source.Segments = []FileRef{
		{Path: "gen=000003/epoch=0000000040/7c9e6679-7425-40de-944b-e07fc1f90ae7/source/seen-600.txt", Size: 19800, Checksum: sum, Rows: 600,
			First: "day=2026-11-30/part-0000.parquet", Last: "day=2026-12-01/part-0089.parquet"},
		{Path: "gen=000003/epoch=0000000041/0f8fad5b-d9cb-469f-a165-70867728950e/source/seen-610.txt", Size: 330, Checksum: sum, Rows: 10,
			First: "day=2026-12-01/part-0090.parquet", Last: "day=2026-12-01/part-0099.parquet"},
	}
	m.Source.SizeSegments = []FileRef{
		{Path: "gen=000003/epoch=0000000041/0f8fad5b-d9cb-469f-a165-70867728950e/source/sizes-610.txt", Size: 24000, Checksum: sum, Rows: 610,
			First: "day=2026-11-30/part-0000.parquet\x001024", Last: "day=2026-12-01/part-0099.parquet\x00977"},
	}
	m.Source.Count = 610
	return m
}

// goldenManifestKafkaV2 is a manifest of a kafka source: offsets per
// partition, no processed-file set.
func goldenManifestKafkaV2() *Manifest {
	m := goldenManifestV2()
	m.Source.Inline, m.Source.Segments, m.Source.Count = nil, nil, 0
	m.Source.Inputs = map[string]InputState{
		"clicks/0": {MaxEventTime: 1764633600000000, LastActive: time.Date(2026, 12, 2, 0, 59, 0, 0, time.UTC)},
		"clicks/1": {MaxEventTime: 1764633590000000, LastActive: time.Date(2026, 12, 2, 0, 58, 0, 0, time.UTC)},
	}
	m.Source.Kafka = &KafkaOffsets{Version: KafkaOffsetsVersion, Skipped: 12, Partitions: []KafkaPartition{
		{Topic: "clicks", Partition: 0, Next: 1200, High: 1250},
		{Topic: "clicks", Partition: 1, Next: 981, High: 981},
		{Topic: "clicks", Partition: 2, Next: 0},
		{Topic: "views", Partition: 0, Next: 77, High: 80},
	}}
	return m
}

// goldenManifestKafkaSourcesV2 is a graph pipeline's manifest with two
// kafka sources (one reading two topics) and a file source: each
// partition names its source, and each partition of a kafka source is a
// watermark input "<source>/<topic>/<partition>".
func goldenManifestKafkaSourcesV2() *Manifest {
	m := goldenManifestV2()
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	m.Source.Inputs = map[string]InputState{
		"auctions":        {MaxEventTime: 1764633600000000, LastActive: at},
		"bids/bids/0":     {MaxEventTime: 1764633590000000, LastActive: at},
		"bids/bids/1":     {MaxEventTime: 1764633580000000, LastActive: at},
		"people/people/0": {MaxEventTime: 1764633000000000, LastActive: at},
	}
	m.Source.Kafka = &KafkaOffsets{Version: KafkaOffsetsVersion, Skipped: 3, Partitions: []KafkaPartition{
		{Source: "bids", Topic: "bids", Partition: 0, Next: 500, High: 520},
		{Source: "bids", Topic: "bids", Partition: 1, Next: 498, High: 498},
		{Source: "bids", Topic: "retractions", Partition: 0, Next: 7, High: 7},
		{Source: "people", Topic: "people", Partition: 0, Next: 40, High: 41},
	}}
	return m
}

func goldenMarkerV2() *SinkMarker {
	return &SinkMarker{FormatVersion: 2, Pipeline: "clicks-per-user", ID: "9b2c7f0e-3d4a-4c5b-8e6f-7a8b9c0d1e2f",
		State: "s3://bucket/state/clicks-per-user"}
}

type goldenDoc struct {
	file   string
	want   any
	encode func() ([]byte, error)
	decode func(string, []byte) (any, error)
}

func goldenV2Docs() []goldenDoc {
	return []goldenDoc{
		{"latest.json", goldenLatestV2(),
			func() ([]byte, error) { return EncodeLatest(goldenLatestV2()) },
			func(n string, d []byte) (any, error) { return DecodeLatest(n, d) }},
		{"generation.json", goldenGenerationV2(),
			func() ([]byte, error) { return EncodeGeneration(goldenGenerationV2()) },
			func(n string, d []byte) (any, error) { return DecodeGeneration(n, d) }},
		{"generation-sinks.json", goldenGenerationSinksV2(),
			func() ([]byte, error) { return EncodeGeneration(goldenGenerationSinksV2()) },
			func(n string, d []byte) (any, error) { return DecodeGeneration(n, d) }},
		{"generation-workers.json", goldenGenerationWorkersV2(),
			func() ([]byte, error) { return EncodeGeneration(goldenGenerationWorkersV2()) },
			func(n string, d []byte) (any, error) { return DecodeGeneration(n, d) }},
		{"manifest.json", goldenManifestV2(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestV2()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
		{"manifest-listing.json", goldenManifestListingV2(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestListingV2()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
		{"manifest-segranges.json", goldenManifestSegRangesV2(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestSegRangesV2()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
		{"manifest-kafka.json", goldenManifestKafkaV2(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestKafkaV2()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
		{"manifest-kafka-sources.json", goldenManifestKafkaSourcesV2(),
			func() ([]byte, error) { return EncodeManifest(goldenManifestKafkaSourcesV2()) },
			func(n string, d []byte) (any, error) { return DecodeManifest(n, d) }},
		{"sink_marker.json", goldenMarkerV2(),
			func() ([]byte, error) { return EncodeSinkMarker(goldenMarkerV2()) },
			func(n string, d []byte) (any, error) { return DecodeSinkMarker(n, d) }},
	}
}

// TestGoldenV2 pins format 2: the checked-in files decode to the literals
// (checksum included), and writing reproduces them byte for byte.
func TestGoldenV2(t *testing.T) {
	dir := filepath.Join("testdata", "golden", "v2")
	for _, tt := range goldenV2Docs() {
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
				t.Fatalf("a v2 golden file no longer decodes: %v", err)
			}
			enc, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Errorf("encoding changed:\n%s\nwant\n%s", enc, data)
			}
			again, err := tt.decode(path, enc)
			if err != nil || !reflect.DeepEqual(got, again) {
				t.Errorf("re-decoded %+v, %v", again, err)
			}
		})
	}
}

// TestEveryBitFlipDetected flips every bit of every v2 document, one at a
// time: each flip is refused as corrupt, or decodes to exactly the same
// document (a harmless flip). Before checksums, flips in values that stayed
// well formed (a seen file name, the emitted-through time) went unnoticed.
func TestEveryBitFlipDetected(t *testing.T) {
	for _, tt := range goldenV2Docs() {
		t.Run(tt.file, func(t *testing.T) {
			data, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			want, err := tt.decode(tt.file, data)
			if err != nil {
				t.Fatal(err)
			}
			detected, harmless := 0, 0
			buf := make([]byte, len(data))
			for i := range data {
				for bit := 0; bit < 8; bit++ {
					copy(buf, data)
					buf[i] ^= 1 << bit
					got, err := tt.decode(tt.file, buf)
					switch {
					case err != nil:
						detected++
					case reflect.DeepEqual(got, want):
						harmless++
					default:
						t.Fatalf("flip of bit %d of byte %d (%q) decoded to a different document:\n%+v", bit, i, data[i], got)
					}
				}
			}
			t.Logf("%s: %d flips, %d detected, %d harmless", tt.file, 8*len(data), detected, harmless)
		})
	}
}
