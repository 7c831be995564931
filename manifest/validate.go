package manifest

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/floe-dev/floe/keygroup"
)

// Limits enforced by validation.
const (
	// MaxRefLen bounds a file reference (S3's key limit is 1024 bytes).
	MaxRefLen = 1024
	// MaxNameLen bounds a pipeline name.
	MaxNameLen = 128
)

// Side-output kinds (FileRef.Kind of Manifest.SideOutputs).
const (
	SideOutputLate     = "late"
	SideOutputRejected = "rejected"
)

// ValidateRef checks a file reference. A relative reference must be a clean
// slash-separated path: not empty, no leading "/", no empty, "." or ".."
// segment, no backslash, no control character, valid UTF-8, at most
// MaxRefLen bytes. When allowAbsolute is true the reference may instead be an
// absolute URL with a scheme ("s3://bucket/key", "file:///dir/f",
// "gs://..."), whose path obeys the same segment rules. Errors wrap
// ErrCorrupt.
func ValidateRef(ref string, allowAbsolute bool) error {
	if msg := checkRef(ref, allowAbsolute); msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

// ValidateOpID checks an operator ID: 1 to MaxOpIDLen characters from
// [a-z0-9_-], so that it is safe inside an object key. Errors wrap
// ErrCorrupt.
func ValidateOpID(id string) error {
	if msg := checkOpID(id); msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

// ValidateAttempt checks that s is a canonical lowercase UUID
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as uuid.UUID.String writes it).
// Errors wrap ErrCorrupt.
func ValidateAttempt(s string) error {
	if msg := checkAttempt(s); msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

// ValidateChecksum checks the form "sha256:<64 lowercase hex digits>".
// Errors wrap ErrCorrupt.
func ValidateChecksum(s string) error {
	if msg := checkChecksum(s); msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

// ValidatePipelineName checks a pipeline name: 1 to MaxNameLen characters
// from [A-Za-z0-9._-], not starting with '.', so that it is one safe key
// segment. Errors wrap ErrCorrupt.
func ValidatePipelineName(name string) error {
	if msg := checkPipelineName(name); msg != "" {
		return &Error{Msg: msg}
	}
	return nil
}

func checkRef(ref string, allowAbsolute bool) string {
	if ref == "" {
		return "empty path"
	}
	if len(ref) > MaxRefLen {
		return fmt.Sprintf("path is %d bytes, longer than %d", len(ref), MaxRefLen)
	}
	if !utf8.ValidString(ref) {
		return fmt.Sprintf("%q is not valid UTF-8", ref)
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("%q contains a control character", ref)
		}
	}
	if strings.ContainsRune(ref, '\\') {
		return fmt.Sprintf("%q contains a backslash", ref)
	}
	if i := strings.Index(ref, "://"); i >= 0 && isScheme(ref[:i]) {
		if !allowAbsolute {
			return fmt.Sprintf("%q is an absolute URL; only a relative path is allowed here", ref)
		}
		return checkURL(ref)
	}
	if strings.HasPrefix(ref, "/") {
		return fmt.Sprintf("%q is an absolute path; want a path relative to the root", ref)
	}
	return checkSegments(ref, ref)
}

// checkRelative checks a root-relative path (no URL form).
func checkRelative(p string) string { return checkRef(p, false) }

func checkSegments(ref, p string) string {
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return fmt.Sprintf("%q has an empty path segment", ref)
		case ".":
			return fmt.Sprintf("%q has a \".\" segment", ref)
		case "..":
			return fmt.Sprintf("%q escapes the pipeline root", ref)
		}
	}
	return ""
}

func checkURL(ref string) string {
	u, err := url.Parse(ref)
	if err != nil {
		return fmt.Sprintf("%q is not a valid URL: %v", ref, err)
	}
	if u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return fmt.Sprintf("%q is not a plain object URL", ref)
	}
	p := strings.TrimPrefix(u.EscapedPath(), "/")
	if u.Host == "" && p == "" {
		return fmt.Sprintf("%q names no object", ref)
	}
	if p == "" {
		return fmt.Sprintf("%q names a bucket, not an object", ref)
	}
	if msg := checkSegments(ref, p); msg != "" {
		return msg
	}
	return ""
}

