package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/kafka/kafkatest"
)

// TestWorkersKafkaKill runs the kafka kill test's pipeline as W = 3 worker
// processes while a producer writes to the topic's 3 partitions,
// SIGKILLing random workers at random moments and restarting them, round
// after round (each round's workers exit once caught up, as a CronJob's
// would), then drains with W = 2 (a rescale): the committed windows must
// equal, row for row, those computed here from the records and those of
// one uninterrupted process; the head's offsets must be the partitions'
// ends, the sink must hold exactly the committed files and `floe verify`
// must find nothing wrong.
func TestWorkersKafkaKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process kill test")
	}
	seed := killSeed(t)
	t.Run("broker", func(t *testing.T) { workersKafkaKill(t, seed, kafkatest.Start(t), nil) })
	t.Run("broker-faults", func(t *testing.T) {
		// The workers' requests to the broker fail at 10% (resets,
		// delays, error codes); a worker a fault stops is started again,
		// as the Job would.
		b, faults := kafkatest.StartFaulty(t)
		workersKafkaKill(t, seed+1, b, func(on bool) {
			if on {
				faults.Set(0.1, seed+1, "floe", kafkatest.AllFaults...)
			} else {
				faults.Off()
			}
		})
		t.Logf("broker faults: %s", faults.Summary())
		if len(faults.Counts()) == 0 {
			t.Error("no fault was injected")
		}
	})
}

// workersKafkaKill is TestWorkersKafkaKill on broker b; setFaults (if
// any) turns the broker's faults on for the workers' rounds and off for
// the reference run and the checks.
func workersKafkaKill(t *testing.T, seed uint64, b *kafkatest.Broker, setFaults func(on bool)) {
	rng := rand.New(rand.NewPCG(seed, 0x6b776b))
	const parts, perPart = 3, 2400
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	ctx := context.Background()
	topic := b.Topic("wclicks", parts)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	spec := writeKafkaSpec(t, root, "wkafka", b.Brokers(), topic, fu("w/state"), fu("w/out"))
	refSpec := writeKafkaSpec(t, root, "wkref", b.Brokers(), topic, fu("ref/state"), fu("ref/out"))

	var first []kafkatest.Msg
	for p := int32(0); p < parts; p++ {
		for i := 0; i < perPart/4; i++ {
			first = append(first, kafkaClick(p, i, t0))
		}
	}
	b.Produce(topic, first...)
	retries := 0
	if setFaults != nil {
		setFaults(true)
		retries = 30
	}
	prod := startKafkaProducer(b, topic, parts, perPart/4, perPart, 30, 100*time.Millisecond, t0)
	producing := prod.producing
	kills, rounds := 0, 0
	for rounds < 2 || producing() {
		rounds++
		if rounds > 30 {
			t.Fatalf("the producer still writes after %d rounds", rounds)
		}
		// Each round is one run (one Job): a worker restarted after the
		// others ended it idle ends too.
		kills += runWorkerRoundRetry(t, rng, spec, 3, 3, retries, "--parallelism", "4", "--run-id", fmt.Sprintf("round-%d", rounds))
	}
	if err := prod.wait(); err != nil {
		t.Fatal(err)
	}
	// Rescale 3 -> 2 workers for the rest, and drain.
	kills += runWorkerRoundRetry(t, rng, spec, 2, 1, retries, "--parallelism", "4", "--drain", "--run-id", "rescale")
	t.Logf("%d kills landed over %d rounds of 3 workers and one of 2", kills, rounds)
	if kills == 0 {
		t.Errorf("no kill landed on a running worker (seed %d)", seed)
	}
	if setFaults != nil {
		setFaults(false)
	}
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")

	want := wantKafkaWindows(parts, perPart, t0)
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	ref, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	sameRows(t, "workers", got, want)
	sameRows(t, "the single process", ref, want)
	checkKafkaRunEnd(t, ctx, spec, fu("w/state"), "wkafka", fu("w/out"), "", parts, perPart)
}

