package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/kafka/kafkatest"
	"github.com/floe-dev/floe/spec"
)

// kafkaGraph joins a kafka source of bids with a files source of auctions
// (an interval join wide enough that every bid of a known auction
// matches) and projects the pairs; parallelism is {{par}}.
const kafkaGraph = `
name: kgraph
sources:
  bids:
    type: kafka
    brokers: [{{brokers}}]
    topic: {{topic}}
    format: jsonl
    schema: {bts: timestamp, auction: int64, bidder: string, price: int64}
    event_time: bts
    max_records_per_epoch: 25
    rejected_url: "{{rejected}}"
  auctions:
    type: files
    url: "{{auctions}}"
    format: jsonl
    schema: {id: int64, category: string, ats: timestamp}
    event_time: ats
    rejected_url: "{{rejected}}"
stages:
  - name: j
    inputs: [bids, auctions]
    join: {left_on: [auction], right_on: [id], interval: {lower: 2h, upper: 2h}}
  - {name: pairs, input: j, project: {auction: auction, bidder: bidder, price: price, category: category}}
sinks:
  out: {input: pairs, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: {{par}}, max_parallelism: 64}
`

// graphBid is bid i of partition p: at t0 + i s, of auction (3i+p) % 12
// (auctions 0-9 exist: 10 and 11 never match), by b<p>, price p*1000+i.
func graphBid(p int32, i int, t0 time.Time) kafkatest.Msg {
	ts := t0.Add(time.Duration(i) * time.Second)
	return kafkatest.Msg{Partition: p, Time: ts,
		Value: fmt.Sprintf(`{"bts":"%s","auction":%d,"bidder":"b%d","price":%d}`, ts.Format(time.RFC3339), (3*i+int(p))%12, p, int(p)*1000+i)}
}

// wantGraphPairs is what the join of n bids per partition (of parts) with
// the auctions below upto yields, as the JSON-lines sink writes it.
func wantGraphPairs(parts int32, n, upto int) []string {
	var out []string
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			if a := (3*i + int(p)) % 12; a < upto {
				out = append(out, fmt.Sprintf(`{"auction":%d,"bidder":"b%d","price":%d,"category":"c%d"}`, a, p, int(p)*1000+i, a%4))
			}
		}
	}
	slices.Sort(out)
	return out
}

// graphFixture is a kafka topic of bids with parts partitions and a
// directory of auction files, and kafkaGraph over them.
type graphFixture struct {
	t        *testing.T
	b        *kafkatest.Broker
	topic    string
	parts    int32
	t0       time.Time
	dir      string
	auctions string
}

