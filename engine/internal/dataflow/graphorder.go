package dataflow

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/spec"
)

// markCanonical sets Canonical on the nodes whose rows are handed on in
// an order of their values (operators.CanonicalOrder): the keyed stages
// whose rows reach, through stateless stages, a reader whose result or
// output can depend on the order the rows arrive in. A keyed stage whose
// rows only reach windows that are indifferent to that order (see
// orderFree) hands them on as its subtasks produced them: the sort would
// change nothing those windows write.
func (gp *GraphPlan) markCanonical() {
	readers := map[*Node][]*Node{}
	for _, n := range gp.Nodes {
		for _, in := range n.Ins {
			readers[in] = append(readers[in], n)
		}
	}
	written := map[*Node]bool{gp.Sink: true}
	for _, n := range gp.Extra {
		written[n] = true
	}
	var ordered func(n *Node, seen map[*Node]bool) bool
	ordered = func(n *Node, seen map[*Node]bool) bool {
		if written[n] {
			return true // a sink writes the rows in the order they come
		}
		for _, r := range readers[n] {
			if seen[r] {
				continue
			}
			seen[r] = true
			switch {
			case !r.Stateful:
				if ordered(r, seen) {
					return true
				}
			case !r.orderFree():
				return true
			}
		}
		return false
	}
	for _, n := range gp.Nodes {
		n.Canonical = n.Stateful && n.FeedsKeyed && ordered(n, map[*Node]bool{})
	}
}

// orderFree reports whether n is a window whose results, state and output
// do not depend on the order of its input rows within an epoch: tumbling
// or sliding, no late_url (late rows are written as they come), and only
// aggregates whose value is the same in any order (count, count_distinct;
// sum, avg, min and max of integers and timestamps, min and max of
// strings; not first or last, and not over floats, whose sums round by
// order and whose min and max pick one of -0 and +0 by arrival).
func (n *Node) orderFree() bool {
	if n.Kind != spec.KindWindow || n.spec == nil || n.spec.Window == nil || n.LateURL != "" || len(n.Ins) != 1 {
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
