package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/keygroup"
)

// Documents of a pipeline run by W worker processes (package cluster,
// docs/workers.md). Both are new documents of format 2: no earlier release
// writes or reads them. Their keys sit inside the epoch's directory, so
// ParseKey files them under their generation and epoch (KeyOther) and
// retention deletes them with the epoch's other unreferenced files once the
// head has passed it.
//
//	gen=000003/epoch=0000000041/_decision.json                     DecisionPath
//	gen=000003/epoch=0000000041/_idle.json                         IdlePath (no input found yet)
//	gen=000003/epoch=0000000041/<attempt>/x/r=01/w=0002.bin         ExchangePath (round 1, sender 2)
//	gen=000003/epoch=0000000041/<attempt>/x/_part-w=0002.json       PartPath (worker 2)

// DecisionFile is the base name of an epoch's decision document.
const DecisionFile = "_decision.json"

// IdleFile is the base name of an epoch's idle note.
const IdleFile = "_idle.json"

// WorkerDigits and RoundDigits are the minimum widths of worker indexes and
// exchange round numbers in keys.
const (
	WorkerDigits = 4
	RoundDigits  = 2
)

// MaxWorkers bounds the worker count of a pipeline: a worker owns at least
// one subtask, and a pipeline has at most keygroup.Max subtasks.
const MaxWorkers = keygroup.Max

// DecisionPath returns the key of an epoch's decision document,
// "gen=000003/epoch=0000000041/_decision.json".
func DecisionPath(gen, epoch int64) string {
	return EpochDir(gen, epoch) + DecisionFile
}

// IdlePath returns the key of the note the proposer of an epoch leaves
// when it found no input for it, "gen=000003/epoch=0000000041/_idle.json".
func IdlePath(gen, epoch int64) string {
	return EpochDir(gen, epoch) + IdleFile
}

// ExchangePath returns the key of the exchange object sender writes in
// round (>= 1) of an attempt: ".../<attempt>/x/r=01/w=0002.bin".
func ExchangePath(gen, epoch int64, attempt string, round, sender int) string {
	return fmt.Sprintf("%sx/r=%0*d/w=%0*d.bin", AttemptDir(gen, epoch, attempt), RoundDigits, round, WorkerDigits, sender)
}

// PartPath returns the key of worker's part record of an attempt:
// ".../<attempt>/x/_part-w=0002.json".
func PartPath(gen, epoch int64, attempt string, worker int) string {
	return fmt.Sprintf("%sx/_part-w=%0*d.json", AttemptDir(gen, epoch, attempt), WorkerDigits, worker)
}

