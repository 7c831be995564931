package engine_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	checkKafkaGolden(t, b, m, "testdata/kafka/offsets-epochs.json")
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
	// Status shows the lag per partition: 10 records each.
	st, err := engine.ReadStatus(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if st.KafkaLag == nil || *st.KafkaLag != 30 || len(st.KafkaPartitions) != 3 {
		t.Fatalf("status lag = %v %+v", st.KafkaLag, st.KafkaPartitions)
	}
	for _, l := range st.KafkaPartitions {
		if l.Committed != 30 || l.High != 40 || l.Lag != 10 {
			t.Fatalf("partition lag %+v, want committed 30, high 40", l)
		}
	}
	var sb strings.Builder
	st.Print(&sb)
	if !strings.Contains(sb.String(), "kafka lag") || !strings.Contains(sb.String(), topic+"/2") {
		t.Fatalf("status for people does not show the lag:\n%s", sb.String())
	}
	res = run(t, p, engine.Options{})
	if res.Epochs != 2 || res.Rows != 30 {
		t.Fatalf("second run: %d epochs, %d rows; want 2, 30", res.Epochs, res.Rows)
	}
	if got, want := committedRows(t, p), wantKafkaRows(3, 40, t0); !slices.Equal(got, want) {
		t.Fatalf("rows after the second run: %d, want %d", len(got), len(want))
	}
	// History: each epoch's offsets and the lag it left behind.
	h, err := engine.History(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 7 || h[0].KafkaLag == nil || *h[0].KafkaLag != 0 || h[len(h)-1].KafkaLag == nil || *h[len(h)-1].KafkaLag != 70 {
		t.Fatalf("history lags: newest %v, oldest %v (%d epochs)", h[0].KafkaLag, h[len(h)-1].KafkaLag, len(h))
	}
}

const kafkaWindowed = `
name: kwin
source:
  type: kafka
  brokers: [{{brokers}}]
  topic: {{topic}}
  format: jsonl
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  {{extra}}
operators:
  - window: {key: [user], tumbling: 1m, aggregates: {clicks: "count()"}}
sink: {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}"}
`

func withExtra(tmpl, extra string) string { return strings.Replace(tmpl, "{{extra}}", extra, 1) }

// TestKafkaIdlePartition: a partition without records for idle_timeout
// stops holding the watermark back; without idle_timeout it holds it.
func TestKafkaIdlePartition(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, extra string
		wantAfter   time.Time // the watermark after the second run is past this
		wantAtMost  time.Time // ... and at most this
	}{
		{"idle_timeout", "idle_timeout: 1m", t0.Add(9 * time.Minute), t0.Add(11 * time.Minute)},
		{"no_idle_timeout", "", time.Time{}, t0.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := kafkatest.Start(t)
			topic := b.Topic("idle", 3)
			produceClicks(b, topic, 2, 0, 300, t0) // partitions 0, 1: t0 .. t0+5m
			b.Produce(topic, kafkatest.Msg{Partition: 2, Value: fmt.Sprintf(`{"ts":"%s","user":"z","bytes":1}`, t0.Format(time.RFC3339))})
			p, _ := kafkaPipeline(t, b, topic, withExtra(kafkaWindowed, tc.extra))
			now := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
			run(t, p, engine.Options{Now: func() time.Time { return now }})
			if wm := time.UnixMicro(headManifest(t, p).Watermark).UTC(); wm.After(t0.Add(time.Second)) {
				t.Fatalf("first run: watermark %v, held by partition 2 at %v", wm, t0)
			}
			produceClicks(b, topic, 2, 300, 300, t0) // to t0+10m; partition 2 stays silent
			now = now.Add(time.Hour)
			run(t, p, engine.Options{Now: func() time.Time { return now }})
			m := headManifest(t, p)
			wm := time.UnixMicro(m.Watermark).UTC()
			if wm.Before(tc.wantAfter) || wm.After(tc.wantAtMost) {
				t.Fatalf("watermark after the second run = %v, want in [%v, %v]", wm, tc.wantAfter, tc.wantAtMost)
			}
			if in := m.Source.Inputs[topic+"/2"]; in.LastActive.After(now.Add(-time.Hour)) {
				t.Fatalf("partition 2 active at %v", in.LastActive)
			}
		})
	}
}

