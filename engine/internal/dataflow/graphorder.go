package dataflow

import "slices"

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

// orderFree reports whether n is a keyed stage whose results, state and
// output do not depend on the order of its input rows within an epoch
// (its kind's orderFree: a window of order-free aggregates).
func (n *Node) orderFree() bool {
	k := kinds[n.Kind]
	return k != nil && k.orderFree != nil && k.orderFree(n)
}

// FiltersAfter returns the filters n's rows go through first, in order:
// each the only reader of the node before it, which nothing but that filter
// reads and no sink writes. A filter keeps the order of the rows it passes
// and CanonicalOrder is a stable sort on the values, so sorting the rows
// these filters pass gives the order they would pass of n's sorted rows:
// the runner sorts (and gathers) after them, fewer rows (Nexmark q9: a
// quarter fewer, of 1.8M wide rows).
func (gp *GraphPlan) FiltersAfter(n *Node) []*Node {
	written := map[*Node]bool{gp.Sink: true}
	for _, x := range gp.Extra {
		written[x] = true
	}
	var chain []*Node
	for cur := n; !written[cur]; {
		var readers []*Node
		for _, r := range gp.Nodes {
			if slices.Contains(r.Ins, cur) {
				readers = append(readers, r)
			}
		}
		if len(readers) != 1 {
			break
		}
		f := readers[0]
		if f.Stage == nil || f.Stage.Filter == nil || f.Stage.proj != nil || f.AtDecode || len(f.Ins) != 1 {
			break
		}
		chain = append(chain, f)
		cur = f
	}
	return chain
}