// TestWorkersKafkaTakeOver: the epoch a worker follows may cut the
// partitions elsewhere than its own listing did (the proposer listed at
// another moment, the high watermark elsewhere): worker 1 starts first,
// takes the first epoch over with the 100 records then in the topic,
// and worker 0, started after 50 more, listed offsets 0-120 and 120-150.
// Its next proposal must start from the committed offset 100, not from
// its listing: the windows and offsets must be exact.
func TestWorkersKafkaTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	b := kafkatest.Start(t)
	topic := b.Topic("tclicks", 1)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	spec := writeKafkaSpec(t, root, "wtake", b.Brokers(), topic, fu("w/state"), fu("w/out"))
	produce := func(from, to int) {
		var ms []kafkatest.Msg
		for i := from; i < to; i++ {
			ms = append(ms, kafkaClick(0, i, t0))
		}
		b.Produce(topic, ms...)
	}
	produce(0, 100)
	w1 := startPeer(t, spec, 2, 1, "--worker-takeover", "300ms", "--drain")
	// Worker 1 decides epoch 1 after 300 ms and waits for worker 0 at the
	// exchange.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w1.stderr.String(), "deciding it") {
		if time.Now().After(deadline) {
			t.Fatalf("worker 1 did not take epoch 1 over:\n%s", w1.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	produce(100, 150)
	w0 := startPeer(t, spec, 2, 0, "--worker-takeover", "300ms", "--drain")
	for _, w := range []*workerProc{w0, w1} {
		if err := <-w.done; err != nil {
			t.Fatalf("worker %d: %v\n%s", w.index, err, tailString(w.stderr.String(), 3000))
		}
	}
	want := wantKafkaWindows(1, 150, t0)
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	sameRows(t, "workers", got, want)
	ko := headKafka(t, ctx, fu("w/state"), "wtake")
	if ko == nil || len(ko.Partitions) != 1 || ko.Partitions[0].Next != 150 {
		t.Errorf("head offsets = %+v, want partition 0 at 150", ko)
	}
	if v := runFloe(t, "verify", spec); !strings.Contains(v.stdout, " 0 problems") {
		t.Errorf("floe verify:\n%s", v.stdout)
	}
}

// TestWorkersStartLatest: start_from: latest with several workers is one
// process's: the first run marks the files present read without reading
// them, and only files landed later reach the sink.
func TestWorkersStartLatest(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	dir := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(dir, p)) }
	latest := func(name, src, state, sink string) string {
		p := workerSpec(t, dir, name, src, state, sink)
		y, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		y = []byte(strings.Replace(string(y), "source: {type: files,", "source: {type: files, start_from: latest,", 1))
		if err := os.WriteFile(p, y, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refSpec := latest("sl-ref", fu("refsrc"), fu("ref/state"), fu("ref/out"))
	spec := latest("sl-w", fu("src"), fu("w/state"), fu("w/out"))
	allSpec := workerSpec(t, dir, "sl-all", fu("src"), fu("all/state"), fu("all/out"))
	ref, l := newLanding(t), newLanding(t)
	ref.land(t, ctx, fu("refsrc"), 12)
	l.land(t, ctx, fu("src"), 12)
	runFloe(t, "run", refSpec, "--log-format", "json")
	runWorkerRound(t, nil, spec, 3, 0)
	ref.land(t, ctx, fu("refsrc"), 8)
	l.land(t, ctx, fu("src"), 8)
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")
	runWorkerRound(t, nil, spec, 3, 0, "--drain")
	runFloe(t, "run", allSpec, "--drain", "--log-format", "json")

	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	all, _ := committedRows(t, ctx, allSpec, fu("all/out"))
	if len(want) == 0 || len(want) >= len(all) {
		t.Fatalf("one process with start_from: latest committed %d rows, all files give %d: the first files were not skipped", len(want), len(all))
	}
	sameRows(t, "workers", got, want)
}

// TestWorkersKafkaNewPartition: a partition added to the topic between two
// runs of the workers is picked up from its first offset, as by one
// process: the windows equal one process's over the same runs, every
// partition's committed offset is its end, and `floe status` of the
// workers' pipeline shows no lag on any of the three.
func TestWorkersKafkaNewPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	b := kafkatest.Start(t)
	topic := b.Topic("nclicks", 2)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	spec := writeKafkaSpec(t, root, "wnew", b.Brokers(), topic, fu("w/state"), fu("w/out"))
	refSpec := writeKafkaSpec(t, root, "wnref", b.Brokers(), topic, fu("ref/state"), fu("ref/out"))
	produce := func(parts []int32, from, to int) {
		var ms []kafkatest.Msg
		for _, p := range parts {
			for i := from; i < to; i++ {
				ms = append(ms, kafkaClick(p, i, t0))
			}
		}
		b.Produce(topic, ms...)
	}
	produce([]int32{0, 1}, 0, 300)
	runWorkerRound(t, nil, spec, 2, 0, "--run-id", "one")
	runFloe(t, "run", refSpec, "--log-format", "json")
	b.AddPartitions(topic, 1)
	produce([]int32{0, 1, 2}, 300, 600)
	// The plan of the next run by two workers counts the pending ranges
	// and shows what each worker owns.
	plan := runFloe(t, "plan", spec, "--workers", "2").stdout
	for _, want := range []string{"worker  subtasks", "next epoch ("} {
		if !strings.Contains(plan, want) {
			t.Errorf("floe plan --workers 2 lacks %q:\n%s", want, plan)
		}
	}
	if !regexp.MustCompile(`pending input files: [1-9]`).MatchString(plan) {
		t.Errorf("floe plan --workers 2 shows no pending ranges:\n%s", plan)
	}
	runWorkerRound(t, nil, spec, 2, 0, "--drain", "--run-id", "two")
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")

	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	if len(want) == 0 {
		t.Fatal("one process committed nothing")
	}
	sameRows(t, "workers", got, want)
	ends := map[int32]int64{0: 600, 1: 600, 2: 300}
	ko := headKafka(t, ctx, fu("w/state"), "wnew")
	if ko == nil || len(ko.Partitions) != 3 {
		t.Fatalf("head offsets = %+v, want 3 partitions", ko)
	}
	for _, p := range ko.Partitions {
		if p.Next != ends[p.Partition] {
			t.Errorf("partition %d: committed offset %d, want %d (the end)", p.Partition, p.Next, ends[p.Partition])
		}
	}
	st := runFloe(t, "status", spec).stdout
	if !regexp.MustCompile(`kafka lag\s+0 records`).MatchString(st) {
		t.Errorf("status shows no zero kafka lag:\n%s", st)
	}
	for p, end := range ends {
		if want := fmt.Sprintf("%s/%d", topic, p); !strings.Contains(st, want) || !strings.Contains(st, fmt.Sprintf("committed %d, high %d, lag 0", end, end)) {
			t.Errorf("status lacks partition %s at %d with lag 0:\n%s", want, end, st)
		}
	}
}

