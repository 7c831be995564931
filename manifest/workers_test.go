package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const goldenAttempt = "0f8fad5b-d9cb-469f-a165-70867728950e"

func goldenDecision() *Decision {
	return &Decision{
		FormatVersion: 2, Pipeline: "clicks-per-user", Generation: 3, Epoch: 41,
		Attempt: goldenAttempt, Parent: &Ref{Generation: 3, Epoch: 40},
		Workers: 3, Parallelism: 4, MaxParallelism: 128, Proposer: 1,
		CreatedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		Files: []DecidedFile{{Key: "2026/12/02/a.jsonl", Size: 1000, Worker: 0},
			{Key: "2026/12/02/b.jsonl", Size: 900, Worker: 1}, {Key: "2026/12/02/c.jsonl", Size: 1100, Worker: 2}},
		Inputs:    map[string]InputState{"": {MaxEventTime: 1764662400000000, LastActive: time.Date(2026, 12, 2, 7, 59, 0, 0, time.UTC)}},
		Watermark: 1764662395000000,
	}
}

func goldenWorkerPart() *WorkerPart {
	sum := "sha256:" + strings.Repeat("a", 64)
	return &WorkerPart{
		FormatVersion: 2, Pipeline: "clicks-per-user", Generation: 3, Epoch: 41, Attempt: goldenAttempt,
		Worker: 1, Workers: 3, Parallelism: 4, SubtaskLo: 1, SubtaskHi: 3, Rounds: 1,
		Inputs:   map[string]InputState{"": {MaxEventTime: 1764662401000000, LastActive: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}},
		Counters: Counters{FilesIn: 1, RowsIn: 500, RowsOut: 20, Windows: 20},
		Operators: []OperatorState{{ID: "window-1", EmittedThrough: 1764662340000000,
			Files: []FileRef{{Path: "gen=000003/epoch=0000000041/" + goldenAttempt + "/op=window-1/s=0001.parquet", Size: 10, Checksum: sum, Rows: 3, Subtask: 1, KeyGroupLo: 32, KeyGroupHi: 64},
				{Path: "gen=000003/epoch=0000000040/1b4e28ba-2fa1-11d2-883f-0016d3cca427/op=window-1/s=0002.parquet", Size: 12, Checksum: sum, Rows: 4, Subtask: 2, KeyGroupLo: 64, KeyGroupHi: 96}}}},
		Outputs:     []FileRef{{Path: "part-g000003-e0000000041-s0001-0f8fad5b.parquet", Size: 99, Checksum: sum, Rows: 20, Subtask: 1}},
		SideOutputs: []FileRef{},
	}
}

type workerDoc struct {
	file   string
	encode func() ([]byte, error)
	decode func(string, []byte) (any, error)
}

func workerDocs() []workerDoc {
	return []workerDoc{
		{"decision.json", func() ([]byte, error) { return EncodeDecision(goldenDecision()) },
			func(n string, d []byte) (any, error) { return DecodeDecision(n, d) }},
		{"decision-waiting.json", func() ([]byte, error) {
			d := goldenDecision()
			d.Waiting = []string{"auctions", "bids"}
			return EncodeDecision(d)
		}, func(n string, d []byte) (any, error) { return DecodeDecision(n, d) }},
		{"decision-commit.json", func() ([]byte, error) {
			d := goldenDecision()
			d.Files, d.Commit = []DecidedFile{}, true
			return EncodeDecision(d)
		}, func(n string, d []byte) (any, error) { return DecodeDecision(n, d) }},
		{"decision-kafka.json", func() ([]byte, error) {
			d := goldenDecision()
			d.Files = []DecidedFile{{Key: "clicks/0/1200-1320", Size: 122880, Worker: 0}, {Key: "clicks/1/800-900", Size: 102400, Worker: 1}}
			d.Inputs = map[string]InputState{"clicks/0": {MaxEventTime: 1764662400000000, LastActive: time.Date(2026, 12, 2, 7, 59, 0, 0, time.UTC)}}
			d.Kafka = &KafkaOffsets{Version: 1, Skipped: 3, Partitions: []KafkaPartition{{Topic: "clicks", Partition: 0, Next: 1320, High: 2000},
				{Topic: "clicks", Partition: 1, Next: 900, High: 900}, {Topic: "clicks", Partition: 2, Next: 0}}}
			return EncodeDecision(d)
		}, func(n string, d []byte) (any, error) { return DecodeDecision(n, d) }},
		{"decision-skipread.json", func() ([]byte, error) {
			d := goldenDecision()
			d.Parent, d.Epoch, d.SkipRead, d.Inputs, d.Watermark = nil, 1, true, nil, NoWatermark
			return EncodeDecision(d)
		}, func(n string, d []byte) (any, error) { return DecodeDecision(n, d) }},
		{"worker_part.json", func() ([]byte, error) { return EncodeWorkerPart(goldenWorkerPart()) },
			func(n string, d []byte) (any, error) { return DecodeWorkerPart(n, d) }},
		{"worker_part-kafka.json", func() ([]byte, error) {
			p := goldenWorkerPart()
			p.KafkaSkipped = 7
			return EncodeWorkerPart(p)
		}, func(n string, d []byte) (any, error) { return DecodeWorkerPart(n, d) }},
		{"idle-run.json", func() ([]byte, error) {
			return EncodeIdle(&Idle{FormatVersion: 2, Pipeline: "clicks-per-user", Generation: 3, Epoch: 41, Proposer: 1,
				CheckedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), Run: "clicks-29412600"})
		}, func(n string, d []byte) (any, error) { return DecodeIdle(n, d) }},
		{"idle.json", func() ([]byte, error) {
			return EncodeIdle(&Idle{FormatVersion: 2, Pipeline: "clicks-per-user", Generation: 3, Epoch: 41, Proposer: 0,
				CheckedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)})
		}, func(n string, d []byte) (any, error) { return DecodeIdle(n, d) }},
	}
}

