package engine

import (
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/floe-dev/floe/kafka"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The decide step: pure functions of the committed head (inputs,
// watermark), the source listing and the clock. They read and write no
// store and no runner field, so the scenario tests in testdata/decide drive
// them as data.

// decideConfig is the part of the spec the decisions read.
type decideConfig struct {
	byDirectory bool // source.inputs: directory
	// kafka: a kafka source; each partition is an input (kafka.InputOf)
	// and maxRecords bounds the offsets of an epoch
	// (max_records_per_epoch, counted from the listed ranges' keys).
	kafka      bool
	maxRecords int64
	maxFiles   int // source.max_files_per_epoch (0: no limit)
	// maxFilesOf is each input's own max_files_per_epoch (a graph's named
	// sources, one input each; 0: no limit). When set, maxFiles is not
	// used: each source's limit applies to its own files.
	maxFilesOf map[string]int
	ooo        time.Duration // watermark.max_out_of_orderness
	// oooOf is each input's own max_out_of_orderness (a graph's named
	// sources, one input each); inputs not in it use ooo.
	oooOf map[string]time.Duration
	idle  time.Duration // watermark.idle_timeout (0: never idle)
	// memLimit is the run's memory budget in bytes (state.memory_limit or
	// the machine's default; 0: none), memFrom where it came from.
	memLimit int64
	memFrom  string
	format   spec.Format // the source format, for decoded-size estimates
	// formatOf is each input's own format (a graph's named sources); inputs
	// not in it use format.
	formatOf map[string]spec.Format
	// streams: the plan has no keyed stage (no window in the linear form;
	// only filter, project and lookup stages in the graph form), so an
	// epoch streams its input in bounded memory and the budget does not
	// split it (membudget.go).
	streams bool
	// splitNoted is set once the run said that the budget split an epoch
	// (shared by copies of the config; nil in scenario tests).
	splitNoted *atomic.Bool
}

func newDecideConfig(p *spec.Pipeline) decideConfig {
	c := decideConfig{
		byDirectory: p.Source.Inputs == spec.InputsDirectory,
		maxFiles:    p.Source.MaxFilesPerEpoch,
		ooo:         p.Source.Watermark.MaxOutOfOrderness,
		idle:        p.Source.Watermark.IdleTimeout,
		format:      p.Source.Format,
		streams:     true,
		splitNoted:  new(atomic.Bool),
	}
	c.memLimit, c.memFrom = memoryLimitOf(p)
	if isKafka(p) {
		c.kafka = true
		c.maxRecords = p.Source.Kafka.MaxRecordsPerEpoch
	}
	for _, op := range p.Operators {
		if op.Window != nil {
			c.streams = false
		}
	}
	for _, st := range p.Stages {
		if !statelessKind(st.Kind()) {
			c.streams = false // a keyed stage sees the epoch's rows at once
		}
	}
	if len(p.Sources) > 0 {
		c.formatOf = map[string]spec.Format{}
		for _, ns := range p.Sources {
			c.formatOf[ns.Name] = ns.Source.Format
		}
	}
	return c
}

// statelessKind reports whether a graph stage of kind maps each batch on
// its own (keeps no state between rows): what a streamed epoch can run.
func statelessKind(kind string) bool {
	return kind == spec.KindFilter || kind == spec.KindProject || kind == spec.KindLookup
}

// estimate is decodedEstimate of f by its input's format.
func (c decideConfig) estimate(f store.ObjectInfo) int64 {
	format := c.format
	if v, ok := c.formatOf[c.inputOf(f.Key)]; ok {
		format = v
	}
	return decodedEstimate(format, f)
}

const defaultInput = "default"

// inputOf maps a source file to its watermark input: its top-level
// directory with inputs: directory, else the one default input.
func (c decideConfig) inputOf(key string) string {
	if c.kafka {
		return kafka.InputOf(key)
	}
	if c.byDirectory {
		if i := strings.IndexByte(key, '/'); i > 0 {
			return key[:i]
		}
	}
	return defaultInput
}

// interleave orders pending files round-robin across inputs (the first
// file of every input, then the second, ...), so that with per-directory
// inputs a catch-up advances every input together instead of one after the
// other, which would hold the watermark back. Deterministic: by key within
// an input, by name across inputs. With per-input limits (maxFilesOf) the
// order goes by epochs: the files each input may give the next epoch
// (round-robin), then those of the epoch after, ...; so the files one
// epoch may take are a prefix of the order (selectFiles), and an input
// with a larger limit is not held to the pace of one with a smaller.
func (c decideConfig) interleave(pend []store.ObjectInfo) []store.ObjectInfo {
	if !c.byDirectory {
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
		if l := c.maxFilesOf[n]; l > 0 {
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

// limit returns how many files of pend (in interleave order) the next
// epoch may take by max_files_per_epoch: the longest prefix within the
// limit, or with per-input limits within every input's own.
func (c decideConfig) limit(pend []store.ObjectInfo) int {
	if c.maxRecords > 0 {
		// The listing is cut into epochs of at most maxRecords offsets:
		// take whole ranges up to it (at least one).
		var n int64
		for i, f := range pend {
			rg, err := kafka.ParseKey(f.Key)
			if err != nil {
				return max(i, 1)
			}
			if n += rg.Len(); n > c.maxRecords && i > 0 {
				return i
			}
		}
		return len(pend)
	}
	if c.maxFilesOf == nil {
		if c.maxFiles > 0 && len(pend) > c.maxFiles {
			return c.maxFiles
		}
		return len(pend)
	}
	taken := map[string]int{}
	for i, f := range pend {
		n := c.inputOf(f.Key)
		if l := c.maxFilesOf[n]; l > 0 && taken[n] >= l {
			return i
		}
		taken[n]++
	}
	return len(pend)
}

// selectFiles picks the next epoch's files from the pending list: at most
// max_files_per_epoch (limit), and for a plan that decodes its epoch at
// once no more than fit the memory budget (at least one).
// (max_rows_per_epoch is applied while decoding: the epoch ends after the
// file that crosses it.)
func (c decideConfig) selectFiles(pend []store.ObjectInfo) []store.ObjectInfo {
	n := c.limit(pend)
	if cut := c.memorySplit(pend[:n]); cut.split {
		n = cut.files
	}
	return pend[:n]
}

// memoryCut is how the memory budget cuts a selection of files.
type memoryCut struct {
	split     bool  // the budget took fewer files than offered
	files     int   // the files taken
	offered   int   // the files offered
	estimate  int64 // estimated decoded size of the files taken
	remaining int64 // estimated decoded size of the files left over
	budget    int64 // what an epoch may decode at once: half the limit
}

// memorySplit applies the budget to files, the selection before it: it
// takes files in order while their estimated decoded size fits half the
// memory limit, and always the first. Plans that stream are not cut.
func (c decideConfig) memorySplit(files []store.ObjectInfo) memoryCut {
	cut := memoryCut{files: len(files), offered: len(files), budget: c.memLimit / 2}
	if c.memLimit <= 0 || c.streams {
		return cut
	}
	for i, f := range files {
		e := c.estimate(f)
		if i > 0 && cut.estimate+e > cut.budget && !cut.split {
			cut.split, cut.files = true, i
		}
		if cut.split {
			cut.remaining += e
		} else {
			cut.estimate += e
		}
	}
	return cut
}

// waiting returns the inputs that have listed files not taken by the epoch
// in progress (pend[taken:]).
func (c decideConfig) waiting(pend []store.ObjectInfo, taken int) map[string]bool {
	w := map[string]bool{}
	for _, f := range pend[min(taken, len(pend)):] {
		w[c.inputOf(f.Key)] = true
	}
	return w
}

// fileObs is what the decide step needs of one decoded file.
type fileObs struct {
	key   string
	maxTS int64 // largest event time in the file, math.MinInt64 if none
}

// observe returns the per-input progress after files were read at now: a
// new map, prev is not modified.
func (c decideConfig) observe(prev map[string]manifest.InputState, files []fileObs, now time.Time) map[string]manifest.InputState {
	next := make(map[string]manifest.InputState, len(prev)+1)
	for k, v := range prev {
		next[k] = v
	}
	for _, f := range files {
		name := c.inputOf(f.key)
		st := next[name]
		if st.LastActive.IsZero() {
			st.MaxEventTime = math.MinInt64
		}
		st.LastActive = now
		st.MaxEventTime = max(st.MaxEventTime, f.maxTS)
		next[name] = st
	}
	return next
}

// watermark computes the combined watermark: the minimum over active inputs
// of max event time - max_out_of_orderness. Inputs idle longer than the idle
// timeout do not hold it back, unless files of theirs are waiting; an input
// with files waiting whose event times are unknown holds it where it is
// (prev). It never goes backwards.
func (c decideConfig) watermark(inputs map[string]manifest.InputState, prev int64, now time.Time, waiting map[string]bool) int64 {
	wm, active := int64(math.MaxInt64), false
	maxAll := int64(math.MinInt64)
	for name, in := range inputs {
		if in.MaxEventTime == math.MinInt64 {
			continue
		}
		ooo := c.ooo.Microseconds()
		if d, ok := c.oooOf[name]; ok {
			ooo = d.Microseconds() // a graph's named source
		}
		v := in.MaxEventTime - ooo
		maxAll = max(maxAll, v)
		if c.idle > 0 && now.Sub(in.LastActive) >= c.idle && !waiting[name] {
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
type epochDecision struct {
	inputs    map[string]manifest.InputState
	watermark int64
	// commit is false for an idle epoch (no files) whose watermark did not
	// move: there is nothing to record.
	commit bool
}

// decide returns the inputs, the watermark and whether to commit after an
// epoch that read files (none for an idle epoch) at now, with pend[taken:]
// still waiting. drain advances the watermark to +inf.
func (c decideConfig) decide(inputs map[string]manifest.InputState, prevWM int64, files []fileObs, now time.Time,
	pend []store.ObjectInfo, taken int, drain, idle bool) epochDecision {
	d := epochDecision{inputs: c.observe(inputs, files, now)}
	d.watermark = c.watermark(d.inputs, prevWM, now, c.waiting(pend, taken))
	if drain {
		d.watermark = math.MaxInt64
	}
	d.commit = !idle || d.watermark != prevWM
	return d
}

// inputWatermarks returns, for each named input (a graph's sources), the
// watermark the inputs' own progress gives, by the same rule as the
// combined one (prev, the combined previous watermark, as the floor): what
// a stage that reads only some inputs may advance to. drain gives +inf.
func (c decideConfig) inputWatermarks(inputs map[string]manifest.InputState, prev int64, now time.Time,
	pend []store.ObjectInfo, taken int, drain bool, names []string) map[string]int64 {
	waiting := c.waiting(pend, taken)
	out := make(map[string]int64, len(names))
	for _, n := range names {
		if drain {
			out[n] = math.MaxInt64
			continue
		}
		sub := map[string]manifest.InputState{}
		if in, ok := inputs[n]; ok {
			sub[n] = in
		}
		out[n] = c.watermark(sub, prev, now, map[string]bool{n: waiting[n]})
	}
	return out
}
