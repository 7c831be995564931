package dataflow

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A window stage aggregates its input per key and window (operators.Window).
// Its results are window results (graphwin.go); its state evolves and
// migrates (EvolveGraph); floe state finalises it.
func init() {
	register(&kind{
		name: spec.KindWindow, stateful: true, finalised: true,
		compile: compileWindow,
		needs: func(c *needsCtx) {
			w := c.st.Window
			c.ins[0].addAll(w.Key...)
			c.ins[0].addAll(c.timeOr("", 0))
			for _, a := range w.Aggregates {
				c.ins[0].addAll(a.Column)
			}
			c.bounds(0)
		},
		orderSensitive: func(st *spec.Stage) bool {
			for _, a := range st.Window.Aggregates {
				if a.Func == spec.First || a.Func == spec.Last {
					return true
				}
			}
			return false
		},
		orderFree: windowOrderFree,
		dictKeys: func(n *Node) []string {
			w := n.spec.Window
			aggIn := colSet{}
			for _, a := range w.Aggregates {
				aggIn.addAll(a.Column)
			}
			var out []string
			for _, k := range w.Key {
				if !aggIn[k] {
					out = append(out, k)
				}
			}
			return out
		},
		evolve: evolveWindow,
	})
}

func compileWindow(c *stageCompile) error {
	n, st, in, k := c.n, c.st, c.in(0), c.k
	n.windows = true
	n.window, n.fixedWindow = shapeOfWindow(st.Window)
	ws, err := WindowSpec(n.Name, st.Window, c.timeOr("", 0))
	if err != nil {
		return err
	}
	newOp := func() (operators.Stateful, error) { return operators.NewWindow(ws, in, k) }
	own, err := OwnWindowKey(st.Window, n.Ins[0], ws.EventTime)
	switch {
	case err != nil:
		return err
	case own != nil:
		// Keyed by the input's window (issue 23): each input row is
		// aggregated in its own window, which is this stage's: the
		// operator runs on buckets one slide long that end where the
		// windows end, keyed by the other columns.
		hs := ws
		hs.Keys = slices.DeleteFunc(slices.Clone(ws.Keys), IsWindowBound)
		hs.Kind, hs.Size, hs.Slide, hs.EventTime = operators.Tumbling, own.slide, 0, HiddenTime
		o := hiddenOpts{ends: []string{spec.WindowEventTime}}
		if own.slide != own.size {
			o.fixStart = own.size
		}
		newOp = func() (operators.Stateful, error) {
			return newHiddenTimeOp([]*arrow.Schema{in}, o, func(exts []*arrow.Schema) (operators.Stateful, error) {
				return operators.NewWindow(hs, exts[0], k)
			})
		}
	case ws.EventTime == spec.WindowEventTime && readsWindowResults(n.Ins[0]):
		// Window results are stamped window_end - 1µs (graphwin.go).
		hs := ws
		hs.EventTime = HiddenTime
		newOp = func() (operators.Stateful, error) {
			return newHiddenTimeOp([]*arrow.Schema{in}, hiddenOpts{ends: []string{ws.EventTime}}, func(exts []*arrow.Schema) (operators.Stateful, error) {
				return operators.NewWindow(hs, exts[0], k)
			})
		}
	}
	return c.keyed(newOp)
}

// windowOrderFree reports whether n is a window whose results, state and
// output do not depend on the order of its input rows within an epoch:
// tumbling or sliding, no late_url (late rows are written as they come),
// and only aggregates whose value is the same in any order (count,
// count_distinct; sum, avg, min and max of integers and timestamps, min
// and max of strings; not first or last, and not over floats, whose sums
// round by order and whose min and max pick one of -0 and +0 by arrival).
func windowOrderFree(n *Node) bool {
	if n.spec == nil || n.spec.Window == nil || n.LateURL != "" || len(n.Ins) != 1 {
		return false
	}
	w := n.spec.Window
	if w.Session != nil || w.Kind() == "" {
		return false
	}
	in := n.Ins[0].Out
	for _, a := range w.Aggregates {
		switch a.Func {
		case spec.Count, spec.CountDistinct:
			continue
		case spec.Sum, spec.Avg, spec.Min, spec.Max:
		default:
			return false
		}
		if in == nil {
			return false
		}
		idx := in.FieldIndices(a.Column)
		if len(idx) != 1 {
			return false
		}
		switch in.Field(idx[0]).Type.ID() {
		case arrow.INT32, arrow.INT64, arrow.TIMESTAMP:
		case arrow.STRING:
			if a.Func != spec.Min && a.Func != spec.Max {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// evolveWindow is the linear window's evolution per stage
// (operators.PlanStateEvolution from the recorded state plan). A window
// behind the hidden-time operator (graphwin.go) evolves like any other as
// long as its time rule (what timeRule appends to the fingerprint) is the
// one the state was written under: the rule decides which window a row
// belongs to, so state written under another one is refused.
func evolveWindow(nd *Node, prev, o manifest.OpPlan) (*StageMigration, error) {
	op, err := nd.NewOp()
	if err != nil {
		return nil, fmt.Errorf("operator %q: %w", o.ID, err)
	}
	w := WindowOf(op)
	if w == nil {
		return nil, nil
	}
	oldSpec, oldIn, err := operators.UnmarshalStatePlan([]byte(prev.StatePlan))
	if err != nil {
		return nil, fmt.Errorf("operator %q: the recorded state plan cannot be read: %w", o.ID, err)
	}
	ow, err := operators.NewWindow(oldSpec, oldIn, 1)
	if err != nil {
		return nil, fmt.Errorf("operator %q: the recorded state plan: %w", o.ID, err)
	}
	if rule := timeRule(op); prev.StateSchema != ow.StateFingerprint()+rule {
		return nil, fmt.Errorf("operator %q changed how it times its input rows (%s -> %s): its state cannot be migrated; "+
			"start a new pipeline name to recompute from the input", o.ID, prev.StateSchema, o.StateSchema)
	}
	ev, err := operators.PlanStateEvolution(oldSpec, w.StateSpec(), oldIn, plainSchema(w.InputSchema()))
	if err != nil {
		return nil, fmt.Errorf("operator %q: %w", o.ID, err)
	}
	if !ev.Compatible() {
		return nil, fmt.Errorf("operator %q: %w", o.ID, ev.Err())
	}
	return &StageMigration{Ev: ev}, nil
}
