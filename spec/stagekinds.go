package spec

import (
	"fmt"
	"strings"
	"time"
)

// The stage kinds, as the spec knows them: one entry per kind in
// stageKinds, the one place where decoding, defaults, validation, the
// watermark rule and the description of a stage look up what its kind
// does. Each kind's configuration is a field of Stage (its JSON form is
// part of the graph plan hash, so the fields stay as they are), decoded and
// validated by the functions its entry names.
//
// The engine's part of each kind (compile, column pruning, state layout,
// evolution, inspection) is registered in engine/internal/dataflow, one
// file per kind (kind_<name>.go). Adding a stage kind is: its Stage field
// and configuration type, an entry here, a kind file there, and its
// operator. A test of dataflow (TestKindTablesAgree) fails when the two
// tables do not name the same kinds, or disagree on which are keyed.

// stageKind is what the spec knows of one stage kind.
type stageKind struct {
	name string
	// set reports whether st's field of this kind is set.
	set func(st *Stage) bool
	// decode decodes the value v of the stage's field of this kind at
	// path (sp.<name>) into st.
	decode func(d *decoder, v *node, path, sp string, st *Stage)
	// defaults fills the kind's defaults (SetDefaults); nil: none.
	defaults func(st *Stage)
	// validate checks the kind's settings at path on their own (their
	// columns are checked when the plan is compiled).
	validate func(c *collector, path string, st *Stage)
	// check, when set, checks the stage (stages[i] of p) against the rest
	// of the graph, after every stage was validated on its own.
	check func(p *Pipeline, c *collector, i int)
	// inputs is how many upstreams the stage reads: 2 (left, right) or 1.
	inputs int
	// keyed: a stage of this kind keeps state by key (the engine routes
	// its rows by key group) and finds rows late, so it may set late_url.
	keyed bool
	// operator: also an operator of the linear form (operators:).
	operator bool
	// eventTime returns the event-time column of the stage's rows, "" =
	// its first input's (Graph.EventTime); nil: always its input's.
	eventTime func(st *Stage) string
	// delay is the stage's WatermarkDelay; nil: 0.
	delay func(st *Stage) time.Duration
	// describe is what the stage does, for Graph.Describe.
	describe func(g *Graph, st *Stage) string
	// reads, when set, returns a location the stage reads (a lookup's
	// table) and its field path under the stage ("lookup.url").
	reads func(st *Stage) (url, field string)
}

// stageKinds lists every stage kind, in documentation order (StageKinds).
// It is set by init: its hooks look kinds up (Graph.EventTime).
var stageKinds []*stageKind

func init() {
	stageKinds = kindTable()
	StageKinds = kindNames(func(*stageKind) bool { return true })
	operatorKinds = kindNames(func(k *stageKind) bool { return k.operator })
	stageFields = append([]string{"name", "input", "inputs", "late_url"}, StageKinds...)
}