// TestKafkaPartitionAdded: partitions added to the topic between runs are
// read from their start, the others continue; every record once.
func TestKafkaPartitionAdded(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("grow", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	produceClicks(b, topic, 2, 0, 30, t0)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	run(t, p, engine.Options{})
	b.AddPartitions(topic, 2)
	// Partitions 0, 1 get 30 more, new ones 2, 3 get their first 40.
	produceClicks(b, topic, 4, 30, 10, t0)
	var ms []kafkatest.Msg
	for _, m := range wantMsgs(4, 0, 30, t0) {
		if m.Partition >= 2 {
			ms = append(ms, m)
		}
	}
	b.Produce(topic, ms...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		run(t, p, engine.Options{})
		if got := offsetsOf(headManifest(t, p)); strings.Count(got, "=") == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := wantKafkaRows(2, 40, t0)
	for _, r := range wantKafkaRows(4, 40, t0) {
		if strings.Contains(r, ",kp=2,") || strings.Contains(r, ",kp=3,") {
			// New partitions hold records 30..39 first, then 0..29.
			want = append(want, r)
		}
	}
	got := committedRows(t, p)
	if len(got) != len(want) {
		t.Fatalf("rows = %d, want %d (offsets %s)", len(got), len(want), offsetsOf(headManifest(t, p)))
	}
	seen := map[string]bool{}
	for _, r := range got {
		i := strings.Index(r, ",kp=")
		if seen[r[i:]] {
			t.Fatalf("partition/offset %s read twice", r[i:])
		}
		seen[r[i:]] = true
	}
	if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=40 %[1]s/1=40 %[1]s/2=40 %[1]s/3=40", topic) {
		t.Fatalf("offsets = %s", got)
	}
}

func wantMsgs(parts int32, from, n int, t0 time.Time) []kafkatest.Msg {
	var ms []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := from; i < from+n; i++ {
			ts := t0.Add(time.Duration(i) * time.Second)
			ms = append(ms, kafkatest.Msg{Partition: p, Time: ts,
				Value: fmt.Sprintf(`{"ts":"%s","user":"u%d","bytes":%d}`, ts.Format(time.RFC3339), i%3, int(p)*1000+i)})
		}
	}
	return ms
}

// TestKafkaStartFrom: start_from by time starts every partition at the
// broker's offset for that time (kafka_timestamp as event time); latest
// reads only what comes after the first run.
func TestKafkaStartFrom(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t.Run("time", func(t *testing.T) {
		b := kafkatest.Start(t)
		topic := b.Topic("timed", 2)
		produceClicks(b, topic, 2, 0, 60, t0)
		start := t0.Add(45 * time.Second)
		p, _ := kafkaPipeline(t, b, topic, strings.Replace(strings.Replace(kafkaStateless,
			"event_time: ts", "event_time: kafka_timestamp\n  start_from: "+start.Format(time.RFC3339), 1),
			"columns: {partition: kp, offset: ko}", "columns: {partition: kp, offset: ko, key: kk}", 1))
		run(t, p, engine.Options{})
		got := committedRows(t, p)
		if len(got) != 2*15 {
			t.Fatalf("rows from %v: %d, want 30:\n%s", start, len(got), strings.Join(got, "\n"))
		}
		for _, r := range got {
			ko := r[strings.Index(r, ",ko=")+4:]
			ko = ko[:strings.IndexByte(ko, ',')]
			off, err := strconv.Atoi(ko)
			if err != nil || off < 45 {
				t.Fatalf("row before start_from: %s", r)
			}
			if !strings.Contains(r, "kafka_timestamp=") || !strings.Contains(r, ",kk=u") {
				t.Fatalf("row without the timestamp or key column: %s", r)
			}
		}
		if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=60 %[1]s/1=60", topic) {
			t.Fatalf("offsets = %s", got)
		}
	})
	t.Run("latest", func(t *testing.T) {
		b := kafkatest.Start(t)
		topic := b.Topic("latest", 2)
		produceClicks(b, topic, 2, 0, 20, t0)
		p, _ := kafkaPipeline(t, b, topic, strings.Replace(kafkaStateless, "event_time: ts", "event_time: ts\n  start_from: latest", 1))
		res := run(t, p, engine.Options{})
		if res.Rows != 0 || len(committedRows(t, p)) != 0 {
			t.Fatalf("start_from latest read %d rows of what was there", res.Rows)
		}
		if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=20 %[1]s/1=20", topic) {
			t.Fatalf("offsets after the first run = %s, want the ends", got)
		}
		produceClicks(b, topic, 2, 20, 5, t0)
		run(t, p, engine.Options{})
		if got := committedRows(t, p); len(got) != 10 {
			t.Fatalf("rows after latest: %d, want the 10 new", len(got))
		}
	})
}