func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

func checkOpID(id string) string {
	if id == "" || len(id) > MaxOpIDLen {
		return fmt.Sprintf("operator id %q must be 1 to %d characters", id, MaxOpIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Sprintf("operator id %q may hold only a-z, 0-9, '-' and '_'", id)
		}
	}
	return ""
}

func checkAttempt(s string) string {
	ok := len(s) == 36
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			ok = c == '-'
		default:
			ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
		}
	}
	if !ok {
		return fmt.Sprintf("attempt %q is not a canonical lowercase UUID", s)
	}
	return ""
}

func checkChecksum(s string) string {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 || !isLowerHex(hex) {
		return fmt.Sprintf("checksum %q is not of the form sha256:<64 lowercase hex digits>", s)
	}
	return ""
}

func checkPipelineName(name string) string {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Sprintf("pipeline name %q must be 1 to %d characters", name, MaxNameLen)
	}
	if name[0] == '.' {
		return fmt.Sprintf("pipeline name %q must not start with '.'", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("pipeline name %q may hold only A-Z, a-z, 0-9, '.', '-' and '_'", name)
		}
	}
	return ""
}

// validator accumulates the first error of one document.
type validator struct {
	doc string
	err *Error
}

// fail records a field error unless one is already recorded.
func (v *validator) fail(field, format string, args ...any) {
	if v.err == nil {
		v.err = fieldErr(v.doc, field, fmt.Sprintf(format, args...))
	}
}

// check records msg (from a check* helper) when it is non-empty.
func (v *validator) check(field, msg string) {
	if msg != "" && v.err == nil {
		v.err = fieldErr(v.doc, field, msg)
	}
}

func (v *validator) result() error {
	if v.err == nil {
		return nil
	}
	return v.err
}

func (v *validator) version(got int) {
	if got < MinFormatVersion || got > FormatVersion {
		v.fail("format_version", "unsupported format version %d (this release reads %d to %d)", got, MinFormatVersion, FormatVersion)
	}
}

func (v *validator) positive(field string, n int64) {
	if n < 1 {
		v.fail(field, "%d must be >= 1", n)
	}
}

func (v *validator) nonNegative(field string, n int64) {
	if n < 0 {
		v.fail(field, "%d must be >= 0", n)
	}
}

// refKind says what a FileRef list holds; it selects the extra rules.
type refKind int

const (
	refState   refKind = iota // operator state: relative or URL, key-group range required
	refSegment                // source segment: relative or URL
	refOutput                 // sink output: relative to the sink root only
	refSide                   // side output: relative to the sink root or URL, kind late/rejected
	refDelta                  // operator state delta: as refState, kind upserts/tombstones
)

func (v *validator) fileRef(field string, r FileRef, kind refKind) {
	v.check(field+".path", checkRef(r.Path, kind != refOutput))
	v.nonNegative(field+".size", r.Size)
	v.check(field+".checksum", checkChecksum(r.Checksum))
	v.nonNegative(field+".rows", r.Rows)
	v.nonNegative(field+".subtask", int64(r.Subtask))
	if kind == refState || kind == refDelta || r.KeyGroupLo != 0 || r.KeyGroupHi != 0 {
		if r.KeyGroupLo < 0 || r.KeyGroupHi <= r.KeyGroupLo {
			v.fail(field+".kg_lo", "key-group range [%d, %d) must satisfy 0 <= kg_lo < kg_hi", r.KeyGroupLo, r.KeyGroupHi)
		}
		if r.KeyGroupHi > keygroup.Max {
			v.fail(field+".kg_hi", "%d exceeds the key-group limit %d", r.KeyGroupHi, keygroup.Max)
		}
	}
	if r.First != "" || r.Last != "" {
		switch {
		case kind != refSegment:
			v.fail(field+".first", "a key range is only allowed on log segments")
		case r.First == "" || r.Last == "" || r.First > r.Last:
			v.fail(field+".first", "key range [%q, %q] must have first <= last, both set", r.First, r.Last)
		}
	}
	switch kind {
	case refDelta:
		if r.Kind != DeltaUpserts && r.Kind != DeltaTombstones && r.Kind != DeltaMerges {
			v.fail(field+".kind", "delta kind %q must be %q, %q or %q", r.Kind, DeltaUpserts, DeltaTombstones, DeltaMerges)
		}
	case refSide:
		if r.Kind != SideOutputLate && r.Kind != SideOutputRejected {
			v.fail(field+".kind", "side-output kind %q must be %q or %q", r.Kind, SideOutputLate, SideOutputRejected)
		}
	default:
		if r.Kind != "" {
			v.fail(field+".kind", "kind %q is only allowed on side outputs", r.Kind)
		}
	}
}

