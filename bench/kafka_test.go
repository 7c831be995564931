package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/kafka/kafkatest"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// The kafka test runs floe in child processes (this test binary
// re-executed with envKafkaChild set), so that a run can be SIGKILLed.
const envKafkaChild = "FLOE_BENCH_KAFKA_CHILD"

// kafkaChildJob is what a child runs: the spec at Spec, at Parallelism,
// drained or not, until caught up (Trigger 0) or until killed (an epoch
// every Trigger).
type kafkaChildJob struct {
	Spec        string
	Parallelism int
	Drain       bool
	Trigger     time.Duration
}

func TestMain(m *testing.M) {
	if job := os.Getenv(envKafkaChild); job != "" {
		os.Exit(runKafkaChild(job))
	}
	os.Exit(m.Run())
}

// runKafkaChild runs one floe run of the job and returns the exit code.
func runKafkaChild(job string) int {
	var j kafkaChildJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", envKafkaChild, err)
		return 2
	}
	p, err := spec.Load(j.Spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := engine.Run(context.Background(), p, engine.Options{Parallelism: j.Parallelism, Drain: j.Drain, Trigger: j.Trigger})
	if err != nil {
		fmt.Fprintf(os.Stderr, "floe run: %v\n", err)
		return 1
	}
	fmt.Printf("epochs=%d rows=%d late=%d rejected=%d\n", res.Epochs, res.Rows, res.RowsLate, res.RowsRejected)
	return 0
}

// kafkaBenchSpec is the clickstream tumbling case (Query's CaseTumbling:
// clicks and total_bytes per user_id and minute) over a kafka topic whose
// record values are the JSON lines of the benchmark's data sets.
const kafkaBenchSpec = `name: kclicks
source:
  type: kafka
  brokers: [%s]
  topic: %s
  format: jsonl
  schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}
  event_time: event_time
  watermark: {max_out_of_orderness: 5s}
  max_records_per_epoch: 400
operators:
  - window: {key: [user_id], tumbling: 1m, aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}}
sink:  {type: files, url: %q, format: parquet}
state: {url: %q, parallelism: 2, max_parallelism: 128, retain_epochs: 3}
`

// kafkaClicks draws the records of one producer batch: n records per
// partition continuing at next[p] (the partition's record count so far),
// event time t0 + i/4 s plus a jitter of up to 3 s (within the 5 s
// out-of-orderness, so none is ever late: the watermark is the minimum
// over partitions of their maximum less 5 s), users u0..u49 and pages
// p0..p9 drawn by rng. It returns the messages and their JSON lines.
func kafkaClicks(rng *rand.Rand, parts int32, next []int, n int, t0 time.Time) ([]kafkatest.Msg, []byte) {
	var ms []kafkatest.Msg
	var lines bytes.Buffer
	for p := int32(0); p < parts; p++ {
		for k := 0; k < n; k++ {
			i := next[p]
			next[p]++
			ts := t0.Add(time.Duration(i)*250*time.Millisecond + time.Duration(rng.IntN(3000))*time.Millisecond)
			v := fmt.Sprintf(`{"event_time":"%s","user_id":"u%d","page":"p%d","bytes":%d}`,
				ts.Format(time.RFC3339Nano), rng.IntN(50), rng.IntN(10), rng.IntN(5000))
			ms = append(ms, kafkatest.Msg{Partition: p, Value: v, Time: ts})
			lines.WriteString(v)
			lines.WriteByte('\n')
		}
	}
	return ms, lines.Bytes()
}

// startKafkaChild starts a floe run of job in a child process.
func startKafkaChild(t *testing.T, j kafkaChildJob) (*exec.Cmd, *bytes.Buffer, <-chan error) {
	t.Helper()
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envKafkaChild+"="+string(data))
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, out, done
}

// headEpoch is the committed head epoch of the pipeline at state (0: none).
func headEpoch(t *testing.T, state, name string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, name, filepath.FromSlash(manifest.LatestPath)))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := manifest.DecodeLatest(manifest.LatestPath, data)
	if err != nil {
		t.Fatal(err)
	}
	return l.Epoch
}

// TestKafkaKilledRunsMatchDuckDB produces clickstream records to a kafka
// topic (kfake, or FLOE_KAFKA_TEST_BROKERS) while `floe run` of a
// tumbling window over it is SIGKILLed at seeded random moments, every
// run at another parallelism (1, 2, 3 in turn: a rescale between runs),
// and writes the same records as JSON lines to a file; after a final
// drained run, what the runs committed must equal, row for row, DuckDB's
// answer to the benchmark's query over that file (Query, CaseTumbling),
// and the manifest's offsets must be the partitions' ends. In "faults"
// the broker's listener also resets floe's connections and loses, tears
// and delays responses (kafkatest.StartFaulty, 5% of floe's requests).
func TestKafkaKilledRunsMatchDuckDB(t *testing.T) {
	t.Run("kills", func(t *testing.T) { testKafkaKilled(t, false) })
	t.Run("faults", func(t *testing.T) { testKafkaKilled(t, true) })
}