// Decision is the content of gen=N/epoch=M/_decision.json: what epoch M of
// a pipeline run by Workers processes is, decided once by whichever worker
// created the document first (create-if-absent) and followed by all. It
// names the attempt every worker writes under, so an epoch has one attempt
// per generation.
type Decision struct {
	FormatVersion int    `json:"format_version"`
	Pipeline      string `json:"pipeline"`
	Generation    int64  `json:"generation"`
	Epoch         int64  `json:"epoch"`
	// Attempt is the epoch's attempt UUID: every worker's state, outputs,
	// exchange objects and part record carry it, and the manifest too.
	Attempt string `json:"attempt"`
	// Parent is the committed epoch this one continues (nil: the first).
	Parent *Ref `json:"parent"`
	// Workers, Parallelism and MaxParallelism are the topology (W, P, K):
	// a worker started with another W or P does not join this epoch.
	Workers        int `json:"workers"`
	Parallelism    int `json:"parallelism"`
	MaxParallelism int `json:"max_parallelism"`
	// Proposer is the index of the worker that created the document.
	Proposer int `json:"proposer"`
	// CreatedAt is the epoch's clock: the manifest's created_at and the
	// time idle inputs are judged at, the same for every worker.
	CreatedAt time.Time `json:"created_at"`
	// Files are the epoch's input files in processing order, each with the
	// worker that decodes it.
	Files []DecidedFile `json:"files"`
	// Inputs is the watermark progress of each input before the epoch (the
	// parent's); the epoch's watermark also takes the maxima the workers
	// report in their exchange objects and part records.
	Inputs map[string]InputState `json:"inputs,omitempty"`
	// Watermark is the parent's watermark (microseconds, NoWatermark if none).
	Watermark int64 `json:"watermark_us"`
	// Drain is set when the epoch ends the input (--drain): its watermark
	// is +inf.
	Drain bool `json:"drain,omitempty"`
	// Waiting names the inputs that had listed files this epoch did not
	// take (sorted): such an input is not idle, whatever its last activity,
	// and every worker computes the watermark with the same set.
	Waiting []string `json:"waiting,omitempty"`
	// Commit is set on an epoch without files that commits anyway: a
	// restore (savepoint, rollback, reset) taking effect, or a listing to
	// record.
	Commit bool `json:"commit,omitempty"`
	// SkipRead is set on a pipeline's first epoch under start_from:
	// latest: its files are marked read without being read.
	SkipRead bool `json:"skip_read,omitempty"`
	// Kafka is, for a kafka source, the offsets after the epoch (the
	// parent's advanced by the decided ranges, new partitions at where the
	// proposer's listing started them, the high watermarks it saw); the
	// manifest records it with Skipped raised by the parts' KafkaSkipped.
	Kafka    *KafkaOffsets `json:"kafka,omitempty"`
	Checksum string        `json:"checksum,omitempty"` // see Latest.Checksum
}

// Idle is the content of gen=N/epoch=M/_idle.json: the worker Proposer
// looked for input for epoch M at CheckedAt and found none, so it decided
// nothing. It is overwritten at every such look and never referenced;
// the other workers read it to stop waiting for a decision (--once ends,
// --trigger waits for the next tick) instead of deciding themselves.
type Idle struct {
	FormatVersion int       `json:"format_version"`
	Pipeline      string    `json:"pipeline"`
	Generation    int64     `json:"generation"`
	Epoch         int64     `json:"epoch"`
	Proposer      int       `json:"proposer"`
	CheckedAt     time.Time `json:"checked_at"`
	// Run names the run of the workers whose proposer looked (--run-id),
	// if it was given one.
	Run      string `json:"run,omitempty"`
	Checksum string `json:"checksum,omitempty"`
}

func (d *Idle) version() int { return d.FormatVersion }
func (d *Idle) sum() *string { return &d.Checksum }

// EncodeIdle validates d, fills its checksum and returns its canonical
// encoding.
func EncodeIdle(d *Idle) ([]byte, error) { return encode("idle note", d) }

