package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/kafka/kafkatest"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// kafkaPipeline parses a spec with {{brokers}}, {{topic}}, {{state}},
// {{sink}} replaced.
func kafkaPipeline(t testing.TB, b *kafkatest.Broker, topic, tmpl string) (*spec.Pipeline, string) {
	t.Helper()
	d := t.TempDir()
	sink := fileURL(filepath.Join(d, "out"))
	r := strings.NewReplacer("{{brokers}}", strings.Join(b.Brokers(), ", "), "{{topic}}", topic,
		"{{state}}", fileURL(filepath.Join(d, "state")), "{{sink}}", sink, "{{rejected}}", fileURL(filepath.Join(d, "rejected")))
	p, err := spec.Parse("kafka.yaml", []byte(r.Replace(tmpl)), d)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return p, d
}

// headManifest reads the committed head manifest of p.
func headManifest(t testing.TB, p *spec.Pipeline) *manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	u, err := engine.PipelineStateURL(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data, _, err := st.Get(ctx, manifest.LatestPath)
	if err != nil {
		t.Fatal(err)
	}
	l, err := manifest.DecodeLatest(manifest.LatestPath, data)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err = st.Get(ctx, l.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.DecodeManifest(l.Manifest, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func offsetsOf(m *manifest.Manifest) string {
	if m.Source.Kafka == nil {
		return "none"
	}
	var parts []string
	for _, p := range m.Source.Kafka.Partitions {
		parts = append(parts, fmt.Sprintf("%s/%d=%d", p.Topic, p.Partition, p.Next))
	}
	return strings.Join(parts, " ")
}

// produceClicks produces n records per partition: user u<i%3>, ts t0+i s.
func produceClicks(b *kafkatest.Broker, topic string, parts int32, from, n int, t0 time.Time) {
	var ms []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := from; i < from+n; i++ {
			ts := t0.Add(time.Duration(i) * time.Second)
			ms = append(ms, kafkatest.Msg{Partition: p, Key: fmt.Sprintf("u%d", i%3), Time: ts,
				Value: fmt.Sprintf(`{"ts":"%s","user":"u%d","bytes":%d}`, ts.Format(time.RFC3339), i%3, int(p)*1000+i)})
		}
	}
	b.Produce(topic, ms...)
}

const kafkaStateless = `
name: kclicks
source:
  type: kafka
  brokers: [{{brokers}}]
  topic: {{topic}}
  format: jsonl
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  max_records_per_epoch: 20
  columns: {partition: kp, offset: ko}
operators:
  - filter: "bytes >= 0"
sink: {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}"}
`

// wantKafkaRows are the rows produceClicks made, as committedRows prints
// them for kafkaStateless.
func wantKafkaRows(parts int32, n int, t0 time.Time) []string {
	var out []string
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			ts := t0.Add(time.Duration(i) * time.Second)
			out = append(out, fmt.Sprintf("ts=%s,user=u%d,bytes=%d,kp=%d,ko=%d", ts.Format(time.RFC3339), i%3, int(p)*1000+i, p, i))
		}
	}
	slices.Sort(out)
	return out
}

// TestKafkaSourceEpochs: a kafka source reads every record once, in
// epochs of at most max_records_per_epoch, records the offsets per
// partition in the manifest, and a second run reads only what is new.
func TestKafkaSourceEpochs(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("clicks", 3)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	produceClicks(b, topic, 3, 0, 30, t0)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	res := run(t, p, engine.Options{})
	if res.Epochs != 5 { // 90 records, 20 an epoch
		t.Fatalf("epochs = %d, want 5", res.Epochs)
	}
	if got, want := committedRows(t, p), wantKafkaRows(3, 30, t0); !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m := headManifest(t, p)
	if got := offsetsOf(m); got != fmt.Sprintf("%[1]s/0=30 %[1]s/1=30 %[1]s/2=30", topic) {
		t.Fatalf("offsets = %s", got)
	}
	if m.Source.Count != 0 || len(m.Source.Inline) != 0 || len(m.Source.Segments) != 0 {
		t.Fatalf("a kafka source records a file set: %+v", m.Source)
	}
	if len(m.Source.Inputs) != 3 {
		t.Fatalf("watermark inputs = %v, want one per partition", m.Source.Inputs)
	}
	// Nothing new: nothing committed.
	if res := run(t, p, engine.Options{}); res.Epochs != 0 {
		t.Fatalf("a run with nothing new committed %d epochs", res.Epochs)
	}
	produceClicks(b, topic, 3, 30, 10, t0)
	res = run(t, p, engine.Options{})
	if res.Epochs != 2 || res.Rows != 30 {
		t.Fatalf("second run: %d epochs, %d rows; want 2, 30", res.Epochs, res.Rows)
	}
	if got, want := committedRows(t, p), wantKafkaRows(3, 40, t0); !slices.Equal(got, want) {
		t.Fatalf("rows after the second run: %d, want %d", len(got), len(want))
	}
}