// TestWorkersKafkaMissingOffsets: with on_missing_offsets: skip, offsets
// the log lost (retention) between two runs of the workers are skipped and
// counted once in the manifest, whichever worker read them, as one process
// counts them over the same log.
func TestWorkersKafkaMissingOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	b := kafkatest.Start(t)
	topic := b.Topic("mclicks", 3)
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	skipping := func(name, state, sink string) string {
		p := writeKafkaSpec(t, root, name, b.Brokers(), topic, state, sink)
		y, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		y = []byte(strings.Replace(string(y), "  max_records_per_epoch: 120\n", "  max_records_per_epoch: 120\n  on_missing_offsets: skip\n", 1))
		if err := os.WriteFile(p, y, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spec := skipping("wmiss", fu("w/state"), fu("w/out"))
	refSpec := skipping("wmref", fu("ref/state"), fu("ref/out"))
	produce := func(from, to int) {
		var ms []kafkatest.Msg
		for p := int32(0); p < 3; p++ {
			for i := from; i < to; i++ {
				ms = append(ms, kafkaClick(p, i, t0))
			}
		}
		b.Produce(topic, ms...)
	}
	produce(0, 200)
	runWorkerRound(t, nil, spec, 2, 0, "--run-id", "one")
	runFloe(t, "run", refSpec, "--log-format", "json")
	produce(200, 500)
	// Retention takes offsets both pipelines have not read: 200-259 of
	// partition 0 and 200-349 of partition 2.
	b.DeleteRecords(topic, 0, 260)
	b.DeleteRecords(topic, 2, 350)
	runWorkerRound(t, nil, spec, 2, 0, "--drain", "--run-id", "two")
	runFloe(t, "run", refSpec, "--drain", "--log-format", "json")

	want, _ := committedRows(t, ctx, refSpec, fu("ref/out"))
	got, _ := committedRows(t, ctx, spec, fu("w/out"))
	sameRows(t, "workers", got, want)
	for name, state := range map[string]string{"wmiss": fu("w/state"), "wmref": fu("ref/state")} {
		ko := headKafka(t, ctx, state, name)
		if ko == nil || ko.Skipped != 60+150 {
			t.Errorf("%s: head offsets %+v: want 210 offsets skipped", name, ko)
			continue
		}
		for _, p := range ko.Partitions {
			if p.Next != 500 {
				t.Errorf("%s: partition %d at %d, want 500", name, p.Partition, p.Next)
			}
		}
	}
}

// sameRows fails t when who's committed rows got differ from want (as
// multisets) or want is empty, naming the first rows that differ.
func sameRows(t *testing.T, who string, got, want []string) {
	t.Helper()
	missing, extra := multisetDiff(want, got)
	if len(want) == 0 || len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s committed %d rows, want %d: %d missing, %d extra; missing (first 3) %q, extra (first 3) %q",
			who, len(got), len(want), len(missing), len(extra), firstN(missing, 3), firstN(extra, 3))
	}
}

