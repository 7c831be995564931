package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/kafka/kafkatest"
)

// writeKafkaGraphSpec writes the graph kill test's pipeline: the kafka
// clicks of kafkaClick, filtered, joined with a files source of users
// (each click with the profile of its user, an interval join), and
// counted per region and minute.
func writeKafkaGraphSpec(t testing.TB, dir, name string, brokers []string, topic, users, state, sink string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
sources:
  clicks:
    type: kafka
    brokers: [%s]
    topic: %s
    format: jsonl
    schema: {ts: timestamp, user: string, bytes: int64}
    event_time: ts
    max_records_per_epoch: 150
  users:
    type: files
    url: %q
    format: jsonl
    schema: {uid: string, region: string, uts: timestamp}
    event_time: uts
    watermark: {idle_timeout: 1s}
stages:
  - {name: valid, input: clicks, filter: "bytes > 0"}
  - name: profiled
    inputs: [valid, users]
    join: {left_on: [user], right_on: [uid], interval: {lower: 48h, upper: 0s}}
  - name: per-region
    input: profiled
    window: {key: [region], tumbling: 1m, aggregates: {clicks: "count()", total: "sum(bytes)"}}
sinks:
  out: {input: per-region, type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`, name, strings.Join(brokers, ", "), topic, users, sink, state)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantKafkaGraphWindows is what the graph kill test's window must emit
// for n clicks per partition: users u0-u5 have a profile (region
// r<k%3>), u6 none (its clicks match nothing).
func wantKafkaGraphWindows(parts int32, n int, t0 time.Time) []string {
	type key struct {
		region string
		start  time.Time
	}
	type agg struct{ clicks, total int64 }
	m := map[key]*agg{}
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			u := (i + int(p)) % 7
			bytes := int64((i % 50) + int(p))
			if bytes <= 0 || u == 6 {
				continue
			}
			ts := t0.Add(time.Duration(i) * time.Second)
			k := key{fmt.Sprintf("r%d", u%3), ts.Truncate(time.Minute)}
			if m[k] == nil {
				m[k] = &agg{}
			}
			m[k].clicks++
			m[k].total += bytes
		}
	}
	var out []string
	f := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
	for k, a := range m {
		out = append(out, fmt.Sprintf("region=%s window_start=%s window_end=%s clicks=%d total=%d",
			k.region, f(k.start), f(k.start.Add(time.Minute)), a.clicks, a.total))
	}
	slices.Sort(out)
	return out
}

// TestKillGraphKafka runs a graph pipeline that joins a kafka source with
// a files source while a producer writes to the topic's 3 partitions: a
// first round by one process, then rounds of W = 3 worker processes, each
// SIGKILLed at random moments and restarted, then W = 2 with --drain (each
// change of W a rescale). The committed windows must equal, row for row,
// those computed here from the records and those of one uninterrupted
// process; the head's offsets must be the partitions' ends, every sink
// file committed, and `floe verify` clean.
func TestKillGraphKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process kill test")
	}
	seed := killSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x67726b))
	b := kafkatest.Start(t)
	const parts, perPart = 3, 3000
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	ctx := context.Background()
	topic := b.Topic("gclicks", parts)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	users := filepath.Join(root, "users")
	if err := os.MkdirAll(users, 0o755); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for u := 0; u < 6; u++ {
		fmt.Fprintf(&sb, `{"uid":"u%d","region":"r%d","uts":"%s"}`+"\n", u, u%3, t0.Add(-time.Hour).Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(users, "users.jsonl"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeKafkaGraphSpec(t, root, "gkafka", b.Brokers(), topic, fu("users"), fu("w/state"), fu("w/out"))
	refSpec := writeKafkaGraphSpec(t, root, "gkref", b.Brokers(), topic, fu("users"), fu("ref/state"), fu("ref/out"))

	var first []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := 0; i < perPart/4; i++ {
			first = append(first, kafkaClick(p, i, t0))
		}
	}
	b.Produce(topic, first...)
	prod := startKafkaProducer(b, topic, parts, perPart/4, perPart, 30, 100*time.Millisecond, t0)
	// Round 1: one process, killed twice.
	kills := runWorkerRound(t, rng, spec, 1, 2, "--parallelism", "4", "--run-id", "round-1")
	rounds := 1
	for rounds < 3 || prod.producing() {
		rounds++
		if rounds > 30 {
			t.Fatalf("the producer still writes after %d rounds", rounds)
		}
		kills += runWorkerRound(t, rng, spec, 3, 3, "--parallelism", "4", "--run-id", fmt.Sprintf("round-%d", rounds))
	}
	if err := prod.wait(); err != nil {
		t.Fatal(err)
	}
	kills += runWorkerRound(t, rng, spec, 2, 1, "--parallelism", "4", "--drain", "--run-id", "rescale")
	t.Logf("%d kills landed over %d rounds", kills, rounds+1)
	if kills == 0 {
		t.Errorf("no kill landed on a running worker (seed %d)", seed)
	}
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")

	want := wantKafkaGraphWindows(parts, perPart, t0)
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	ref, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	sameRows(t, "the killed workers", got, want)
	sameRows(t, "the single process", ref, want)
	checkKafkaRunEnd(t, ctx, spec, fu("w/state"), "gkafka", fu("w/out"), "clicks", parts, perPart)
	// status names the source of each partition
	if st := runFloe(t, "status", spec).stdout; !strings.Contains(st, "clicks:"+topic+"/2") {
		t.Errorf("floe status does not show the partitions of source clicks:\n%s", st)
	}
}
