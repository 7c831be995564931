package cluster

import (
	"fmt"
	"slices"

	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
)

// Topology is the shape of a pipeline run by several workers: W worker
// processes, P subtasks (parallelism) and K key groups (max_parallelism),
// 1 <= W <= P <= K. Worker w owns the contiguous subtasks
// [ceil(w*P/W), ceil((w+1)*P/W)) and so the contiguous key groups of those
// subtasks: the key-group rule of package keygroup applied twice
// (subtasks to workers as key groups to subtasks), so that every worker
// owns at least one subtask and the ranges partition [0, P) and [0, K) in
// worker order. A change of W or P is a new generation.
type Topology struct {
	Workers        int
	Parallelism    int
	MaxParallelism int
}

// Validate checks 1 <= W <= P <= K <= keygroup.Max.
func (t Topology) Validate() error {
	switch {
	case t.Workers < 1 || t.Workers > manifest.MaxWorkers:
		return fmt.Errorf("workers %d: must be in 1..%d", t.Workers, manifest.MaxWorkers)
	case !keygroup.ValidCount(t.MaxParallelism):
		return fmt.Errorf("max_parallelism %d: must be in 1..%d", t.MaxParallelism, keygroup.Max)
	case t.Parallelism < 1 || t.Parallelism > t.MaxParallelism:
		return fmt.Errorf("parallelism %d: must be in 1..max_parallelism (%d)", t.Parallelism, t.MaxParallelism)
	case t.Workers > t.Parallelism:
		return fmt.Errorf("workers %d: more than parallelism %d (each worker owns at least one subtask; raise state.parallelism or run fewer workers)", t.Workers, t.Parallelism)
	}
	return nil
}

// String formats t as "W=3 P=4 K=128".
func (t Topology) String() string {
	return fmt.Sprintf("W=%d P=%d K=%d", t.Workers, t.Parallelism, t.MaxParallelism)
}

// Subtasks returns the subtasks [lo, hi) worker owns.
func (t Topology) Subtasks(worker int) (lo, hi int) {
	return keygroup.Range(worker, t.Workers, t.Parallelism)
}

// KeyGroups returns the key groups [lo, hi) worker owns: those of its
// subtasks.
func (t Topology) KeyGroups(worker int) (lo, hi int) {
	slo, shi := t.Subtasks(worker)
	if slo >= shi {
		return 0, 0
	}
	lo, _ = keygroup.Range(slo, t.Parallelism, t.MaxParallelism)
	_, hi = keygroup.Range(shi-1, t.Parallelism, t.MaxParallelism)
	return lo, hi
}

// WorkerOfSubtask returns the worker owning subtask s.
func (t Topology) WorkerOfSubtask(s int) int {
	return keygroup.SubtaskOf(s, t.Workers, t.Parallelism)
}

// WorkerOfKeyGroup returns the worker owning key group g.
func (t Topology) WorkerOfKeyGroup(g int) int {
	return t.WorkerOfSubtask(keygroup.SubtaskOf(g, t.Parallelism, t.MaxParallelism))
}

// File is an input file offered to an epoch.
type File struct {
	Key  string
	Size int64
}

// AssignFiles splits an epoch's files, in the order given (the order the
// single-process engine reads them), among W workers: contiguous runs, cut
// where the running byte count crosses w*total/W, so worker w gets the w-th
// run. The result is a function of the keys, sizes, order and W only.
// Every worker's bytes are within one largest file of total/W; with fewer
// files than workers some workers get none. Contiguous runs keep the global
// file order when receivers place the rows of senders 0..W-1 in sender
// order, which is what keeps arrival-order-sensitive stages (dedup, top_n,
// over) equal to a single process.
func AssignFiles(files []File, workers int) []manifest.DecidedFile {
	out := make([]manifest.DecidedFile, len(files))
	var total int64
	for _, f := range files {
		total += max(f.Size, 1) // an empty file still costs a read
	}
	var acc int64
	for i, f := range files {
		size := max(f.Size, 1)
		// The file goes to the worker whose share [w*total/W, (w+1)*total/W)
		// holds the file's midpoint.
		mid := acc + size/2
		w := 0
		if total > 0 {
			w = int(mid * int64(workers) / total)
		}
		out[i] = manifest.DecidedFile{Key: f.Key, Size: f.Size, Worker: min(w, workers-1)}
		acc += size
	}
	return out
}

// FilesOf returns the files of d that worker decodes, in decision order.
func FilesOf(d *manifest.Decision, worker int) []manifest.DecidedFile {
	return slices.DeleteFunc(slices.Clone(d.Files), func(f manifest.DecidedFile) bool { return f.Worker != worker })
}

// Owner is what one worker owns (for `floe plan --workers W`).
type Owner struct {
	Worker               int
	SubtaskLo, SubtaskHi int // [lo, hi)
	KeyGroupLo           int // [lo, hi)
	KeyGroupHi           int
}

// Owners lists what every worker owns, in worker order.
func (t Topology) Owners() []Owner {
	out := make([]Owner, t.Workers)
	for w := range out {
		o := Owner{Worker: w}
		o.SubtaskLo, o.SubtaskHi = t.Subtasks(w)
		o.KeyGroupLo, o.KeyGroupHi = t.KeyGroups(w)
		out[w] = o
	}
	return out
}