func testKafkaKilled(t *testing.T, withFaults bool) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOE_KAFKA_KILL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FLOE_KAFKA_KILL_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (FLOE_KAFKA_KILL_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x6b64756b))
	kills := 6
	if testing.Short() {
		kills = 3
	}
	const parts, batches, perBatch = 3, 40, 60 // 7200 records
	t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	ctx := context.Background()
	var b *kafkatest.Broker
	var faults *kafkatest.Faults
	if withFaults {
		b, faults = kafkatest.StartFaulty(t)
		faults.Set(0.05, seed, "floe", kafkatest.AllFaults...)
	} else {
		b = kafkatest.Start(t)
	}
	topic := b.Topic("kduck", parts)
	root := t.TempDir()
	state, sink := filepath.Join(root, "state"), filepath.Join(root, "out")
	specPath := filepath.Join(root, "kclicks.yaml")
	y := fmt.Sprintf(kafkaBenchSpec, strings.Join(b.Brokers(), ", "), topic,
		"file://"+filepath.ToSlash(sink), "file://"+filepath.ToSlash(state))
	if err := os.WriteFile(specPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(root, "records.jsonl")
	f, err := os.Create(jsonl)
	if err != nil {
		t.Fatal(err)
	}

	// The producer: one batch first, the rest while runs are killed. Its
	// random source is its own, so the records depend only on the seed.
	next := make([]int, parts)
	prng := rand.New(rand.NewPCG(seed, 1))
	produce := func() error {
		ms, lines := kafkaClicks(prng, parts, next, perBatch, t0)
		if _, err := b.TryProduce(topic, ms...); err != nil {
			return err
		}
		_, err := f.Write(lines)
		return err
	}
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var produceErr error
	produced := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(produced)
		for i := 1; i < batches; i++ {
			if produceErr = produce(); produceErr != nil {
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	producing := func() bool {
		select {
		case <-produced:
			return false
		default:
			return true
		}
	}

	landed, attempts, killedMid, commitsByKilled := 0, 0, 0, 0
	for landed < kills || producing() {
		attempts++
		if attempts > 20*kills {
			t.Fatalf("only %d of %d kills landed in %d attempts (seed %d)", landed, kills, attempts, seed)
		}
		par := 1 + attempts%3
		before := headEpoch(t, state, "kclicks")
		// A --trigger run: it keeps reading what the producer writes
		// until it is killed.
		cmd, out, done := startKafkaChild(t, kafkaChildJob{Spec: specPath, Parallelism: par, Trigger: 50 * time.Millisecond})
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		var err error
		killed := false
		select {
		case err = <-done:
		case <-time.After(delay):
			_ = cmd.Process.Kill()
			err = <-done
			var ee *exec.ExitError
			killed = errors.As(err, &ee) && !ee.Exited()
		}
		if !killed {
			t.Fatalf("run %d (parallelism %d, --trigger) ended before it was killed (seed %d): %v\n%s", attempts, par, seed, err, out.String())
		}
		landed++
		if after := headEpoch(t, state, "kclicks"); after > before {
			killedMid++
			commitsByKilled += int(after - before)
		}
	}
	wg.Wait()
	if produceErr != nil {
		t.Fatal(produceErr)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, out, done := startKafkaChild(t, kafkaChildJob{Spec: specPath, Parallelism: 2, Drain: true})
	if err := <-done; err != nil {
		t.Fatalf("final run: %v\n%s", err, out.String())
	}
	t.Logf("%d kills in %d runs (parallelism 1..3 in turn), %d after a commit of the killed run, which committed %d epochs; final run: %s",
		landed, attempts, killedMid, commitsByKilled, strings.TrimSpace(out.String()))

	p, err := spec.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := engine.Outputs(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	floeFiles := make([]string, len(outs))
	for i, o := range outs {
		floeFiles[i] = filepath.Join(sink, filepath.FromSlash(o))
	}
	duckOut := filepath.Join(root, "duck.parquet")
	if _, err := RunDuckDB(ctx, DuckJob{Files: []string{jsonl}, Format: datagen.JSONL, Out: duckOut}); err != nil {
		t.Fatal(err)
	}
	c, err := CompareOutputs(ctx, CaseTumbling, floeFiles, []string{duckOut})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(parts * batches * perBatch)
	if !c.Equal() || c.DuckDB.Clicks != total {
		t.Fatalf("committed outputs differ from DuckDB's over the same records (seed %d): %+v (want %d clicks)", seed, c, total)
	}
	t.Logf("%d window rows, %d clicks: equal to DuckDB's", c.Floe.Windows, c.Floe.Clicks)
	if faults != nil {
		t.Log(faults.Summary())
		if len(faults.Counts()) != len(kafkatest.AllFaults) {
			t.Errorf("not every kind of fault was injected: %s", faults.Summary())
		}
	}

	m := headKafkaOffsets(t, state, "kclicks")
	if m == nil || len(m.Partitions) != parts {
		t.Fatalf("head offsets = %+v, want %d partitions", m, parts)
	}
	for _, kp := range m.Partitions {
		if kp.Next != int64(batches*perBatch) {
			t.Errorf("partition %d: committed offset %d, want %d (the end)", kp.Partition, kp.Next, batches*perBatch)
		}
	}
}

// headKafkaOffsets reads the kafka offsets of the committed head manifest.
func headKafkaOffsets(t *testing.T, state, name string) *manifest.KafkaOffsets {
	t.Helper()
	dir := filepath.Join(state, name)
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(manifest.LatestPath)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := manifest.DecodeLatest(manifest.LatestPath, data)
	if err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(l.Manifest))); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.DecodeManifest(l.Manifest, data)
	if err != nil {
		t.Fatal(err)
	}
	return m.Source.Kafka
}
