package decide

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The decide step: pure functions of the committed head (inputs,
// watermark), the source listing and the clock. They read and write no
// store and no runner field, so the scenario tests in testdata/decide drive
// them as data.

// Config is the part of the spec the decisions read.
type Config struct {
	ByDirectory bool // source.inputs: directory
	// Kafka: a kafka source, whose listed files are offset ranges
	// "<topic>/<partition>/<from>-<to>" (kafka.Key): each partition is an
	// input, and MaxRecords (max_records_per_epoch) bounds the offsets of
	// an epoch, counted from the keys.
	Kafka      bool
	MaxRecords int64
	MaxFiles   int // source.max_files_per_epoch (0: no limit)
	// MaxFilesOf is each input's own max_files_per_epoch (a graph's named
	// sources, one input each; 0: no limit). When set, maxFiles is not
	// used: each source's limit applies to its own files.
	MaxFilesOf map[string]int
	Ooo        time.Duration // watermark.max_out_of_orderness
	// oooOf is each input's own max_out_of_orderness (a graph's named
	// sources, one input each); inputs not in it use ooo.
	oooOf map[string]time.Duration
	Idle  time.Duration // watermark.idle_timeout (0: never idle)
	// idleOf is each input's own idle_timeout (a graph's named sources);
	// inputs not in it use idle.
	idleOf map[string]time.Duration
	// MemLimit is the run's memory budget in bytes (state.memory_limit or
	// the machine's default; 0: none), memFrom where it came from.
	MemLimit int64
	MemFrom  string
	Format   spec.Format // the source format, for decoded-size estimates
	// formatOf is each input's own format (a graph's named sources); inputs
	// not in it use format.
	formatOf map[string]spec.Format
	// kafkaOf holds a graph's named kafka sources, each with its
	// max_records_per_epoch (0: no bound); non-nil in the graph form. A
	// kafka source's files are "<source>/<topic>/<partition>/<from>-<to>"
	// and each of its partitions is an input "<source>/<topic>/<partition>"
	// (sourceOf maps it back to the source).
	kafkaOf map[string]int64
	// streams: the plan has no keyed stage (no window in the linear form;
	// only filter, project and lookup stages in the graph form), so an
	// epoch streams its input in bounded memory and the budget does not
	// split it (membudget.go).
	Streams bool
	// SplitNoted is set once the run said that the budget split an epoch
	// (shared by copies of the config; nil in scenario tests).
	SplitNoted *atomic.Bool
}

func NewConfig(p *spec.Pipeline) Config {
	c := Config{
		// In the graph form every named source is one input (its files'
		// keys are "<source>/<key>").
		ByDirectory: p.Source.Inputs == spec.InputsDirectory || len(p.Sources) > 0,
		MaxFiles:    p.Source.MaxFilesPerEpoch,
		Ooo:         p.Source.Watermark.MaxOutOfOrderness,
		Idle:        p.Source.Watermark.IdleTimeout,
		Format:      p.Source.Format,
		Streams:     true,
		SplitNoted:  new(atomic.Bool),
	}
	c.MemLimit, c.MemFrom = MemoryLimitOf(p)
	if p.Source.Type == spec.SourceKafka && len(p.Sources) == 0 && p.Source.Kafka != nil {
		c.Kafka, c.MaxRecords = true, p.Source.Kafka.MaxRecordsPerEpoch
	}
	for _, op := range p.Operators {
		if op.Window != nil {
			c.Streams = false
		}
	}
	for _, st := range p.Stages {
		if !st.Stateless() {
			c.Streams = false // a keyed stage sees the epoch's rows at once
		}
	}
	if len(p.Sources) > 0 {
		c.formatOf = map[string]spec.Format{}
		c.oooOf = map[string]time.Duration{}
		c.idleOf = map[string]time.Duration{}
		c.MaxFilesOf = map[string]int{}
		c.kafkaOf = map[string]int64{}
		for _, ns := range p.Sources {
			if ns.Source.Type == spec.SourceKafka && ns.Source.Kafka != nil {
				c.kafkaOf[ns.Name] = ns.Source.Kafka.MaxRecordsPerEpoch
			}
			c.formatOf[ns.Name] = ns.Source.Format
			c.oooOf[ns.Name] = ns.Source.Watermark.MaxOutOfOrderness
			c.idleOf[ns.Name] = ns.Source.Watermark.IdleTimeout
			c.MaxFilesOf[ns.Name] = ns.Source.MaxFilesPerEpoch
		}
	}
	return c
}

// Estimate is decodedEstimate of f by its input's format.
func (c Config) Estimate(f store.ObjectInfo) int64 {
	format := c.Format
	if v, ok := c.formatOf[c.sourceOf(c.inputOf(f.Key))]; ok {
		format = v
	}
	return DecodedEstimate(format, f)
}

const defaultInput = "default"

// inputOf maps a source file to its watermark input: its top-level
// directory with inputs: directory, else the one default input.
func (c Config) inputOf(key string) string {
	if c.Kafka {
		// "<topic>/<partition>" (kafka.InputOf)
		if i := strings.LastIndexByte(key, '/'); i > 0 {
			return key[:i]
		}
		return key
	}
	if c.ByDirectory {
		if i := strings.IndexByte(key, '/'); i > 0 {
			if _, ok := c.kafkaOf[key[:i]]; ok {
				// a graph's kafka source: "<source>/<topic>/<partition>"
				if j := strings.LastIndexByte(key, '/'); j > i {
					return key[:j]
				}
			}
			return key[:i]
		}
	}
	return defaultInput
}

// sourceOf maps an input to the graph's named source it belongs to (its
// first segment: a kafka source has an input per partition); in the
// linear form every input is its own.
func (c Config) sourceOf(input string) string {
	if c.kafkaOf != nil {
		if i := strings.IndexByte(input, '/'); i > 0 {
			return input[:i]
		}
	}
	return input
}

// Interleave orders pending files round-robin across inputs (the first
// file of every input, then the second, ...), so that with per-directory
// inputs a catch-up advances every input together instead of one after the
// other, which would hold the watermark back. Deterministic: by key within
// an input, by name across inputs. With per-input limits (maxFilesOf) the
// order goes by epochs: the files each input may give the next epoch
// (round-robin), then those of the epoch after, ...; so the files one
// epoch may take are a prefix of the order (selectFiles), and an input
// with a larger limit is not held to the pace of one with a smaller.
func (c Config) Interleave(pend []store.ObjectInfo) []store.ObjectInfo {
	if !c.ByDirectory {
		return pend
	}
	byInput := map[string][]store.ObjectInfo{}
	var names []string
	for _, f := range pend {
		n := c.inputOf(f.Key)
		if _, ok := byInput[n]; !ok {
			names = append(names, n)
		}
		byInput[n] = append(byInput[n], f)
	}
	sort.Strings(names)
	// per is how many files of an input one round (an epoch) takes;
	// without per-input limits, one round holds every file.
	per := func(n string) int {
		if l := c.MaxFilesOf[n]; l > 0 {
			return l
		}
		return len(pend)
	}
	out := make([]store.ObjectInfo, 0, len(pend))
	for round := 0; len(out) < len(pend); round++ {
		for k := 0; ; k++ {
			more := false
			for _, n := range names {
				p := per(n)
				if k >= p || round*p >= len(byInput[n]) {
					continue
				}
				more = true
				if i := round*p + k; i < len(byInput[n]) {
					out = append(out, byInput[n][i])
				}
			}
			if !more {
				break
			}
		}
	}
	return out
}

// Limit returns how many files of pend (in interleave order) the next
// epoch may take by max_files_per_epoch: the longest prefix within the
// limit, or with per-input limits within every input's own.
func (c Config) Limit(pend []store.ObjectInfo) int {
	if c.MaxRecords > 0 {
		// The listing is cut into epochs of at most MaxRecords offsets:
		// take whole ranges up to it (at least one).
		var n int64
		for i, f := range pend {
			if n += rangeLen(f.Key); n > c.MaxRecords && i > 0 {
				return i
			}
		}
		return len(pend)
	}
	if c.MaxFilesOf == nil {
		if c.MaxFiles > 0 && len(pend) > c.MaxFiles {
			return c.MaxFiles
		}
		return len(pend)
	}
	taken := map[string]int{}
	records := map[string]int64{} // per kafka source
	for i, f := range pend {
		n := c.sourceOf(c.inputOf(f.Key))
		if l, ok := c.kafkaOf[n]; ok {
			// a kafka source's own max_records_per_epoch: whole ranges up
			// to it, at least one
			k := rangeLen(f.Key)
			if l > 0 && records[n] > 0 && records[n]+k > l {
				return i
			}
			records[n] += k
			continue
		}
		if l := c.MaxFilesOf[n]; l > 0 && taken[n] >= l {
			return i
		}
		taken[n]++
	}
	return len(pend)
}

// SelectFiles picks the next epoch's files from the pending list: at most
// max_files_per_epoch (limit), and for a plan that decodes its epoch at
// once no more than fit the memory budget (at least one).
// (max_rows_per_epoch is applied while decoding: the epoch ends after the
// file that crosses it.)
func (c Config) SelectFiles(pend []store.ObjectInfo) []store.ObjectInfo {
	n := c.Limit(pend)
	if cut := c.MemorySplit(pend[:n]); cut.Split {
		n = cut.Files
	}
	return pend[:n]
}

// memoryCut is how the memory budget cuts a selection of files.
type memoryCut struct {
	Split     bool  // the budget took fewer files than offered
	Files     int   // the files taken
	Offered   int   // the files offered
	Estimate  int64 // estimated decoded size of the files taken
	Remaining int64 // estimated decoded size of the files left over
	Budget    int64 // what an epoch may decode at once: half the limit
}

// MemorySplit applies the budget to files, the selection before it: it
// takes files in order while their estimated decoded size fits half the
// memory limit, and always the first. Plans that stream are not cut.
func (c Config) MemorySplit(files []store.ObjectInfo) memoryCut {
	cut := memoryCut{Files: len(files), Offered: len(files), Budget: c.MemLimit / 2}
	if c.MemLimit <= 0 || c.Streams {
		return cut
	}
	for i, f := range files {
		e := c.Estimate(f)
		if i > 0 && cut.Estimate+e > cut.Budget && !cut.Split {
			cut.Split, cut.Files = true, i
		}
		if cut.Split {
			cut.Remaining += e
		} else {
			cut.Estimate += e
		}
	}
	return cut
}

// waiting returns the inputs that have listed files not taken by the epoch
// in progress (pend[taken:]).
func (c Config) waiting(pend []store.ObjectInfo, taken int) map[string]bool {
	w := map[string]bool{}
	for _, f := range pend[min(taken, len(pend)):] {
		w[c.inputOf(f.Key)] = true
	}
	return w
}

// FileObs is what the decide step needs of one decoded file.
type FileObs struct {
	Key   string
	MaxTS int64 // largest event time in the file, math.MinInt64 if none
}

// Observe returns the per-input progress after files were read at now: a
// new map, prev is not modified.
func (c Config) Observe(prev map[string]manifest.InputState, files []FileObs, now time.Time) map[string]manifest.InputState {
	next := make(map[string]manifest.InputState, len(prev)+1)
	for k, v := range prev {
		next[k] = v
	}
	for _, f := range files {
		name := c.inputOf(f.Key)
		st := next[name]
		if st.LastActive.IsZero() {
			st.MaxEventTime = math.MinInt64
		}
		st.LastActive = now
		st.MaxEventTime = max(st.MaxEventTime, f.MaxTS)
		next[name] = st
	}
	return next
}

// watermark computes the combined watermark: the minimum over active inputs
// of max event time - max_out_of_orderness. Inputs idle longer than the idle
// timeout do not hold it back, unless files of theirs are waiting; an input
// with files waiting whose event times are unknown holds it where it is
// (prev). It never goes backwards.
func (c Config) watermark(inputs map[string]manifest.InputState, prev int64, now time.Time, waiting map[string]bool) int64 {
	wm, active := int64(math.MaxInt64), false
	maxAll := int64(math.MinInt64)
	for name, in := range inputs {
		if in.MaxEventTime == math.MinInt64 {
			continue
		}
		ooo := c.Ooo.Microseconds()
		if d, ok := c.oooOf[c.sourceOf(name)]; ok {
			ooo = d.Microseconds() // a graph's named source
		}
		v := in.MaxEventTime - ooo
		maxAll = max(maxAll, v)
		idle := c.Idle
		if d, ok := c.idleOf[c.sourceOf(name)]; ok {
			idle = d // a graph's named source
		}
		if idle > 0 && now.Sub(in.LastActive) >= idle && !waiting[name] {
			continue // idle: no files for a while, none waiting
		}
		active = true
		wm = min(wm, v)
	}
	for name := range waiting {
		if in, seen := inputs[name]; !seen || in.MaxEventTime == math.MinInt64 {
			wm, active = min(wm, prev), true
		}
	}
	if !active {
		wm = maxAll
	}
	return max(wm, prev)
}

// epochDecision is what the decide step says about one epoch once its files
// are read.
type EpochDecision struct {
	Inputs    map[string]manifest.InputState
	Watermark int64
	// Commit is false for an idle epoch (no files) whose watermark did not
	// move: there is nothing to record.
	Commit bool
}

// Decide returns the inputs, the watermark and whether to commit after an
// epoch that read files (none for an idle epoch) at now, with pend[taken:]
// still waiting. drain advances the watermark to +inf.
func (c Config) Decide(inputs map[string]manifest.InputState, prevWM int64, files []FileObs, now time.Time,
	pend []store.ObjectInfo, taken int, drain, idle bool) EpochDecision {
	d := EpochDecision{Inputs: c.Observe(inputs, files, now)}
	d.Watermark = c.watermark(d.Inputs, prevWM, now, c.waiting(pend, taken))
	if drain {
		d.Watermark = math.MaxInt64
	}
	d.Commit = !idle || d.Watermark != prevWM
	return d
}

// inputWatermarks returns, for each named input (a graph's sources), the
// watermark the inputs' own progress gives, by the same rule as the
// combined one (prev, the combined previous watermark, as the floor): what
// a stage that reads only some inputs may advance to. drain gives +inf.
func (c Config) InputWatermarks(inputs map[string]manifest.InputState, prev int64, now time.Time,
	pend []store.ObjectInfo, taken int, drain bool, names []string) map[string]int64 {
	waiting := c.waiting(pend, taken)
	out := make(map[string]int64, len(names))
	for _, n := range names {
		if drain {
			out[n] = math.MaxInt64
			continue
		}
		sub, w := c.inputsOfSource(n, inputs, waiting)
		out[n] = c.watermark(sub, prev, now, w)
	}
	return out
}

// inputsOfSource returns the inputs (and the waiting ones) of the named
// source n: n itself, or a kafka source's partitions.
func (c Config) inputsOfSource(n string, inputs map[string]manifest.InputState, waiting map[string]bool) (map[string]manifest.InputState, map[string]bool) {
	sub, w := map[string]manifest.InputState{}, map[string]bool{}
	for name, in := range inputs {
		if c.sourceOf(name) == n {
			sub[name] = in
		}
	}
	for name, v := range waiting {
		if v && c.sourceOf(name) == n {
			w[name] = true
		}
	}
	return sub, w
}

// rangeLen is the offset count of a kafka range key ".../<from>-<to>"
// (kafka.ParseKey); 1 for anything else, so a bad key is taken alone.
func rangeLen(key string) int64 {
	a, b, ok := strings.Cut(key[strings.LastIndexByte(key, '/')+1:], "-")
	from, err1 := strconv.ParseInt(a, 10, 64)
	to, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || to < from {
		return 1
	}
	return to - from
}

// Waiting returns the inputs that have listed files an epoch taking the
// first taken of pend leaves waiting, sorted: what a worker that decides an
// epoch records in the decision, so that every worker judges idle inputs
// alike (DecideSeen).
func (c Config) Waiting(pend []store.ObjectInfo, taken int) []string {
	return slices.Sorted(maps.Keys(c.waiting(pend, taken)))
}

// SeenOf returns the greatest event time of files per input: what one
// worker of a pipeline run by several reports of the files it decoded.
func (c Config) SeenOf(files []FileObs) map[string]int64 {
	out := map[string]int64{}
	for _, f := range files {
		name := c.inputOf(f.Key)
		if cur, ok := out[name]; !ok || f.MaxTS > cur {
			out[name] = f.MaxTS
		}
	}
	return out
}

// DecideSeen is Decide for an epoch known by the greatest event time per
// input of its files (seen: SeenOf, merged over the workers by max) and by
// the inputs still waiting (Waiting, recorded in the epoch's decision):
// the same result as Decide over the files themselves.
func (c Config) DecideSeen(inputs map[string]manifest.InputState, prevWM int64, seen map[string]int64, now time.Time,
	waiting []string, drain, idle bool) EpochDecision {
	next := make(map[string]manifest.InputState, len(inputs)+len(seen))
	maps.Copy(next, inputs)
	for name, ts := range seen {
		st := next[name]
		if st.LastActive.IsZero() {
			st.MaxEventTime = math.MinInt64
		}
		st.LastActive = now
		st.MaxEventTime = max(st.MaxEventTime, ts)
		next[name] = st
	}
	w := map[string]bool{}
	for _, n := range waiting {
		w[n] = true
	}
	d := EpochDecision{Inputs: next, Watermark: c.watermark(next, prevWM, now, w)}
	if drain {
		d.Watermark = math.MaxInt64
	}
	d.Commit = !idle || d.Watermark != prevWM
	return d
}

// InputWatermarksWaiting is InputWatermarks with the waiting inputs given
// (a decided epoch's).
func (c Config) InputWatermarksWaiting(inputs map[string]manifest.InputState, prev int64, now time.Time,
	waiting []string, drain bool, names []string) map[string]int64 {
	out := make(map[string]int64, len(names))
	for _, n := range names {
		if drain {
			out[n] = math.MaxInt64
			continue
		}
		w := map[string]bool{}
		for _, name := range waiting {
			w[name] = true
		}
		sub, subW := c.inputsOfSource(n, inputs, w)
		out[n] = c.watermark(sub, prev, now, subW)
	}
	return out
}