func (v *validator) fileRefs(field string, refs []FileRef, kind refKind) {
	seen := make(map[string]int, len(refs))
	for i, r := range refs {
		f := field + "[" + strconv.Itoa(i) + "]"
		v.fileRef(f, r, kind)
		if j, dup := seen[r.Path]; dup {
			v.fail(f+".path", "%q is also %s[%d]", r.Path, field, j)
		}
		seen[r.Path] = i
	}
}

func (v *validator) ref(field string, r Ref) {
	v.positive(field+".generation", r.Generation)
	v.positive(field+".epoch", r.Epoch)
}

// Validate checks the pointer: supported version, positive generation and
// epoch, Manifest == ManifestPath(Generation, Epoch), canonical attempt.
// Errors are *Error values wrapping ErrCorrupt.
func (l *Latest) Validate() error {
	v := validator{doc: "latest pointer"}
	v.version(l.FormatVersion)
	v.positive("generation", l.Generation)
	v.positive("epoch", l.Epoch)
	if v.err == nil {
		if want := ManifestPath(l.Generation, l.Epoch); l.Manifest != want {
			v.fail("manifest", "%q does not match generation %d epoch %d (want %q)", l.Manifest, l.Generation, l.Epoch, want)
		}
	}
	v.check("attempt", checkAttempt(l.Attempt))
	return v.result()
}

// Validate checks a generation document: supported version, valid pipeline
// name, positive generation, a parent in an older generation, 1 <=
// parallelism <= max_parallelism <= keygroup.Max, a plan of distinct valid
// operator IDs with kinds and state schemas, a plan hash, a canonical
// attempt and a creation time. Errors are *Error values wrapping ErrCorrupt.
func (g *Generation) Validate() error {
	v := validator{doc: "generation"}
	v.version(g.FormatVersion)
	v.check("pipeline", checkPipelineName(g.Pipeline))
	v.positive("generation", g.Generation)
	if g.Parent != nil {
		v.ref("parent", *g.Parent)
		if g.Parent.Generation >= g.Generation {
			v.fail("parent.generation", "%d must be older than generation %d", g.Parent.Generation, g.Generation)
		}
	}
	v.positive("parallelism", int64(g.Parallelism))
	v.positive("max_parallelism", int64(g.MaxParallelism))
	if g.MaxParallelism > keygroup.Max {
		v.fail("max_parallelism", "%d exceeds the key-group limit %d", g.MaxParallelism, keygroup.Max)
	}
	if g.Workers < 0 || g.Workers > g.Parallelism {
		v.fail("workers", "%d: must be between 1 and the parallelism %d (absent: 1)", g.Workers, g.Parallelism)
	}
	if g.Parallelism > g.MaxParallelism {
		v.fail("parallelism", "%d exceeds max_parallelism %d", g.Parallelism, g.MaxParallelism)
	}
	seen := make(map[string]int, len(g.Plan))
	for i, op := range g.Plan {
		f := "plan[" + strconv.Itoa(i) + "]"
		v.check(f+".id", checkOpID(op.ID))
		if j, dup := seen[op.ID]; dup {
			v.fail(f+".id", "operator id %q is also plan[%d]", op.ID, j)
		}
		seen[op.ID] = i
		if op.Kind == "" {
			v.fail(f+".kind", "empty operator kind")
		}
		if op.StateSchema == "" {
			v.fail(f+".state_schema", "empty state schema fingerprint")
		}
	}
	if g.PlanHash == "" {
		v.fail("plan_hash", "empty plan hash")
	}
	if g.Identity != nil {
		g.Identity.validate(&v, "identity")
	}
	v.check("attempt", checkAttempt(g.Attempt))
	if g.CreatedAt.IsZero() {
		v.fail("created_at", "zero time")
	}
	return v.result()
}