// TestGoldenWorkerDocs pins the decision and part record formats like
// TestGoldenV2, and checks that every bit flip is detected or harmless.
func TestGoldenWorkerDocs(t *testing.T) {
	for _, tt := range workerDocs() {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", "v2", tt.file)
			enc, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			if *updateGolden {
				if err := os.WriteFile(path, enc, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data) {
				t.Fatalf("encoding changed:\n%s\nwant\n%s", enc, data)
			}
			want, err := tt.decode(path, data)
			if err != nil {
				t.Fatalf("golden file no longer decodes: %v", err)
			}
			buf := make([]byte, len(data))
			for i := range data {
				for bit := 0; bit < 8; bit++ {
					copy(buf, data)
					buf[i] ^= 1 << bit
					got, err := tt.decode(path, buf)
					if err == nil && !reflect.DeepEqual(got, want) {
						t.Fatalf("flip of bit %d of byte %d decoded to a different document", bit, i)
					}
				}
			}
		})
	}
}

func TestDecisionValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(d *Decision)
	}{
		{"workers", func(d *Decision) { d.Workers = 0 }},
		{"parallelism", func(d *Decision) { d.Workers = 5 }},
		{"max_parallelism", func(d *Decision) { d.MaxParallelism = 2 }},
		{"proposer", func(d *Decision) { d.Proposer = 3 }},
		{"attempt", func(d *Decision) { d.Attempt = "x" }},
		{"parent.epoch", func(d *Decision) { d.Parent.Epoch = 41 }},
		{"files[1].worker", func(d *Decision) { d.Files[1].Worker = 3 }},
		{"files[2].key", func(d *Decision) { d.Files[2].Key = d.Files[0].Key }},
		{"files[0].size", func(d *Decision) { d.Files[0].Size = -1 }},
	} {
		d := goldenDecision()
		tc.edit(d)
		_, err := EncodeDecision(d)
		var me *Error
		if !errors.As(err, &me) || me.Field != tc.field || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
}

func TestWorkerPartValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(p *WorkerPart)
	}{
		{"worker", func(p *WorkerPart) { p.Worker = 3 }},
		{"subtask_lo", func(p *WorkerPart) { p.SubtaskHi = 5 }},
		{"subtask_lo", func(p *WorkerPart) { p.SubtaskHi = p.SubtaskLo }},
		{"counters.rows_in", func(p *WorkerPart) { p.Counters.RowsIn = -1 }},
		{"operators[0].files[0].subtask", func(p *WorkerPart) { p.Operators[0].Files[0].Subtask = 0; p.SubtaskLo = 1 }},
		{"outputs[0].path", func(p *WorkerPart) { p.Outputs[0].Path = "/abs" }},
	} {
		p := goldenWorkerPart()
		tc.edit(p)
		_, err := EncodeWorkerPart(p)
		var me *Error
		if !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	// Strict: an unknown field is corrupt.
	data, _ := EncodeWorkerPart(goldenWorkerPart())
	bad := bytes.Replace(data, []byte(`"rounds"`), []byte(`"extra": 1, "rounds"`), 1)
	if _, err := DecodeWorkerPart("p", bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "extra") {
		t.Errorf("unknown field: %v", err)
	}
}

// TestWorkerKeys: the keys sort and parse as epoch files of their
// generation, epoch and attempt, so retention treats them like the
// epoch's other unreferenced files.
func TestWorkerKeys(t *testing.T) {
	for _, tc := range []struct {
		key     string
		want    string
		attempt string
	}{
		{DecisionPath(3, 41), "gen=000003/epoch=0000000041/_decision.json", ""},
		{IdlePath(3, 41), "gen=000003/epoch=0000000041/_idle.json", ""},
		{ExchangePath(3, 41, goldenAttempt, 1, 2), "gen=000003/epoch=0000000041/" + goldenAttempt + "/x/r=01/w=0002.bin", goldenAttempt},
		{PartPath(3, 41, goldenAttempt, 2), "gen=000003/epoch=0000000041/" + goldenAttempt + "/x/_part-w=0002.json", goldenAttempt},
	} {
		if tc.key != tc.want {
			t.Errorf("key %q, want %q", tc.key, tc.want)
		}
		info, ok := ParseKey(tc.key)
		if !ok || info.Kind != KeyOther || info.Generation != 3 || info.Epoch != 41 || info.Attempt != tc.attempt {
			t.Errorf("ParseKey(%q) = %+v, %v", tc.key, info, ok)
		}
	}
}