// TestKafkaMissingOffsets: records deleted before they were read fail the
// run naming partition and offsets; on_missing_offsets: skip reads the
// rest and counts the skipped offsets in the manifest.
func TestKafkaMissingOffsets(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := kafkatest.Start(t)
	topic := b.Topic("gone", 2)
	produceClicks(b, topic, 2, 0, 10, t0)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	run(t, p, engine.Options{})
	produceClicks(b, topic, 2, 10, 10, t0)
	b.DeleteRecords(topic, 1, 15) // offsets 10..14 of partition 1, never read
	_, err := engine.Run(context.Background(), p, engine.Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`topic %q partition 1: offsets 10 to 14`, topic)) {
		t.Fatalf("run over deleted offsets: %v", err)
	}
	if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=10 %[1]s/1=10", topic) {
		t.Fatalf("a failed run moved the offsets: %s", got)
	}
	skip, _ := kafkaPipeline(t, b, topic, strings.Replace(kafkaStateless, "max_records_per_epoch: 20", "on_missing_offsets: skip", 1))
	skip.State = p.State
	skip.Sink = p.Sink
	res := run(t, skip, engine.Options{})
	if res.Rows != 15 {
		t.Fatalf("rows with skip = %d, want 10 + 5", res.Rows)
	}
	m := headManifest(t, skip)
	if m.Source.Kafka.Skipped != 5 || offsetsOf(m) != fmt.Sprintf("%[1]s/0=20 %[1]s/1=20", topic) {
		t.Fatalf("skipped %d, offsets %s", m.Source.Kafka.Skipped, offsetsOf(m))
	}
}

// TestKafkaRejectedRecords: a record that does not decode goes to the
// rejected rows with its topic/partition as the file and its offset as the
// line.
func TestKafkaRejectedRecords(t *testing.T) {
	t.Run("streamed", func(t *testing.T) { testKafkaRejected(t, kafkaStateless, 1) })
	// The window reads no bytes column, so validate: used accepts the
	// record whose bytes is a string.
	t.Run("windowed", func(t *testing.T) {
		testKafkaRejected(t, strings.Replace(withExtra(kafkaWindowed, ""), "event_time: ts", "event_time: ts\n  columns: {partition: kp}", 1), 2)
	})
}

func testKafkaRejected(t *testing.T, tmpl string, firstBad int64) {
	b := kafkatest.Start(t)
	topic := b.Topic("bad", 2)
	b.Produce(topic,
		kafkatest.Msg{Partition: 0, Value: `{"ts":"2026-03-01T12:00:00Z","user":"a","bytes":1}`},
		kafkatest.Msg{Partition: 1, Value: `{"ts":"2026-03-01T12:00:01Z","user":"b","bytes":2}`},
		kafkatest.Msg{Partition: 1, Value: `{"ts":"2026-03-01T12:00:02Z","user":"b","bytes":"many"}`},
		kafkatest.Msg{Partition: 1, Value: `not json`},
		kafkatest.Msg{Partition: 1, Value: ``},
		kafkatest.Msg{Partition: 1, Value: `{"ts":"2026-03-01T12:00:05Z","user":"c","bytes":5}`},
	)
	p, _ := kafkaPipeline(t, b, topic, strings.Replace(tmpl, "event_time: ts", "event_time: ts\n  rejected_url: \"{{rejected}}\"", 1))
	res := run(t, p, engine.Options{})
	if res.Rows+res.RowsRejected != 6 || res.RowsRejected != 4-firstBad {
		t.Fatalf("rows %d rejected %d, want %d rejected of 6", res.Rows, res.RowsRejected, 4-firstBad)
	}
	rj := readRejected(t, p.Source.RejectedURL)
	var want []string // partition 1's offsets firstBad..3
	for o := firstBad; o <= 3; o++ {
		want = append(want, fmt.Sprintf("%s/1@%d", topic, o))
	}
	if !slices.Equal(rj, want) {
		t.Fatalf("rejected = %v, want %v", rj, want)
	}
}