// epochHeader checks what every document of one epoch's attempt starts
// with (a manifest, a workers' decision): supported version, valid pipeline
// name, positive generation and epoch, canonical attempt, and a strictly
// older parent (smaller epoch, generation not newer).
func (v *validator) epochHeader(version int, pipeline string, generation, epoch int64, attempt string, parent *Ref) {
	v.version(version)
	v.check("pipeline", checkPipelineName(pipeline))
	v.positive("generation", generation)
	v.positive("epoch", epoch)
	v.check("attempt", checkAttempt(attempt))
	if p := parent; p != nil {
		v.ref("parent", *p)
		if p.Epoch >= epoch {
			v.fail("parent.epoch", "%d must be older than epoch %d", p.Epoch, epoch)
		}
		if p.Generation > generation {
			v.fail("parent.generation", "%d is newer than generation %d", p.Generation, generation)
		}
	}
}

// Validate checks a manifest on its own: supported version, valid pipeline
// name, positive generation and epoch, canonical attempt, creation time, a
// strictly older parent (smaller epoch, generation not newer), non-negative
// counters and counts, and every file reference (see ValidateRef; outputs are
// relative to the sink root and may not be URLs). Each operator has a valid,
// unique ID and state files with distinct subtasks and disjoint key-group
// ranges. Errors are *Error values wrapping ErrCorrupt.
func (m *Manifest) Validate() error {
	v := validator{doc: "manifest"}
	v.epochHeader(m.FormatVersion, m.Pipeline, m.Generation, m.Epoch, m.Attempt, m.Parent)
	if m.CreatedAt.IsZero() {
		v.fail("created_at", "zero time")
	}

	s := m.Source
	seen := make(map[string]int, len(s.Inline))
	for i, key := range s.Inline {
		f := "source.inline[" + strconv.Itoa(i) + "]"
		if key == "" {
			v.fail(f, "empty key")
		}
		if j, dup := seen[key]; dup {
			v.fail(f, "%q is also source.inline[%d]", key, j)
		}
		seen[key] = i
	}
	v.fileRefs("source.segments", s.Segments, refSegment)
	v.fileRefs("source.captured", s.Captured, refSegment)
	v.fileRefs("source.size_segments", s.SizeSegments, refSegment)
	v.fileRefs("output_log", m.OutputLog, refSegment)
	v.nonNegative("source.count", s.Count)
	v.kafkaOffsets(s.Kafka)
	if s.Count < int64(len(s.Inline)) {
		v.fail("source.count", "%d is less than the %d inline keys", s.Count, len(s.Inline))
	}
	for _, name := range sortedKeys(s.Inputs) {
		if name == "" {
			v.fail("source.inputs", "empty input name")
		}
	}

	c := m.Counters
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"files_in", c.FilesIn}, {"rows_in", c.RowsIn}, {"rows_out", c.RowsOut},
		{"rows_late", c.RowsLate}, {"rows_rejected", c.RowsRejected},
		{"rows_filtered", c.RowsFiltered}, {"windows_emitted", c.Windows},
		{"files_rejected_whole", c.FilesRejectedWhole}, {"files_after_drain", c.FilesAfterDrain}, {"files_changed", c.FilesChanged},
	} {
		v.nonNegative("counters."+f.name, f.n)
	}

	ops := make(map[string]int, len(m.Operators))
	for i, op := range m.Operators {
		f := "operators[" + strconv.Itoa(i) + "]"
		v.check(f+".id", checkOpID(op.ID))
		if j, dup := ops[op.ID]; dup {
			v.fail(f+".id", "operator id %q is also operators[%d]", op.ID, j)
		}
		ops[op.ID] = i
		v.fileRefs(f+".files", op.Files, refState)
		v.fileRefs(f+".deltas", op.Deltas, refDelta)
		v.stateLayout(f+".files", op.Files)
	}
	if c := m.Counters; c.RowsRejected > c.RowsIn || c.RowsLate > c.RowsIn || c.RowsFiltered > c.RowsIn {
		v.fail("counters", "rejected %d, late %d or filtered %d rows exceed the %d rows in", c.RowsRejected, c.RowsLate, c.RowsFiltered, c.RowsIn)
	}
	for i, key := range m.Source.Inline {
		if err := ValidateSourceKey(key); err != nil {
			v.fail("source.inline["+strconv.Itoa(i)+"]", "%s", err.(*Error).Msg)
		}
	}
	v.fileRefs("outputs", m.Outputs, refOutput)
	v.fileRefs("side_outputs", m.SideOutputs, refSide)
	return v.result()
}