func newGraphFixture(t *testing.T, name string, parts int32) *graphFixture {
	b := kafkatest.Start(t)
	f := &graphFixture{t: t, b: b, topic: b.Topic(name, parts), parts: parts, t0: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), dir: t.TempDir()}
	f.auctions = filepath.Join(f.dir, "auctions")
	if err := os.MkdirAll(f.auctions, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// landAuctions writes auctions from..to-1 (category c<id%4>) as file name.
func (f *graphFixture) landAuctions(name string, from, to int) {
	var sb strings.Builder
	for a := from; a < to; a++ {
		fmt.Fprintf(&sb, `{"id":%d,"category":"c%d","ats":"%s"}`+"\n", a, a%4, f.t0.Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(f.auctions, name), []byte(sb.String()), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// produce produces bids from..to-1 of every partition (graphBid).
func (f *graphFixture) produce(from, to int) {
	var ms []kafkatest.Msg
	for p := int32(0); p < f.parts; p++ {
		for i := from; i < to; i++ {
			ms = append(ms, graphBid(p, i, f.t0))
		}
	}
	f.b.Produce(f.topic, ms...)
}

// pipeline parses kafkaGraph at parallelism par, edit applied to its text.
func (f *graphFixture) pipeline(par int, edit func(string) string) *spec.Pipeline {
	r := strings.NewReplacer("{{brokers}}", strings.Join(f.b.Brokers(), ", "), "{{topic}}", f.topic,
		"{{auctions}}", fileURL(f.auctions), "{{state}}", fileURL(filepath.Join(f.dir, "state")),
		"{{sink}}", fileURL(filepath.Join(f.dir, "out")), "{{rejected}}", fileURL(filepath.Join(f.dir, "rejected")),
		"{{par}}", fmt.Sprint(par))
	y := kafkaGraph
	if edit != nil {
		y = edit(y)
	}
	p, err := spec.Parse("kgraph.yaml", []byte(r.Replace(y)), f.dir)
	if err != nil {
		f.t.Fatalf("spec: %v", err)
	}
	return p
}

// TestKafkaGraphJoin: a kafka source in the graph form, joined with a
// files source. Every bid of a known auction is joined once across
// epochs of at most max_records_per_epoch, a second run at another
// parallelism (a rescale) reads only the new records and files, a bad
// record is rejected naming its source, partition and offset, each
// partition is its own watermark input under the source's name, the
// manifest's offsets name their source (pinned by a golden file), and
// status shows the lag per partition of the source.
func TestKafkaGraphJoin(t *testing.T) {
	f := newGraphFixture(t, "bids", 3)
	b, topic, t0 := f.b, f.topic, f.t0
	landAuctions, produce := f.landAuctions, f.produce
	pipeline := func(par int) *spec.Pipeline { return f.pipeline(par, nil) }

	landAuctions("a1.jsonl", 0, 6)
	produce(0, 30)
	// a record the source cannot decode: partition 1, offset 30
	b.Produce(topic, kafkatest.Msg{Partition: 1, Time: t0, Value: `{"bts":"2026-03-01T12:00:30Z","auction":"many"}`})
	p := pipeline(2)
	res := run(t, p, engine.Options{})
	if res.Epochs < 4 { // 91 records, at most 25 an epoch
		t.Fatalf("epochs = %d, want at least 4", res.Epochs)
	}
	// Auctions 6-9 are not there yet: their bids wait in the join's state.
	if got, want := sinkRows(t, p, "out"), wantGraphPairs(3, 30, 6); !slices.Equal(got, want) {
		t.Fatalf("first run: %d rows, want %d:\n%s", len(got), len(want), strings.Join(diffRows(got, want), "\n"))
	}
	m := headManifest(t, p)
	if got, want := offsetsOf(m), fmt.Sprintf("%[1]s/0=30 %[1]s/1=31 %[1]s/2=30", topic); got != want {
		t.Fatalf("offsets = %s, want %s", got, want)
	}
	for _, kp := range m.Source.Kafka.Partitions {
		if kp.Source != "bids" {
			t.Fatalf("partition %+v does not name its source", kp)
		}
	}
	checkKafkaGolden(t, b, m, "testdata/kafka/offsets-graph.json")
	if m.Source.Count != 1 || len(m.Source.Inline) != 1 || m.Source.Inline[0] != "auctions/a1.jsonl" {
		t.Fatalf("processed files %v (count %d): want the auctions file only", m.Source.Inline, m.Source.Count)
	}
	var inputs []string
	for name := range m.Source.Inputs {
		inputs = append(inputs, name)
	}
	slices.Sort(inputs)
	if want := []string{"auctions", "bids/" + topic + "/0", "bids/" + topic + "/1", "bids/" + topic + "/2"}; !slices.Equal(inputs, want) {
		t.Fatalf("watermark inputs %v, want %v", inputs, want)
	}
	if rj, want := readRejected(t, p.Sources[0].Source.RejectedURL), []string{"bids/" + topic + "/1@30"}; !slices.Equal(rj, want) {
		t.Fatalf("rejected %v, want %v", rj, want)
	}

	// More bids and the other auctions; status shows the bids' lag.
	produce(30, 50)
	landAuctions("a2.jsonl", 6, 10)
	st, err := engine.ReadStatus(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if st.KafkaLag == nil || *st.KafkaLag != 60 || len(st.KafkaPartitions) != 3 {
		t.Fatalf("status lag = %v %+v, want 60 over 3 partitions", st.KafkaLag, st.KafkaPartitions)
	}
	var sb strings.Builder
	st.Print(&sb)
	if !strings.Contains(sb.String(), "bids:"+topic+"/2") {
		t.Fatalf("status does not show the partitions of source bids:\n%s", sb.String())
	}
	// The second run rescales to 3 subtasks.
	p = pipeline(3)
	res = run(t, p, engine.Options{})
	if res.Rows != 60+4 {
		t.Fatalf("second run read %d rows, want 64 (60 bids, 4 auctions)", res.Rows)
	}
	if got, want := sinkRows(t, p, "out"), wantGraphPairs(3, 50, 10); !slices.Equal(got, want) {
		t.Fatalf("after the second run: %d rows, want %d:\n%s", len(got), len(want), strings.Join(diffRows(got, want), "\n"))
	}
	if got, want := offsetsOf(headManifest(t, p)), fmt.Sprintf("%[1]s/0=50 %[1]s/1=51 %[1]s/2=50", topic); got != want {
		t.Fatalf("offsets = %s, want %s", got, want)
	}
	if res := run(t, p, engine.Options{}); res.Epochs != 0 {
		t.Fatalf("a run with nothing new committed %d epochs", res.Epochs)
	}
	// The kafka source renamed: its offsets are not the new name's, and
	// the run says so (the renamed source starts at its start_from).
	renamed := f.pipeline(3, func(y string) string {
		return strings.ReplaceAll(strings.ReplaceAll(y, "  bids:\n", "  bids2:\n"), "inputs: [bids, auctions]", "inputs: [bids2, auctions]")
	})
	var logs strings.Builder
	run(t, renamed, engine.Options{UntilEpoch: headManifest(t, p).Epoch, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "name a source the pipeline no longer reads") || !strings.Contains(logs.String(), "source=bids") {
		t.Fatalf("no warning about the offsets of source bids:\n%s", logs.String())
	}
}

// diffRows lists the rows only in got ("+") or only in want ("-").
func diffRows(got, want []string) []string {
	n := map[string]int{}
	for _, r := range got {
		n[r]++
	}
	for _, r := range want {
		n[r]--
	}
	var out []string
	for r, c := range n {
		for ; c > 0; c-- {
			out = append(out, "+ "+r)
		}
		for ; c < 0; c++ {
			out = append(out, "- "+r)
		}
	}
	slices.Sort(out)
	return out
}

// TestKafkaGraphStartLatest: start_from: latest on a graph's kafka source
// skips the records there at the first run (their offsets committed) and
// reads those produced after; the files source, starting earliest, is
// read whole.
func TestKafkaGraphStartLatest(t *testing.T) {
	f := newGraphFixture(t, "latest", 2)
	f.landAuctions("a.jsonl", 0, 10)
	f.produce(0, 20)
	p := f.pipeline(2, func(y string) string {
		return strings.Replace(y, "max_records_per_epoch: 25", "max_records_per_epoch: 25\n    start_from: latest", 1)
	})
	topic, produce := f.topic, f.produce
	run(t, p, engine.Options{})
	if got := sinkRows(t, p, "out"); len(got) != 0 {
		t.Fatalf("the first run joined %d bids produced before it: %v", len(got), got[:min(3, len(got))])
	}
	if got, want := offsetsOf(headManifest(t, p)), fmt.Sprintf("%[1]s/0=20 %[1]s/1=20", topic); got != want {
		t.Fatalf("offsets after the first run = %s, want %s", got, want)
	}
	produce(20, 35)
	run(t, p, engine.Options{})
	var want []string
	all, first := wantGraphPairs(2, 35, 10), wantGraphPairs(2, 20, 10)
	for _, row := range all {
		if !slices.Contains(first, row) {
			want = append(want, row)
		}
	}
	if got := sinkRows(t, p, "out"); !slices.Equal(got, want) {
		t.Fatalf("second run: %d rows, want %d (the bids after the start):\n%s", len(got), len(want), strings.Join(diffRows(got, want), "\n"))
	}
}
