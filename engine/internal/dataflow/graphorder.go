package dataflow

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
