package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SinkMarkerName is the key, at the sink root, of the record that says which
// pipeline (and which state location) owns the sink. Orphan cleanup deletes
// sink files its pipeline did not commit, so a sink has exactly one owner.
const SinkMarkerName = "_floe_pipeline.json"

// Identity is what a pipeline is, recorded in every generation it starts
// (Generation.Identity) and checked by every run before it writes
// anything, so that an edit which would orphan or mix committed data (a new
// sink location or format, other side-output locations, a second state on
// the same sink) is refused instead of silently accepted. Locations are
// credential-free canonical URLs (no query, no user info): connection
// settings may change, places may not.
type Identity struct {
	// ID is a UUID created with the pipeline's first recorded generation and
	// carried by every later one and by the sink marker.
	ID string `json:"id"`
	// State is the location of <state-url>/<pipeline>.
	State string `json:"state"`
	// Sink is where outputs go and in which format.
	Sink       string `json:"sink"`
	SinkFormat string `json:"sink_format"`
	// Late and Rejected are the side-output locations ("" when unset:
	// rejected rows then go to the sink's _rejected/ folder).
	Late     string `json:"late,omitempty"`
	Rejected string `json:"rejected,omitempty"`
	// Sinks (graph pipelines with more than one sink) are the sinks after
	// the first, which Sink and SinkFormat name: outputs of sink <name> are
	// listed as "@<name>/<path>" (ExtraSinkPrefix), relative to its URL.
	Sinks []SinkIdentity `json:"sinks,omitempty"`
}

// SinkIdentity is one further sink of a pipeline: its name in the spec,
// its location and its format.
type SinkIdentity struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Format string `json:"format"`
}

// ExtraSinkPrefix starts the output paths of a pipeline's further sinks:
// "@<sink>/<path>". No path in the first sink starts with it.
const ExtraSinkPrefix = "@"

// SameExceptID reports whether a and b name the same places (their IDs may
// differ): nil equals only nil.
func (a *Identity) SameExceptID(b *Identity) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.State == b.State && a.Sink == b.Sink && a.SinkFormat == b.SinkFormat &&
		a.Late == b.Late && a.Rejected == b.Rejected && slices.Equal(a.Sinks, b.Sinks)
}

// validate checks an identity inside a generation.
func (a *Identity) validate(v *validator, field string) {
	v.check(field+".id", checkAttempt(a.ID))
	if a.State == "" {
		v.fail(field+".state", "empty location")
	}
	if a.Sink == "" {
		v.fail(field+".sink", "empty location")
	}
	if a.SinkFormat == "" {
		v.fail(field+".sink_format", "empty format")
	}
	seen := map[string]bool{}
	for i, sk := range a.Sinks {
		f := field + ".sinks[" + strconv.Itoa(i) + "]"
		switch {
		case sk.Name == "" || strings.ContainsAny(sk.Name, "/@"):
			v.fail(f+".name", "invalid sink name %q", sk.Name)
		case seen[sk.Name]:
			v.fail(f+".name", "duplicate sink name %q", sk.Name)
		}
		seen[sk.Name] = true
		if sk.URL == "" {
			v.fail(f+".url", "empty location")
		}
		if sk.Format == "" {
			v.fail(f+".format", "empty format")
		}
	}
}

// SinkMarker is the content of <sink>/_floe_pipeline.json. Releases before
// format_version 1 wrote only {"pipeline": name}; DecodeSinkMarker reads
// that form with ID and State empty (Legacy set).
type SinkMarker struct {
	FormatVersion int    `json:"format_version"`
	Pipeline      string `json:"pipeline"`
	ID            string `json:"id"`
	State         string `json:"state"`
	Checksum      string `json:"checksum,omitempty"` // see Latest.Checksum
	// Legacy is set for a marker of the form {"pipeline": name}.
	Legacy bool `json:"-"`
}

// EncodeSinkMarker validates m and returns its JSON encoding.
func EncodeSinkMarker(m *SinkMarker) ([]byte, error) { return encode("sink marker", m) }

// DecodeSinkMarker decodes a sink marker, of this format or the legacy
// {"pipeline": name} form.
func DecodeSinkMarker(name string, data []byte) (*SinkMarker, error) {
	if !bytes.Contains(data, []byte(`"format_version"`)) {
		var legacy struct {
			Pipeline string `json:"pipeline"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&legacy); err != nil {
			return nil, withName(&Error{Msg: "invalid legacy marker: " + err.Error()}, "sink marker", name)
		}
		if msg := checkPipelineName(legacy.Pipeline); msg != "" {
			return nil, withName(&Error{Field: "pipeline", Msg: msg}, "sink marker", name)
		}
		return &SinkMarker{Pipeline: legacy.Pipeline, Legacy: true}, nil
	}
	var m SinkMarker
	if err := decode("sink marker", name, data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks a sink marker.
func (m *SinkMarker) Validate() error {
	v := validator{doc: "sink marker"}
	v.version(m.FormatVersion)
	v.check("pipeline", checkPipelineName(m.Pipeline))
	v.check("id", checkAttempt(m.ID))
	if m.State == "" {
		v.fail("state", "empty location")
	}
	return v.result()
}

// ValidateSourceKey checks a processed-file name as the seen set records
// it: non-empty, valid UTF-8, no line breaks or NUL (segments are
// line-separated). Errors wrap ErrCorrupt.
func ValidateSourceKey(key string) error {
	switch {
	case key == "":
		return &Error{Msg: "empty source key"}
	case !utf8.ValidString(key):
		return &Error{Msg: fmt.Sprintf("source key %q is not valid UTF-8", key)}
	case strings.ContainsAny(key, "\n\r\x00"):
		return &Error{Msg: fmt.Sprintf("source key %q holds a line break or NUL", key)}
	}
	return nil
}