// DecodeIdle strictly decodes and validates an idle note.
func DecodeIdle(name string, data []byte) (*Idle, error) {
	var d Idle
	if err := decode("idle note", name, data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks the idle note: version, pipeline name, positive
// generation and epoch, a proposer index >= 0, a time.
func (d *Idle) Validate() error {
	v := validator{doc: "idle note"}
	v.version(d.FormatVersion)
	v.check("pipeline", checkPipelineName(d.Pipeline))
	v.positive("generation", d.Generation)
	v.positive("epoch", d.Epoch)
	v.nonNegative("proposer", int64(d.Proposer))
	if d.CheckedAt.IsZero() {
		v.fail("checked_at", "zero time")
	}
	return v.result()
}

// DecidedFile is one input file of a decided epoch.
type DecidedFile struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Worker int    `json:"worker"`
}

// WorkerPart is the content of a worker's part record: what one worker
// wrote for an epoch. The epoch commits once the part of every worker
// 0..Workers-1 exists; its manifest is a function of the decision and the
// parts only, so any worker that has read them all builds the same bytes.
type WorkerPart struct {
	FormatVersion int    `json:"format_version"`
	Pipeline      string `json:"pipeline"`
	Generation    int64  `json:"generation"`
	Epoch         int64  `json:"epoch"`
	Attempt       string `json:"attempt"`
	Worker        int    `json:"worker"`
	Workers       int    `json:"workers"`
	Parallelism   int    `json:"parallelism"`
	// SubtaskLo, SubtaskHi: the contiguous subtasks [lo, hi) the worker
	// owns (its key groups are theirs).
	SubtaskLo int `json:"subtask_lo"`
	SubtaskHi int `json:"subtask_hi"`
	// Rounds is the number of exchange rounds the worker took part in.
	Rounds int `json:"rounds"`
	// Inputs holds, per input, the greatest event time of the rows of the
	// files the worker decoded (LastActive: the decision's clock when the
	// worker saw rows of the input).
	Inputs map[string]InputState `json:"inputs,omitempty"`
	// Counters are this epoch's counts of the worker alone (not cumulative).
	Counters Counters `json:"counters"`
	// Operators holds, per keyed stage, the state files (bases and deltas)
	// of the worker's subtasks that the epoch's manifest lists, whether
	// written this epoch or kept by reference; EmittedThrough is the
	// worker's.
	Operators []OperatorState `json:"operators"`
	// Outputs and SideOutputs are the files the worker wrote this epoch.
	Outputs     []FileRef   `json:"outputs"`
	SideOutputs []FileRef   `json:"side_outputs"`
	Stats       *EpochStats `json:"stats,omitempty"`
	// KafkaSkipped counts the offsets of the worker's ranges that the log
	// no longer held (on_missing_offsets: skip).
	KafkaSkipped int64  `json:"kafka_skipped,omitempty"`
	Checksum     string `json:"checksum,omitempty"`
}

func (d *Decision) version() int   { return d.FormatVersion }
func (d *Decision) sum() *string   { return &d.Checksum }
func (p *WorkerPart) version() int { return p.FormatVersion }
func (p *WorkerPart) sum() *string { return &p.Checksum }

// EncodeDecision validates d, fills its checksum and returns its canonical
// encoding.
func EncodeDecision(d *Decision) ([]byte, error) { return encode("decision", d) }

// DecodeDecision strictly decodes and validates a decision document.
func DecodeDecision(name string, data []byte) (*Decision, error) {
	var d Decision
	if err := decode("decision", name, data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// EncodeWorkerPart validates p, fills its checksum and returns its canonical
// encoding.
func EncodeWorkerPart(p *WorkerPart) ([]byte, error) { return encode("worker part", p) }

// DecodeWorkerPart strictly decodes and validates a part record.
func DecodeWorkerPart(name string, data []byte) (*WorkerPart, error) {
	var p WorkerPart
	if err := decode("worker part", name, data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// topology validates W, P (and K when k > 0): 1 <= W <= P <= K.
func (v *validator) topology(w, p, k int) {
	if w < 1 || w > MaxWorkers {
		v.fail("workers", "%d must be in 1..%d", w, MaxWorkers)
	}
	if p < w {
		v.fail("parallelism", "%d must be at least the worker count %d (a worker owns at least one subtask)", p, w)
	}
	if k > 0 && (!keygroup.ValidCount(k) || p > k) {
		v.fail("max_parallelism", "%d must be in parallelism (%d)..%d", k, p, keygroup.Max)
	}
}

// Validate checks the decision: version, names, positive numbers, the
// topology 1 <= workers <= parallelism <= max_parallelism, a parent older
// than the epoch, and files with valid distinct keys, sizes >= 0 and a
// worker index in range. Errors wrap ErrCorrupt.
func (d *Decision) Validate() error {
	v := validator{doc: "decision"}
	v.epochHeader(d.FormatVersion, d.Pipeline, d.Generation, d.Epoch, d.Attempt, d.Parent)
	v.topology(d.Workers, d.Parallelism, d.MaxParallelism)
	if d.Proposer < 0 || d.Proposer >= d.Workers {
		v.fail("proposer", "%d is not a worker index in 0..%d", d.Proposer, d.Workers-1)
	}
	seen := make(map[string]int, len(d.Files))
	for i, f := range d.Files {
		field := "files[" + strconv.Itoa(i) + "]"
		v.check(field+".key", checkSourceKey(f.Key))
		v.nonNegative(field+".size", f.Size)
		if f.Worker < 0 || f.Worker >= d.Workers {
			v.fail(field+".worker", "%d is not a worker index in 0..%d", f.Worker, d.Workers-1)
		}
		if j, dup := seen[f.Key]; dup {
			v.fail(field+".key", "%q is also files[%d]", f.Key, j)
		}
		seen[f.Key] = i
	}
	v.kafkaOffsets(d.Kafka)
	return v.result()
}

// checkSourceKey is ValidateSourceKey's message form.
func checkSourceKey(k string) string {
	if err := ValidateSourceKey(k); err != nil {
		return err.Error()
	}
	return ""
}

// Validate checks the part record: version, names, topology, a worker index
// in range, a non-empty subtask range [subtask_lo, subtask_hi) within the
// parallelism, non-negative counters, and the file references by the rules
// of the manifest (state files and deltas with key-group ranges, outputs
// relative to the sink). Errors wrap ErrCorrupt.
func (p *WorkerPart) Validate() error {
	v := validator{doc: "worker part"}
	v.version(p.FormatVersion)
	v.check("pipeline", checkPipelineName(p.Pipeline))
	v.positive("generation", p.Generation)
	v.positive("epoch", p.Epoch)
	v.check("attempt", checkAttempt(p.Attempt))
	v.topology(p.Workers, p.Parallelism, 0)
	if p.Worker < 0 || p.Worker >= p.Workers {
		v.fail("worker", "%d is not a worker index in 0..%d", p.Worker, p.Workers-1)
	}
	if p.SubtaskLo < 0 || p.SubtaskHi <= p.SubtaskLo || p.SubtaskHi > p.Parallelism {
		v.fail("subtask_lo", "subtask range [%d, %d) must be non-empty and within 0..%d", p.SubtaskLo, p.SubtaskHi, p.Parallelism)
	}
	v.nonNegative("rounds", int64(p.Rounds))
	v.nonNegative("kafka_skipped", p.KafkaSkipped)
	c := p.Counters
	for _, f := range []struct {
		name string
		n    int64
	}{{"files_in", c.FilesIn}, {"rows_in", c.RowsIn}, {"rows_out", c.RowsOut}, {"rows_late", c.RowsLate},
		{"rows_rejected", c.RowsRejected}, {"rows_filtered", c.RowsFiltered}, {"windows_emitted", c.Windows},
		{"files_rejected_whole", c.FilesRejectedWhole}, {"files_after_drain", c.FilesAfterDrain}, {"files_changed", c.FilesChanged}} {
		v.nonNegative("counters."+f.name, f.n)
	}
	for i, op := range p.Operators {
		field := "operators[" + strconv.Itoa(i) + "]"
		v.check(field+".id", checkOpID(op.ID))
		v.fileRefs(field+".files", op.Files, refState)
		v.fileRefs(field+".deltas", op.Deltas, refDelta)
		for j, f := range append(append([]FileRef(nil), op.Files...), op.Deltas...) {
			if f.Subtask < p.SubtaskLo || f.Subtask >= p.SubtaskHi {
				v.fail(fmt.Sprintf("%s.files[%d].subtask", field, j), "subtask %d is not the worker's (%d..%d)", f.Subtask, p.SubtaskLo, p.SubtaskHi-1)
			}
		}
	}
	v.fileRefs("outputs", p.Outputs, refOutput)
	v.fileRefs("side_outputs", p.SideOutputs, refSide)
	return v.result()
}

// IsWorkersKey reports whether key is one of the documents of a pipeline
// run by several workers (a decision, an idle note, an exchange object, a
// part record). Retention keeps those of the head's own epoch: workers
// still read them after the commit (the parts, to follow the manifest).
func IsWorkersKey(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	return base == DecisionFile || base == IdleFile || strings.Contains(key, "/x/")
}
