package dataflow

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/manifest"
)

// StateMigration is one registered step that converts an operator's state
// from one state format version to another, for a state layout change floe
// cannot migrate by itself (Options.Migrations). A state format version is
// the prefix of the operator's state fingerprint ("v1" of "v1-a4d0..."),
// which operators bump whenever the layout changes.
//
// Migrate receives each state batch (base files and upserted windows of
// deltas; tombstones identify windows by key and bounds and are passed
// through) in the From layout and returns it in the To layout; it must not
// keep or release its input. The result of the whole chain must have the
// new operator's state schema exactly, or the restore fails naming the
// operator. Migrate is called concurrently (subtasks restore in parallel).
type StateMigration struct {
	Kind     string // operator kind, e.g. "window"
	From, To string // state format versions, e.g. "v1", "v2"
	Migrate  func(arrow.RecordBatch) (arrow.RecordBatch, error)
}

// stateVersion is a state fingerprint's format version ("v1-..." → "v1").
func stateVersion(fingerprint string) string {
	v, _, _ := strings.Cut(fingerprint, "-")
	return v
}

// migrationChain plans, for the window operator, a chain of registered
// migrations from the recorded state format version to the plan's: nil
// when the versions agree (evolve decides then), an error naming the
// missing step when no chain exists. Shortest chain first, then by the
// order of registration.
func migrationChain(old []manifest.OpPlan, pl *Plan, regs []StateMigration) ([]StateMigration, error) {
	if pl.window == nil {
		return nil, nil
	}
	return chainOf(old, pl.Ops, pl.window.ID, regs)
}

// chainOf is migrationChain for operator id of the plan's operators ops
// (a graph window stage's, too).
func chainOf(old, ops []manifest.OpPlan, id string, regs []StateMigration) ([]StateMigration, error) {
	var prev, cur *manifest.OpPlan
	for i := range old {
		if old[i].ID == id {
			prev = &old[i]
		}
	}
	for i := range ops {
		if ops[i].ID == id {
			cur = &ops[i]
		}
	}
	if prev == nil || cur == nil || prev.Kind != cur.Kind {
		return nil, nil // compatible() names the problem
	}
	from, to := stateVersion(prev.StateSchema), stateVersion(cur.StateSchema)
	if from == to {
		return nil, nil
	}
	// Breadth-first over the registered edges of this kind.
	type node struct {
		v     string
		chain []StateMigration
	}
	seen := map[string]bool{from: true}
	queue := []node{{v: from}}
	var edges []string
	for _, m := range regs {
		if m.Kind == cur.Kind {
			edges = append(edges, m.From+"→"+m.To)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range regs {
			if m.Kind != cur.Kind || m.From != n.v || seen[m.To] || m.Migrate == nil {
				continue
			}
			chain := append(append([]StateMigration(nil), n.chain...), m)
			if m.To == to {
				return chain, nil
			}
			seen[m.To] = true
			queue = append(queue, node{v: m.To, chain: chain})
		}
	}
	sort.Strings(edges)
	reg := "none"
	if len(edges) > 0 {
		reg = strings.Join(edges, ", ")
	}
	return nil, fmt.Errorf("operator %q: its state is in format %s, this release's %s state is format %s, and no chain of registered migrations leads from %s to %s (registered for %s: %s); "+
		"register the missing steps (engine.Options.Migrations), or drop the state with `floe run --reset-state --yes`, or start a new pipeline name",
		cur.ID, from, cur.Kind, to, from, to, cur.Kind, reg)
}

// DescribeChain renders a chain: "state format v1 → v2 → v3 through registered migrations".
func DescribeChain(chain []StateMigration) string {
	parts := []string{chain[0].From}
	for _, m := range chain {
		parts = append(parts, m.To)
	}
	return "state format " + strings.Join(parts, " → ") + " through registered migrations"
}
