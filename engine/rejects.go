package engine

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/floe-dev/floe/formats"
)

// rejectRecord is one line of a rejected-rows file: the row's file, line,
// reason and raw text, and whole_file when no row of that file was accepted
// (every row rejected, or the file undecodable: then line is 0). `floe
// reprocess --rejected` reads such files again.
type rejectRecord struct {
	formats.Reject
	WholeFile bool `json:"whole_file,omitempty"`
}

func encodeRejects(rs []rejectRecord) ([]byte, error) {
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

func decodeRejects(data []byte) ([]rejectRecord, error) {
	var out []rejectRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var r rejectRecord
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("decode rejects: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}