// stateLayout checks that one operator's state files have distinct subtasks
// and disjoint key-group ranges.
func (v *validator) stateLayout(field string, files []FileRef) {
	if v.err != nil {
		return
	}
	subtasks := make(map[int]int, len(files))
	order := make([]int, len(files))
	for i, f := range files {
		if j, dup := subtasks[f.Subtask]; dup {
			v.fail(fmt.Sprintf("%s[%d].subtask", field, i), "subtask %d is also %s[%d]", f.Subtask, field, j)
			return
		}
		subtasks[f.Subtask] = i
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return files[order[a]].KeyGroupLo < files[order[b]].KeyGroupLo })
	for k := 1; k < len(order); k++ {
		prev, cur := files[order[k-1]], files[order[k]]
		if cur.KeyGroupLo < prev.KeyGroupHi {
			v.fail(fmt.Sprintf("%s[%d].kg_lo", field, order[k]), "key-group range [%d, %d) overlaps %s[%d] [%d, %d)",
				cur.KeyGroupLo, cur.KeyGroupHi, field, order[k-1], prev.KeyGroupLo, prev.KeyGroupHi)
			return
		}
	}
}

// CheckGeneration checks the cross-document rules between a manifest and
// the generation document of its generation: same pipeline and generation,
// one operator entry per plan operator in plan order, and for each of them
// exactly one state file per subtask 0..parallelism-1 covering
// keygroup.Range(subtask, parallelism, max_parallelism). Both documents are
// assumed to pass Validate. Errors are *Error values wrapping ErrCorrupt.
func (m *Manifest) CheckGeneration(g *Generation) error {
	v := validator{doc: "manifest"}
	if m.Pipeline != g.Pipeline {
		v.fail("pipeline", "%q differs from the generation's pipeline %q", m.Pipeline, g.Pipeline)
	}
	if m.Generation != g.Generation {
		v.fail("generation", "%d differs from the generation document's %d", m.Generation, g.Generation)
	}
	if len(m.Operators) != len(g.Plan) {
		v.fail("operators", "%d operators, the generation's plan has %d", len(m.Operators), len(g.Plan))
		return v.result()
	}
	for i, op := range m.Operators {
		f := "operators[" + strconv.Itoa(i) + "]"
		if op.ID != g.Plan[i].ID {
			v.fail(f+".id", "%q, the generation's plan has %q", op.ID, g.Plan[i].ID)
			continue
		}
		var owners []int // subtasks that own at least one key group
		for s := 0; s < g.Parallelism; s++ {
			if lo, hi := keygroup.Range(s, g.Parallelism, g.MaxParallelism); lo < hi {
				owners = append(owners, s)
			}
		}
		if len(op.Files) != len(owners) {
			v.fail(f+".files", "%d state files, want %d (one per subtask owning key groups)", len(op.Files), len(owners))
			continue
		}
		for j, file := range op.Files {
			ff := fmt.Sprintf("%s.files[%d]", f, j)
			if file.Subtask >= g.Parallelism {
				v.fail(ff+".subtask", "%d is out of range for parallelism %d", file.Subtask, g.Parallelism)
				continue
			}
			lo, hi := keygroup.Range(file.Subtask, g.Parallelism, g.MaxParallelism)
			if file.KeyGroupLo != lo || file.KeyGroupHi != hi {
				v.fail(ff+".kg_lo", "key-group range [%d, %d), subtask %d owns [%d, %d)",
					file.KeyGroupLo, file.KeyGroupHi, file.Subtask, lo, hi)
			}
		}
	}
	return v.result()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
