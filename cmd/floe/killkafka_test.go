package main

import (
	"bytes"
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
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// writeKafkaSpec writes the kill test's kafka pipeline: a keyed tumbling
// window over the records of topic.
func writeKafkaSpec(t testing.TB, dir, name string, brokers []string, topic, state, sink string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
source:
  type: kafka
  brokers: [%s]
  topic: %s
  format: jsonl
  schema: {ts: timestamp, user: string, bytes: int64}
  event_time: ts
  max_records_per_epoch: 120
operators:
  - filter: "bytes > 0"
  - window: {key: [user], tumbling: 1m, aggregates: {clicks: "count()", total: "sum(bytes)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`, name, strings.Join(brokers, ", "), topic, sink, state)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// kafkaClick is record i of partition p: event time t0 + i s (in order in
// each partition, so no record is ever late, whatever the epochs), user
// u<(i+p)%7>, bytes (i%50)+p (0 for some: filtered).
func kafkaClick(p int32, i int, t0 time.Time) kafkatest.Msg {
	ts := t0.Add(time.Duration(i) * time.Second)
	return kafkatest.Msg{Partition: p, Time: ts,
		Value: fmt.Sprintf(`{"ts":"%s","user":"u%d","bytes":%d}`, ts.Format(time.RFC3339), (i+int(p))%7, (i%50)+int(p))}
}

// wantKafkaWindows is what the window must emit for n records per
// partition of parts, computed here from the records (an independent
// reference), printed as committedRows prints rows.
func wantKafkaWindows(parts int32, n int, t0 time.Time) []string {
	type key struct {
		user  string
		start time.Time
	}
	type agg struct{ clicks, total int64 }
	m := map[key]*agg{}
	for p := int32(0); p < parts; p++ {
		for i := 0; i < n; i++ {
			ts := t0.Add(time.Duration(i) * time.Second)
			bytes := int64((i % 50) + int(p))
			if bytes <= 0 {
				continue
			}
			k := key{fmt.Sprintf("u%d", (i+int(p))%7), ts.Truncate(time.Minute)}
			if m[k] == nil {
				m[k] = &agg{}
			}
			m[k].clicks++
			m[k].total += bytes
		}
	}
	var out []string
	for k, a := range m {
		f := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
		out = append(out, fmt.Sprintf("user=%s window_start=%s window_end=%s clicks=%d total=%d",
			k.user, f(k.start), f(k.start.Add(time.Minute)), a.clicks, a.total))
	}
	slices.Sort(out)
	return out
}

// kafkaProducer writes records from, from+step, ... up to to (exclusive)
// of every partition of a topic in the background, step records a
// partition at a time, pausing between batches.
type kafkaProducer struct {
	done chan struct{}
	err  error
}

func startKafkaProducer(b *kafkatest.Broker, topic string, parts int32, from, to, step int, pause time.Duration, t0 time.Time) *kafkaProducer {
	k := &kafkaProducer{done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for i := from; i < to; i += step {
			var ms []kafkatest.Msg
			for p := int32(0); p < parts; p++ {
				for j := i; j < min(i+step, to); j++ {
					ms = append(ms, kafkaClick(p, j, t0))
				}
			}
			if _, err := b.TryProduce(topic, ms...); err != nil {
				k.err = err
				return
			}
			time.Sleep(pause)
		}
	}()
	return k
}

// producing reports whether the producer is still writing.
func (k *kafkaProducer) producing() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// wait waits for the producer to end and returns its error.
func (k *kafkaProducer) wait() error {
	<-k.done
	return k.err
}

// headKafka reads the committed head manifest's kafka offsets.
func headKafka(t testing.TB, ctx context.Context, stateURL, name string) *manifest.KafkaOffsets {
	t.Helper()
	st, err := store.Open(ctx, strings.TrimSuffix(stateURL, "/")+"/"+name)
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
	if data, _, err = st.Get(ctx, l.Manifest); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.DecodeManifest(l.Manifest, data)
	if err != nil {
		t.Fatal(err)
	}
	return m.Source.Kafka
}

// TestKillRestartKafka SIGKILLs `floe run` of a kafka pipeline at seeded
// random moments while a producer writes to the topic, with every run at
// another parallelism (a rescale between runs: 1, 2, 3, ...), then checks
// that what the killed runs committed equals, row for row, the windows
// computed here from the records, and one uninterrupted run of the same
// pipeline; and that the manifest's offsets are the partitions' ends.
func TestKillRestartKafka(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x6b61666b))
	kills := 8
	if testing.Short() {
		kills = 4
	}
	const parts, perPart = 3, 3000
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	ctx := context.Background()
	b := kafkatest.Start(t)
	topic := b.Topic("kclicks", parts)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	killSpec := writeKafkaSpec(t, root, "kkill", b.Brokers(), topic, fu("kill/state"), fu("kill/out"))
	refSpec := writeKafkaSpec(t, root, "kref", b.Brokers(), topic, fu("ref/state"), fu("ref/out"))

	// A first part of the records, then the producer writes the rest in
	// small batches while the runs are being killed.
	var first []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := 0; i < perPart/3; i++ {
			first = append(first, kafkaClick(p, i, t0))
		}
	}
	b.Produce(topic, first...)
	prod := startKafkaProducer(b, topic, parts, perPart/3, perPart, 25, 40*time.Millisecond, t0)

	landed, attempts, commitsByKilled, killedMid := 0, 0, 0, 0
	var quick time.Duration // how long the last run that exited on its own took
	producing := prod.producing
	// Kill while the producer writes, and at least kills times.
	for landed < kills || producing() {
		attempts++
		if attempts > 20*kills {
			t.Fatalf("only %d of %d kills landed in %d attempts (seed %d)", landed, kills, attempts, seed)
		}
		par := fmt.Sprint(1 + attempts%3)
		cmd := floeCommand(t, "run", killSpec, "--parallelism", par, "--log-format", "json")
		var stdout bytes.Buffer
		stderr := &commitClock{start: time.Now()}
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// A run that has little left to read exits quickly (once the
		// producer is done, on a fast machine, in well under 150 ms): the
		// kill moment is then drawn within the last such run's duration.
		delay := time.Duration(150+rng.IntN(700)) * time.Millisecond
		if quick > 0 && quick < delay {
			delay = time.Duration(rng.Int64N(int64(quick))) + time.Millisecond
		}
		var err error
		killed := false
		startedAt := time.Now()
		select {
		case err = <-exited:
			quick = time.Since(startedAt)
		case <-time.After(delay):
			_ = cmd.Process.Kill()
			err = <-exited
			killed = wasKilled(err)
		}
		if os.Getenv("FLOE_KAFKA_KILL_DEBUG") != "" {
			t.Logf("run %d: delay %v killed %v commits %v", attempts, delay, killed, stderr.commits)
		}
		if !killed && err != nil {
			t.Fatalf("run %d (parallelism %s) failed (seed %d): %v\nstderr:\n%s", attempts, par, seed, err, tailString(stderr.buf.String(), 4000))
		}
		if killed {
			landed++
			commitsByKilled += len(stderr.commits)
			if len(stderr.commits) > 0 {
				killedMid++ // after at least one commit of the run
			}
		}
	}
	if err := prod.wait(); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(root, "metrics.prom")
	final := runFloe(t, "run", killSpec, "--drain", "--log-format", "json", "--metrics-file", metrics)
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	t.Logf("%d kills in %d runs (parallelism 1..3 in turn), %d of them after the run's first commit; killed runs committed %d epochs; final run: %s",
		landed, attempts, killedMid, commitsByKilled, strings.SplitN(final.stdout, "\n", 2)[0])

	want := wantKafkaWindows(parts, perPart, t0)
	got, _ := committedRows(t, ctx, killSpec, fu("kill/out"))
	ref, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	if missing, extra := multisetDiff(want, got); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("killed runs committed %d window rows, want %d: %d missing, %d extra; missing (first 3) %q, extra (first 3) %q",
			len(got), len(want), len(missing), len(extra), firstN(missing, 3), firstN(extra, 3))
	}
	if missing, extra := multisetDiff(want, ref); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("the uninterrupted run committed %d window rows, want %d: %d missing, %d extra; missing (first 3) %q",
			len(ref), len(want), len(missing), len(extra), firstN(missing, 3))
	}
	prom, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		if want := fmt.Sprintf(`floe_kafka_lag_records{partition="%d",pipeline="kkill",source="",topic=%q} 0`, p, topic); !strings.Contains(string(prom), want) {
			t.Errorf("metrics lack %s:\n%s", want, prom)
		}
	}
	ko := headKafka(t, ctx, fu("kill/state"), "kkill")
	if ko == nil || len(ko.Partitions) != parts {
		t.Fatalf("head offsets = %+v", ko)
	}
	for _, p := range ko.Partitions {
		if p.Next != perPart {
			t.Errorf("partition %d: committed offset %d, want %d (the end)", p.Partition, p.Next, perPart)
		}
	}
}