func kindTable() []*stageKind {
	return []*stageKind{
		{
			name: KindFilter, operator: true, inputs: 1,
			set: func(st *Stage) bool { return st.Filter != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Filter = d.filter(v, path)
			},
			validate: func(c *collector, path string, st *Stage) { checkExpr(c, path, st.Filter.Expr) },
			describe: func(_ *Graph, st *Stage) string { return "filter " + excerpt(st.Filter.Expr) },
		},
		{
			name: KindProject, operator: true, inputs: 1,
			set: func(st *Stage) bool { return st.Project != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Project = d.project(v, path)
			},
			validate: func(c *collector, path string, st *Stage) { validateProject(c, path, st.Project) },
			describe: describeProject,
		},
		{
			name: KindWindow, operator: true, inputs: 1, keyed: true,
			set: func(st *Stage) bool { return st.Window != nil },
			decode: func(d *decoder, v *node, path, sp string, st *Stage) {
				var op Operator
				st.Window = d.window(v, path, &op, sp)
				if op.ID != "" {
					ip := join(path, "id")
					d.c.decodeErr(d.o.at(ip), ip, "a stage's id is its name; leave window.id out")
				}
			},
			validate:  func(c *collector, path string, st *Stage) { validateWindow(c, path, st.Window) },
			eventTime: func(*Stage) string { return WindowEventTime },
			delay:     func(st *Stage) time.Duration { return st.Window.AllowedLateness },
			describe:  describeWindowStage,
		},
		{
			name: KindJoin, inputs: 2, keyed: true,
			set: func(st *Stage) bool { return st.Join != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Join = d.joinStage(v, path)
			},
			defaults: func(st *Stage) {
				if st.Join.Type == "" {
					st.Join.Type = JoinInner
				}
			},
			validate: func(c *collector, path string, st *Stage) { validateJoin(c, path, st.Join) },
			eventTime: func(st *Stage) string {
				if st.Join.Window != nil {
					return WindowEventTime
				}
				return st.Join.LeftTime
			},
			delay: func(st *Stage) time.Duration {
				if j := st.Join; j.Interval != nil {
					return j.AllowedLateness + max(j.Interval.Upper, 0)
				}
				return st.Join.AllowedLateness // a windowed join's rows are stamped by window_end
			},
			describe: describeJoin,
		},
		{
			name: KindLookup, inputs: 1,
			set: func(st *Stage) bool { return st.Lookup != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Lookup = d.lookupStage(v, path)
			},
			defaults: func(st *Stage) {
				l := st.Lookup
				if l.Type == "" {
					l.Type = JoinInner
				}
				if l.Format == CSV && l.CSV == nil {
					l.CSV = &CSVOptions{Header: true, Delimiter: ","}
				}
			},
			validate: func(c *collector, path string, st *Stage) { validateLookup(c, path, st.Lookup) },
			describe: func(_ *Graph, st *Stage) string {
				l := st.Lookup
				return fmt.Sprintf("lookup %s on %s in %s %s", l.Type, onList(l.LeftKeys, l.RightKeys), l.Format, l.URL)
			},
			reads: func(st *Stage) (string, string) { return st.Lookup.URL, KindLookup + ".url" },
		},
		{
			name: KindTopN, inputs: 1, keyed: true,
			set: func(st *Stage) bool { return st.TopN != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.TopN = d.topNStage(v, path)
			},
			validate: func(c *collector, path string, st *Stage) { validateTopN(c, path, st.TopN) },
			check:    checkTopNInput,
			delay:    func(st *Stage) time.Duration { return st.TopN.AllowedLateness + st.TopN.Tumbling },
			describe: describeTopN,
		},
		{
			name: KindDedup, inputs: 1, keyed: true,
			set: func(st *Stage) bool { return st.Dedup != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Dedup = d.dedupStage(v, path)
			},
			defaults: func(st *Stage) {
				if st.Dedup.Keep == "" {
					st.Dedup.Keep = KeepFirst
				}
			},
			validate: func(c *collector, path string, st *Stage) { validateDedup(c, path, st.Dedup) },
			delay: func(st *Stage) time.Duration {
				if st.Dedup.Keep == KeepLast {
					return st.Dedup.AllowedLateness + st.Dedup.Within
				}
				return st.Dedup.AllowedLateness
			},
			describe: describeDedup,
		},
		{
			name: KindOver, inputs: 1, keyed: true,
			set: func(st *Stage) bool { return st.Over != nil },
			decode: func(d *decoder, v *node, path, _ string, st *Stage) {
				st.Over = d.overStage(v, path)
			},
			validate: func(c *collector, path string, st *Stage) { validateOver(c, path, st.Over) },
			delay:    func(st *Stage) time.Duration { return st.Over.AllowedLateness },
			describe: describeOver,
		},
	}
}

// StageKinds lists every stage kind, in documentation order.
var StageKinds []string

// operatorKinds are the kinds the linear form's operators may have.
var operatorKinds []string

func kindNames(keep func(*stageKind) bool) []string {
	var out []string
	for _, k := range stageKinds {
		if keep(k) {
			out = append(out, k.name)
		}
	}
	return out
}

// kindNamed returns the kind named name, or nil.
func kindNamed(name string) *stageKind {
	for _, k := range stageKinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// setKinds returns the kinds whose fields s sets, in stageKinds order.
func (s *Stage) setKinds() []*stageKind {
	var out []*stageKind
	for _, k := range stageKinds {
		if k.set(s) {
			out = append(out, k)
		}
	}
	return out
}

// kind returns s's kind, or nil when none or several are set.
func (s *Stage) kind() *stageKind {
	if ks := s.setKinds(); len(ks) == 1 {
		return ks[0]
	}
	return nil
}

// Kind returns one of StageKinds, or "" when none or several are set.
func (s Stage) Kind() string {
	if k := s.kind(); k != nil {
		return k.name
	}
	return ""
}

// Stateless reports whether the stage is of a kind that maps each batch on
// its own (a filter, project or lookup stage); false when its kind is not
// one.
func (s Stage) Stateless() bool {
	k := s.kind()
	return k != nil && !k.keyed
}

// KeyedKind reports whether stages of kind keep state by key; false for a
// kind that is not one of StageKinds.
func KeyedKind(kind string) bool {
	k := kindNamed(kind)
	return k != nil && k.keyed
}

// lateKinds names the kinds that find rows late, for messages: "window,
// join, top_n, dedup and over".
func lateKinds() string {
	ks := kindNames(func(k *stageKind) bool { return k.keyed })
	if len(ks) < 2 {
		return strings.Join(ks, "")
	}
	return strings.Join(ks[:len(ks)-1], ", ") + " and " + ks[len(ks)-1]
}

// operatorOf is the stage an operator of the linear form is, for the
// kinds' hooks (no name, no inputs).
func operatorOf(op Operator) *Stage {
	return &Stage{Filter: op.Filter, Project: op.Project, Window: op.Window}
}
