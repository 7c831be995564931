package sinks

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/formats"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// RejectedDir is the folder under the sink of rejected-rows files when no
// rejected_url is set.
const RejectedDir = "_rejected"

// RejectRecord is one line of a rejected-rows file: the row's file, line,
// reason and raw text, and whole_file when no row of that file was accepted
// (every row rejected, or the file undecodable: then line is 0). `floe
// reprocess --rejected` reads such files again.
type RejectRecord struct {
	formats.Reject
	WholeFile bool `json:"whole_file,omitempty"`
}

func EncodeRejects(rs []RejectRecord) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range rs {
		if err := enc.Encode(&rs[i]); err != nil {
			return nil, fmt.Errorf("encode rejects: %w", err)
		}
	}
	return buf.Bytes(), nil
}

func DecodeRejects(data []byte) ([]RejectRecord, error) {
	var out []RejectRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var r RejectRecord
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("decode rejects: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Rejecting says, for people, that an epoch rejected a large share of its
// rows, or "" when it did not.
func Rejecting(in, rejected int64, where string) string {
	if in <= 0 || float64(rejected) < RejectingFraction*float64(in) {
		return ""
	}
	return fmt.Sprintf("rejecting: %.0f%% of the last epoch's rows (%d of %d) were rejected; read the reasons in %s and check source.schema against the files",
		100*float64(rejected)/float64(in), rejected, in, where)
}

// RejectedWhere names where p's rejected rows go.
func RejectedWhere(p *spec.Pipeline) string {
	if u := p.RejectedURL(); u != "" {
		return store.Redact(u)
	}
	return owner.IdentityOf(p.RootSink().URL) + "/" + RejectedDir + "/"
}

// RejectingFraction is the share of an epoch's rows whose rejection makes
// status call a pipeline "rejecting" (and a run warn): far more than stray
// malformed lines, usually a declared type that does not match the files.
const RejectingFraction = 0.1
