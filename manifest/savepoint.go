package manifest

import (
	"fmt"
	"time"
)

// Savepoint layout. A savepoint is a folder holding copies of everything one
// committed epoch references, at the same root-relative paths, so that every
// reference in its manifest resolves against the folder itself:
//
//	<folder>/_manifest.json      the epoch's manifest, byte for byte
//	<folder>/_generation.json    that epoch's generation record, byte for byte
//	<folder>/gen=.../...         the state, seen-set and output-log files
//	<folder>/_savepoint.json     written last: the savepoint is complete
//
// The folder can be copied anywhere with any tool and still restores. Named
// savepoints live under <state>/<pipeline>/savepoints/<name>/.
const (
	SavepointFile         = "_savepoint.json"
	SavepointManifestFile = "_manifest.json"
	SavepointGenFile      = "_generation.json"
)

// Savepoint is the content of _savepoint.json.
type Savepoint struct {
	FormatVersion int       `json:"format_version"`
	Pipeline      string    `json:"pipeline"`
	Name          string    `json:"name"`
	Generation    int64     `json:"generation"`
	Epoch         int64     `json:"epoch"`
	Watermark     int64     `json:"watermark_us"`
	Files         int       `json:"files"` // copied files, manifest and generation record excluded
	Bytes         int64     `json:"bytes"`
	CreatedAt     time.Time `json:"created_at"`
	// ManifestChecksum is Checksum of _manifest.json's bytes.
	ManifestChecksum string `json:"manifest_checksum"`
	Checksum         string `json:"checksum,omitempty"` // see Latest.Checksum
}

func (s *Savepoint) version() int { return s.FormatVersion }
func (s *Savepoint) sum() *string { return &s.Checksum }

// RestoredFrom records, in a generation, the state it started from when that
// is not simply the previous head.
type RestoredFrom struct {
	// Kind is "savepoint", "rollback", "reset" or "reprocess".
	Kind string `json:"kind"`
	// Savepoint is the savepoint's name or URL (Kind savepoint).
	Savepoint string `json:"savepoint,omitempty"`
	// Claimed: the generation references the savepoint's files instead of
	// copying them.
	Claimed bool `json:"claimed,omitempty"`
}

// Kinds of RestoredFrom.
const (
	RestoreSavepoint = "savepoint"
	RestoreRollback  = "rollback"
	RestoreReset     = "reset"
	// RestoreReprocess: the head's state, with named input files to be read
	// again.
	RestoreReprocess = "reprocess"
)

// ValidateSavepointName checks a savepoint name: 1 to 128 characters from
// [A-Za-z0-9._-], starting with a letter or digit.
func ValidateSavepointName(name string) error {
	ok := len(name) >= 1 && len(name) <= 128
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = ok && (alnum || i > 0 && (c == '.' || c == '_' || c == '-'))
	}
	if !ok {
		return fmt.Errorf("savepoint name %q: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// SavepointDir returns the root-relative folder of the named savepoint.
func SavepointDir(name string) string { return SavepointsDir + name + "/" }

// Validate checks a savepoint document.
func (s *Savepoint) Validate() error {
	v := validator{doc: "savepoint"}
	v.version(s.FormatVersion)
	v.check("pipeline", checkPipelineName(s.Pipeline))
	if err := ValidateSavepointName(s.Name); err != nil {
		v.fail("name", "%v", err)
	}
	v.positive("generation", s.Generation)
	v.positive("epoch", s.Epoch)
	v.nonNegative("files", int64(s.Files))
	v.nonNegative("bytes", s.Bytes)
	v.check("manifest_checksum", checkChecksum(s.ManifestChecksum))
	if s.CreatedAt.IsZero() {
		v.fail("created_at", "zero time")
	}
	return v.result()
}

// EncodeSavepoint validates s and returns its JSON encoding.
func EncodeSavepoint(s *Savepoint) ([]byte, error) { return encode("savepoint", s) }

// DecodeSavepoint strictly decodes and validates a _savepoint.json.
func DecodeSavepoint(name string, data []byte) (*Savepoint, error) {
	var s Savepoint
	if err := decode("savepoint", name, data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
