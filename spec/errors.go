package spec

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error Parse, Load and Validate
// return for a spec that is wrong, as opposed to one that could not be read.
var ErrInvalid = errors.New("invalid pipeline spec")

// maxErrors caps how many problems one Errors reports.
const maxErrors = 50

// Pos is a 1-based line and column in a spec file; zero when unknown.
type Pos struct {
	Line, Column int
}

// FieldError is one problem in a spec.
type FieldError struct {
	// File is the spec file name; empty for pipelines built in Go.
	File string
	// Pos is where the offending value (or its enclosing mapping, for a
	// missing field) starts; zero when unknown.
	Pos Pos
	// Path is the field path, e.g. "operators[1].window.tumbling"; empty
	// for problems with the document as a whole.
	Path string
	// Msg says what is wrong and, where it can, how to fix it.
	Msg string
}

// Error formats "file:line:col: path: msg", leaving out what is unknown.
// The path and message are made one line of bounded length (Parse and
// Validate word them so already; this also covers FieldErrors built by
// hand).
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Pos.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Pos.Line, e.Pos.Column)
		}
		b.WriteString(": ")
	} else if e.Pos.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Pos.Line, e.Pos.Column)
	}
	if e.Path != "" {
		b.WriteString(oneLine(e.Path, maxPathLen))
		b.WriteString(": ")
	}
	b.WriteString(oneLine(e.Msg, maxMsgLen))
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found in one spec, sorted by position.
type Errors []*FieldError

// Error joins the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual problems (for errors.Is / errors.As).
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Is reports whether target is ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// collector gathers problems. A value that failed to decode suppresses
// follow-on problems for its path and everything under it (a bad duration
// would otherwise also be "must be > 0"); a validation problem suppresses
// only further problems for exactly its path.
type collector struct {
	file     string
	origin   *origin
	errs     Errors
	failed   map[string]bool // paths whose value failed to decode
	reported map[string]bool // paths with a problem already
	more     int
}

func newCollector(o *origin) *collector {
	c := &collector{origin: o, failed: map[string]bool{}, reported: map[string]bool{}}
	if o != nil {
		c.file = o.file
	}
	return c
}

// hasFailed reports whether path or one of its ancestors failed to decode,
// or path already has a problem.
func (c *collector) hasFailed(path string) bool {
	if c.reported[path] {
		return true
	}
	for p := path; ; p = parentPath(p) {
		if c.failed[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// decodeErr records a value that failed to decode, at its position.
func (c *collector) decodeErr(pos Pos, path, format string, args ...any) {
	if c.hasFailed(path) {
		return
	}
	c.failed[path] = true
	c.record(pos, path, format, args...)
}

// add records a validation problem at the recorded position of path (or
// of its nearest recorded ancestor).
func (c *collector) add(path, format string, args ...any) {
	if c.hasFailed(path) {
		return
	}
	c.record(c.origin.at(path), path, format, args...)
}

func (c *collector) record(pos Pos, path, format string, args ...any) {
	c.reported[path] = true
	if len(c.errs) >= maxErrors {
		c.more++
		return
	}
	c.errs = append(c.errs, &FieldError{File: c.file, Pos: pos, Path: oneLine(path, maxPathLen), Msg: message(format, args...)})
}

// err returns the collected problems sorted by position, or nil.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool {
		a, b := c.errs[i].Pos, c.errs[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := c.errs
	if c.more > 0 {
		out = append(out[:len(out):len(out)], &FieldError{File: c.file, Msg: fmt.Sprintf("... and %d more problems", c.more)})
	}
	return out
}

// origin remembers where a parsed pipeline came from.
type origin struct {
	file string
	pos  map[string]Pos
}

// at returns the position of path, falling back to its nearest ancestor.
func (o *origin) at(path string) Pos {
	if o == nil {
		return Pos{}
	}
	for p := path; ; p = parentPath(p) {
		if pos, ok := o.pos[p]; ok {
			return pos
		}
		if p == "" {
			return Pos{}
		}
	}
}

// parentPath strips the last element of a field path:
// "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// Where returns "file:line:col: path" for a field path of a parsed spec
// (e.g. "operators[1].filter"), or just the path for pipelines built in Go.
// Engines use it to place errors found after parsing (expression type
// errors) where the user wrote the field.
func (p *Pipeline) Where(path string) string {
	if p.origin == nil {
		return path
	}
	pos := p.origin.at(path)
	if pos.Line == 0 {
		return p.origin.file + ": " + path
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.origin.file, pos.Line, pos.Column, path)
}