// checkKafkaRunEnd checks a kafka kill test's pipeline after its last run:
// the head's offsets of source (empty: the linear form) are the ends of
// the parts partitions (perPart records each), every part file in the
// sink is a committed one (no orphan) and `floe verify` finds nothing.
func checkKafkaRunEnd(t *testing.T, ctx context.Context, spec, stateURL, name, sinkURL, source string, parts, perPart int) {
	t.Helper()
	ko := headKafka(t, ctx, stateURL, name)
	if ko == nil || len(ko.Partitions) != parts {
		t.Fatalf("head offsets = %+v", ko)
	}
	for _, p := range ko.Partitions {
		if p.Source != source || p.Next != int64(perPart) || p.High != int64(perPart) {
			t.Errorf("partition %s: committed offset %d (high %d), want %d (the end) of source %q", p, p.Next, p.High, perPart, source)
		}
	}
	committed := map[string]bool{}
	base := strings.TrimSuffix(sinkURL, "/") + "/"
	for _, line := range strings.Fields(runFloe(t, "outputs", spec).stdout) {
		committed[strings.TrimPrefix(line, base)] = true
	}
	for k := range listKeys(t, ctx, sinkURL) {
		if strings.HasPrefix(k, "part-") && !committed[k] {
			t.Errorf("sink file %s is not committed by any epoch (an orphan)", k)
		}
	}
	if v := runFloe(t, "verify", spec); !strings.Contains(v.stdout, " 0 problems") {
		t.Errorf("floe verify:\n%s", v.stdout)
	}
}