func readRejected(t testing.TB, u string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		data, _, err := st.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r struct {
				File   string `json:"file"`
				Line   int64  `json:"line"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("rejected line %q: %v", line, err)
			}
			if r.Reason == "" {
				t.Fatalf("rejected line without a reason: %s", line)
			}
			out = append(out, fmt.Sprintf("%s@%d", r.File, r.Line))
		}
	}
	slices.Sort(out)
	return out
}

// TestKafkaBrokerRestart: the broker stops and starts again (same address,
// same log) while a --trigger worker runs and a producer writes; what the
// worker commits is every record once.
func TestKafkaBrokerRestart(t *testing.T) {
	b := kafkatest.StartRestartable(t)
	topic := b.Topic("restart", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	produceClicks(b, topic, 2, 0, 40, t0)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	stop := make(chan struct{})
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		_, err := engine.Run(ctx, p, engine.Options{Trigger: 50 * time.Millisecond, Stop: stop})
		done <- err
	}()
	waitOffsets := func(want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			m := headManifestOrNil(p)
			if m != nil && offsetsOf(m) == want {
				return
			}
			if time.Now().After(deadline) {
				got := "no head"
				if m != nil {
					got = offsetsOf(m)
				}
				t.Fatalf("offsets %s, want %s", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitOffsets(fmt.Sprintf("%[1]s/0=40 %[1]s/1=40", topic))
	b.Restart(300 * time.Millisecond)
	produceClicks(b, topic, 2, 40, 20, t0)
	waitOffsets(fmt.Sprintf("%[1]s/0=60 %[1]s/1=60", topic))
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the worker failed across the broker restart: %v", err)
	}
	if got, want := committedRows(t, p), wantKafkaRows(2, 60, t0); !slices.Equal(got, want) {
		t.Fatalf("rows after the restart: %d, want %d", len(got), len(want))
	}
}

// headManifestOrNil is headManifest for a pipeline that may not have
// committed yet.
func headManifestOrNil(p *spec.Pipeline) *manifest.Manifest {
	ctx := context.Background()
	u, err := engine.PipelineStateURL(p)
	if err != nil {
		return nil
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		return nil
	}
	defer st.Close()
	data, _, err := st.Get(ctx, manifest.LatestPath)
	if err != nil {
		return nil
	}
	l, err := manifest.DecodeLatest(manifest.LatestPath, data)
	if err != nil {
		return nil
	}
	if data, _, err = st.Get(ctx, l.Manifest); err != nil {
		return nil
	}
	m, err := manifest.DecodeManifest(l.Manifest, data)
	if err != nil {
		return nil
	}
	return m
}

// TestKafkaRollback: a rollback to an epoch re-reads from that epoch's
// offsets; the outputs of the epochs it abandoned go, every record is in
// the committed output once. Replay and reprocess refuse a kafka source.
func TestKafkaRollback(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("rollback", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	produceClicks(b, topic, 2, 0, 30, t0)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	if res := run(t, p, engine.Options{}); res.Epochs != 3 {
		t.Fatalf("epochs = %d, want 3", res.Epochs)
	}
	res := run(t, p, engine.Options{RollbackTo: 1})
	if res.Rows != 40 { // epoch 1 read 20 records; epochs 2, 3 are read again
		t.Fatalf("the rollback run read %d records, want the 40 after epoch 1", res.Rows)
	}
	produceClicks(b, topic, 2, 30, 5, t0)
	run(t, p, engine.Options{})
	if got, want := committedRows(t, p), wantKafkaRows(2, 35, t0); !slices.Equal(got, want) {
		t.Fatalf("rows after rollback and run: %d, want %d", len(got), len(want))
	}
	if _, err := engine.Replay(context.Background(), p, engine.ReplayOptions{Epoch: 2}); err == nil || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("replay of a kafka epoch: %v", err)
	}
	if _, err := engine.Run(context.Background(), p, engine.Options{ReprocessFiles: "*"}); err == nil || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("reprocess of a kafka source: %v", err)
	}
}

var updateKafkaGolden = flag.Bool("update-kafka-golden", false, "rewrite engine/testdata/kafka/*.json")

// checkKafkaGolden pins the kafka block of a committed manifest, as the
// engine writes it, against a golden file (kfake only: a real cluster's
// topics have unique names).
func checkKafkaGolden(t *testing.T, b *kafkatest.Broker, m *manifest.Manifest, file string) {
	t.Helper()
	if b.Real() {
		return
	}
	got, err := json.MarshalIndent(map[string]any{"source": map[string]any{"kafka": m.Source.Kafka}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *updateKafkaGolden {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the manifest's kafka offsets changed:\n%s\nwant (%s)\n%s", got, file, want)
	}
}

// TestKafkaOnceStopsAtStartHighWatermarks: a --once run reads up to the
// high watermarks it saw at its start, even while records keep coming
// (availableNow); the next run reads the rest.
func TestKafkaOnceStopsAtStartHighWatermarks(t *testing.T) {
	b := kafkatest.Start(t)
	topic := b.Topic("once", 2)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	produceClicks(b, topic, 2, 0, 30, t0) // 60 records, 3 epochs of 20
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	produced := 0
	res := run(t, p, engine.Options{Progress: func(engine.Progress) {
		if produced < 3 { // more records while the run goes on
			produced++
			produceClicks(b, topic, 2, 30+10*(produced-1), 10, t0)
		}
	}})
	if res.Rows != 60 {
		t.Fatalf("the --once run read %d records, want the 60 there at its start", res.Rows)
	}
	if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=30 %[1]s/1=30", topic) {
		t.Fatalf("offsets = %s, want the start's high watermarks", got)
	}
	res = run(t, p, engine.Options{})
	want := 2 * 10 * produced
	if int(res.Rows) != want {
		t.Fatalf("the next run read %d, want %d", res.Rows, want)
	}
	if got, w := committedRows(t, p), wantKafkaRows(2, 30+10*produced, t0); !slices.Equal(got, w) {
		t.Fatalf("rows: %d, want %d", len(got), len(w))
	}
}

// TestKafkaFaults runs a kafka pipeline through a broker whose listener
// resets floe's connections, loses and tears responses and delays them
// (kafkatest.StartFaulty, 10% of floe's requests), over three runs at
// parallelism 1, 2 and 3: every record is committed exactly once (the
// rows carry partition and offset), the offsets end at the partitions'
// ends, and every kind of fault was injected. A run that a fault fails
// (a connection reset on a request the client does not retry, such as
// listing start offsets) is run again, as the next cron run would: up to
// 5 tries a round, faults still on; what they commit must stay exact.
func TestKafkaFaults(t *testing.T) {
	b, faults := kafkatest.StartFaulty(t)
	topic := b.Topic("faults", 3)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p, _ := kafkaPipeline(t, b, topic, kafkaStateless)
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	n := 0
	for i, par := range []int{1, 2, 3} {
		produceClicks(b, topic, 3, n, 60, t0)
		n += 60
		faults.Set(0.1, seed+uint64(i), "floe", kafkatest.AllFaults...)
		var err error
		for try := 1; try <= 5; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			_, err = engine.Run(ctx, p, engine.Options{Parallelism: par})
			cancel()
			if err == nil {
				break
			}
			t.Logf("run %d (parallelism %d), try %d, failed under faults; running it again: %v", i+1, par, try, err)
		}
		faults.Off()
		if err != nil {
			t.Fatalf("run %d (parallelism %d) failed under faults 5 times (%s): %v", i+1, par, faults.Summary(), err)
		}
	}
	t.Log(faults.Summary())
	if got, want := committedRows(t, p), wantKafkaRows(3, n, t0); !slices.Equal(got, want) {
		missing, extra := 0, 0
		for _, r := range want {
			if !slices.Contains(got, r) {
				missing++
			}
		}
		extra = len(got) + missing - len(want)
		t.Fatalf("rows under faults: %d, want %d (%d missing, %d extra)", len(got), len(want), missing, extra)
	}
	if got := offsetsOf(headManifest(t, p)); got != fmt.Sprintf("%[1]s/0=%[2]d %[1]s/1=%[2]d %[1]s/2=%[2]d", topic, n) {
		t.Fatalf("offsets = %s, want %d each", got, n)
	}
	for _, k := range kafkatest.AllFaults {
		if faults.Counts()[k] == 0 {
			t.Errorf("no %s fault was injected (%s)", k, faults.Summary())
		}
	}
}
