package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
)

// maxSegments bounds the segment references one manifest carries; past it
// the log is compacted into one segment, so a manifest stays small however
// many files a pipeline has processed.
const maxSegments = 32

// segLog is an append-only set of strings (processed source files, committed
// output paths) persisted as attempt-tagged segment files that later
// manifests share by root-relative reference (DESIGN.md invariant 4).
type segLog struct {
	name    string
	inline  int // keep up to this many entries inline in the manifest
	entries []string
	set     map[string]bool
	segs    []manifest.FileRef
	pending []string
	inlined bool // entries live inline in the manifest, not in segs
}

func newSegLog(name string, inline int) *segLog {
	return &segLog{name: name, inline: inline, set: map[string]bool{}}
}

// load reads a committed log: inline entries and verified segments.
func (l *segLog) load(ctx context.Context, c *epoch.Committer, inline []string, segs []manifest.FileRef) error {
	for _, s := range inline {
		l.add(s)
	}
	l.inlined = len(inline) > 0
	for _, ref := range segs {
		data, err := c.ReadFile(ctx, ref)
		if err != nil {
			return fmt.Errorf("%s log: %w", l.name, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line != "" {
				l.add(line)
			}
		}
	}
	l.segs = append([]manifest.FileRef(nil), segs...)
	l.pending = nil
	return nil
}

func (l *segLog) add(s string) {
	if !l.set[s] {
		l.set[s] = true
		l.entries = append(l.entries, s)
	}
}

func (l *segLog) has(s string) bool { return l.set[s] }

// append records new entries for the epoch being written.
func (l *segLog) append(s ...string) {
	for _, x := range s {
		if !l.set[x] {
			l.add(x)
			l.pending = append(l.pending, x)
		}
	}
}

// flush writes this epoch's segment (or a compacted one) and returns what
// the manifest records: inline entries or segment references.
func (l *segLog) flush(ctx context.Context, att *epoch.Attempt) (inline []string, segs []manifest.FileRef, err error) {
	if len(l.entries) <= l.inline {
		l.pending = nil
		l.inlined = true
		return append([]string(nil), l.entries...), nil, nil
	}
	var data []string
	switch {
	case l.inlined || len(l.segs) >= maxSegments:
		data, l.segs = l.entries, nil // move inline entries out, or compact
	case len(l.pending) > 0:
		data = l.pending
	default:
		return nil, l.segs, nil
	}
	body := strings.Join(data, "\n") + "\n"
	ref, err := att.WriteSource(ctx, fmt.Sprintf("%s-%d.txt", l.name, len(l.entries)), []byte(body), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	l.segs = append(l.segs, ref)
	l.pending = nil
	l.inlined = false
	return nil, append([]manifest.FileRef(nil), l.segs...), nil
}
