package dataflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/operators"
	"github.com/floe-dev/floe/spec"
)

// A join stage pairs the rows of its two inputs (left, right) on equal keys
// within an interval or a window (operators.Join). A windowed join's
// results are window results (graphwin.go); its input is narrowed by the
// pruned compile; floe state shows the rows of each side it buffers.
func init() {
	register(&kind{
		name: spec.KindJoin, stateful: true, narrows: true,
		compile: compileJoin,
		needs: func(c *needsCtx) {
			j := c.st.Join
			c.ins[0].addAll(j.LeftKeys...)
			c.ins[0].addAll(c.timeOr(j.LeftTime, 0))
			c.ins[1].addAll(j.RightKeys...)
			c.ins[1].addAll(c.timeOr(j.RightTime, 1))
			c.bounds(0)
			c.bounds(1)
			prefix := j.RightPrefix
			if prefix == "" {
				prefix = operators.DefaultRightPrefix
			}
			sideNeeds(c.n.Ins[0].Out, c.n.Ins[1].Out, prefix, c.out, c.ins[0], c.ins[1])
		},
		held: func(st *spec.Stage) *HeldRows {
			j := st.Join
			sides := []string{"left.", "right."}
			h := &HeldRows{Keys: slices.Clone(j.LeftKeys), Sides: sides,
				// A buffered row is its side and its values (the n-th of
				// equal rows): its arrival sequence is renumbered by a
				// rescale.
				Ident: []string{"side"}, Sort: []string{"side", "seq"}, Seq: "seq"}
			for side, ks := range [][]string{j.LeftKeys, j.RightKeys} {
				var cols []string
				for _, k := range ks {
					cols = append(cols, sides[side]+k)
				}
				h.SideKeys = append(h.SideKeys, cols)
			}
			return h
		},
		header: func(st *spec.Stage) string {
			j := st.Join
			typ := "inner"
			if j.Type == spec.JoinLeft {
				typ = "left"
			}
			var cond string
			switch {
			case j.Interval != nil:
				cond = fmt.Sprintf("interval [-%s, +%s]", j.Interval.Lower, j.Interval.Upper)
			case j.Window != nil && j.Window.Sliding != nil:
				cond = fmt.Sprintf("window sliding %s every %s", j.Window.Sliding.Size, j.Window.Sliding.Slide)
			case j.Window != nil:
				cond = fmt.Sprintf("window tumbling %s", j.Window.Tumbling)
			}
			return fmt.Sprintf("%s join on [%s] = [%s], %s, allowed lateness %s", typ,
				strings.Join(j.LeftKeys, ", "), strings.Join(j.RightKeys, ", "), cond, j.AllowedLateness)
		},
	})
}

func compileJoin(c *stageCompile) error {
	n, st, k := c.n, c.st, c.k
	j := st.Join
	js := operators.JoinSpec{ID: n.Name, Type: operators.InnerJoin, LeftKeys: j.LeftKeys, RightKeys: j.RightKeys,
		LeftTime: j.LeftTime, RightTime: j.RightTime, AllowedLateness: j.AllowedLateness, RightPrefix: j.RightPrefix}
	if j.Type == spec.JoinLeft {
		js.Type = operators.LeftJoin
	}
	js.LeftTime, js.RightTime = c.timeOr(js.LeftTime, 0), c.timeOr(js.RightTime, 1)
	switch {
	case j.Interval != nil:
		js.Interval = &operators.JoinInterval{Lower: j.Interval.Lower, Upper: j.Interval.Upper}
	case j.Window != nil && j.Window.Tumbling > 0:
		js.Window = &operators.JoinWindow{Kind: operators.Tumbling, Size: j.Window.Tumbling}
	case j.Window != nil && j.Window.Sliding != nil:
		js.Window = &operators.JoinWindow{Kind: operators.Sliding, Size: j.Window.Sliding.Size, Slide: j.Window.Sliding.Slide}
	}
	in, right := c.in(0), c.in(1)
	if js.Window != nil { // a windowed join's results are window results
		n.windows, n.window, n.fixedWindow = true, shapeOfJoin(j.Window), true
	}
	newOp := func() (operators.Stateful, error) { return operators.NewJoin(js, in, right, k) }
	carry, err := ownWindowSides(j, n.Ins)
	if err != nil {
		return err
	}
	o := hiddenOpts{ends: []string{"", ""}, carry: carry[:]}
	hs := js
	times := [2]*string{&hs.LeftTime, &hs.RightTime}
	for side := range 2 {
		switch {
		case carry[side]:
			// Results of the join's own window: paired in their
			// window, whose bounds the output shows once.
			o.ends[side], *times[side] = spec.WindowEventTime, HiddenTime
		case *times[side] == spec.WindowEventTime && readsWindowResults(n.Ins[side]):
			o.ends[side], *times[side] = spec.WindowEventTime, HiddenTime
		}
	}
	if carry[0] || carry[1] {
		w := shapeOfJoin(j.Window)
		// Buckets one slide long ending where the windows end hold
		// one window's results each (for tumbling windows, the
		// windows themselves).
		hs.Window = &operators.JoinWindow{Kind: operators.Tumbling, Size: w.slide}
		if w.slide != w.size {
			o.fixStart = w.size
		}
	} else {
		o.carry = nil
	}
	if o.ends[0] != "" || o.ends[1] != "" {
		// A side of window results is timed window_end - 1µs (graphwin.go).
		newOp = func() (operators.Stateful, error) {
			return newHiddenTimeOp([]*arrow.Schema{in, right}, o, func(exts []*arrow.Schema) (operators.Stateful, error) {
				return operators.NewJoin(hs, exts[0], exts[1], k)
			})
		}
	}
	return c.keyed(newOp)
}
