package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

// Key layout constants. See the package documentation for the whole layout.
const (
	// LatestPath is the key of the pointer to the newest committed manifest.
	LatestPath = "_latest.json"
	// GenerationFile is the base name of a generation's topology document.
	GenerationFile = "_generation.json"
	// ManifestFile is the base name of an epoch's commit point.
	ManifestFile = "_manifest.json"
	// SavepointsDir is the root-relative prefix of savepoints. Nothing under
	// it belongs to the live pipeline; ParseKey does not recognise it.
	SavepointsDir = "savepoints/"

	// GenerationDigits, EpochDigits and SubtaskDigits are the zero-padding
	// widths of numbers in keys.
	GenerationDigits = 6
	EpochDigits      = 10
	SubtaskDigits    = 4
	// AttemptPrefixLen is how many leading characters of the attempt UUID an
	// output file name carries.
	AttemptPrefixLen = 8
	// MaxOpIDLen is the maximum length of an operator ID.
	MaxOpIDLen = 64
)

// GenerationDir returns "gen=000003/" for generation 3. gen must be >= 1.
func GenerationDir(gen int64) string {
	return fmt.Sprintf("gen=%0*d/", GenerationDigits, gen)
}

// GenerationPath returns the key of generation gen's topology document,
// e.g. "gen=000003/_generation.json".
func GenerationPath(gen int64) string {
	return GenerationDir(gen) + GenerationFile
}

// EpochDir returns the directory of one epoch, e.g.
// "gen=000003/epoch=0000000041/". gen and epoch must be >= 1.
func EpochDir(gen, epoch int64) string {
	return fmt.Sprintf("%sepoch=%0*d/", GenerationDir(gen), EpochDigits, epoch)
}

// ManifestPath returns the key of an epoch's manifest, e.g.
// "gen=000003/epoch=0000000041/_manifest.json".
func ManifestPath(gen, epoch int64) string {
	return EpochDir(gen, epoch) + ManifestFile
}

// AttemptDir returns the directory under which one attempt writes all its
// state and source files: "gen=000003/epoch=0000000041/<attempt>/". attempt
// must be a canonical UUID (ValidateAttempt).
func AttemptDir(gen, epoch int64, attempt string) string {
	return EpochDir(gen, epoch) + attempt + "/"
}

// StatePath returns the key of one subtask's state file of an operator:
// ".../<attempt>/op=<op-id>/s=0002.parquet". opID must pass ValidateOpID and
// attempt ValidateAttempt; the layout trusts its callers to have validated
// the plan once.
func StatePath(gen, epoch int64, attempt, opID string, subtask int) string {
	return fmt.Sprintf("%sop=%s/s=%0*d.parquet", AttemptDir(gen, epoch, attempt), opID, SubtaskDigits, subtask)
}

// DeltaPath returns the key of a state delta file of one subtask, kind
// DeltaUpserts, DeltaTombstones or DeltaMerges:
// ".../<attempt>/op=<opID>/s=0001.upserts.parquet".
func DeltaPath(gen, epoch int64, attempt, opID string, subtask int, kind string) string {
	return fmt.Sprintf("%sop=%s/s=%0*d.%s.parquet", AttemptDir(gen, epoch, attempt), opID, SubtaskDigits, subtask, kind)
}

// SourcePath returns the key of a source-offset file (e.g. a segment of the
// seen-file set): ".../<attempt>/source/<name>". name must be a clean
// relative path (ValidateRef(name, false)).
func SourcePath(gen, epoch int64, attempt, name string) string {
	return AttemptDir(gen, epoch, attempt) + "source/" + name
}

// OutputName returns the base name of a sink output file,
// "part-g000003-e0000000041-s0002-<first 8 of attempt><ext>". ext is the
// extension with or without its leading dot ("parquet" and ".parquet" give
// the same name); an empty ext gives no extension. The name is relative to
// the sink root (or a partition directory below it).
func OutputName(gen, epoch int64, subtask int, attempt string, ext string) string {
	short := attempt
	if len(short) > AttemptPrefixLen {
		short = short[:AttemptPrefixLen]
	}
	if ext != "" && !strings.HasPrefix(ext, ".") {
		ext = "." + ext
	}
	return fmt.Sprintf("part-g%0*d-e%0*d-s%0*d-%s%s",
		GenerationDigits, gen, EpochDigits, epoch, SubtaskDigits, subtask, short, ext)
}

// KeyKind classifies a root-relative key.
type KeyKind int

// Key kinds returned by ParseKey.
const (
	// KeyOther: not a file floe writes under that name (also the zero value).
	KeyOther KeyKind = iota
	// KeyLatest: _latest.json.
	KeyLatest
	// KeyGeneration: gen=N/_generation.json.
	KeyGeneration
	// KeyManifest: gen=N/epoch=M/_manifest.json.
	KeyManifest
	// KeyState: gen=N/epoch=M/<attempt>/op=<id>/s=<subtask>.parquet.
	KeyState
	// KeySource: gen=N/epoch=M/<attempt>/source/<name>.
	KeySource
)

// String returns "latest", "generation", "manifest", "state", "source" or
// "other".
func (k KeyKind) String() string {
	switch k {
	case KeyLatest:
		return "latest"
	case KeyGeneration:
		return "generation"
	case KeyManifest:
		return "manifest"
	case KeyState:
		return "state"
	case KeySource:
		return "source"
	default:
		return "other"
	}
}

// KeyInfo is what ParseKey learns from a key. Fields that the key does not
// determine are zero.
type KeyInfo struct {
	Kind       KeyKind
	Generation int64  // >= 1 for every key under gen=N/
	Epoch      int64  // >= 1 for every key under gen=N/epoch=M/
	Attempt    string // for keys under an attempt directory
	OpID       string // KeyState only
	Subtask    int    // KeyState only
	SourceName string // KeySource only: the part after "source/"
}

// ParseKey classifies a root-relative key, for retention and orphan GC.
//
// ok is false when the key is outside the layout: not _latest.json and not
// under a canonical "gen=NNNNNN/" directory (savepoints/, foreign files,
// non-canonical numbers such as "gen=3/"). ok is true with Kind == KeyOther
// for an unrecognised key inside a generation, epoch or attempt directory;
// Generation, Epoch and Attempt are then filled as far as the key has
// canonical components, so GC can age such leftovers by their epoch.
func ParseKey(key string) (KeyInfo, bool) {
	if key == LatestPath {
		return KeyInfo{Kind: KeyLatest}, true
	}
	parts := strings.Split(key, "/")
	gen, ok := parseNumber(parts[0], "gen=", GenerationDigits, 1)
	if !ok {
		return KeyInfo{}, false
	}
	info := KeyInfo{Kind: KeyOther, Generation: gen}
	if len(parts) == 1 {
		return info, true // "gen=000003" without a slash: a stray object
	}
	if len(parts) == 2 && parts[1] == GenerationFile {
		info.Kind = KeyGeneration
		return info, true
	}
	epoch, ok := parseNumber(parts[1], "epoch=", EpochDigits, 1)
	if !ok {
		return info, true
	}
	info.Epoch = epoch
	if len(parts) < 3 {
		return info, true
	}
	if len(parts) == 3 && parts[2] == ManifestFile {
		info.Kind = KeyManifest
		return info, true
	}
	if checkAttempt(parts[2]) != "" {
		return info, true
	}
	info.Attempt = parts[2]
	if len(parts) < 4 {
		return info, true
	}
	switch {
	case parts[3] == "source" && len(parts) >= 5:
		name := strings.Join(parts[4:], "/")
		if checkRelative(name) == "" {
			info.Kind = KeySource
			info.SourceName = name
		}
	case strings.HasPrefix(parts[3], "op=") && len(parts) == 5:
		id := strings.TrimPrefix(parts[3], "op=")
		file, found := strings.CutSuffix(parts[4], ".parquet")
		if !found || checkOpID(id) != "" {
			break
		}
		s, ok := parseNumber(file, "s=", SubtaskDigits, 0)
		if !ok || s > maxInt {
			break
		}
		info.Kind = KeyState
		info.OpID = id
		info.Subtask = int(s)
	}
	return info, true
}

const maxInt = int64(^uint(0) >> 1)

// OutputInfo is what ParseOutputName learns from a sink file name.
type OutputInfo struct {
	Generation    int64
	Epoch         int64
	Subtask       int
	AttemptPrefix string // first AttemptPrefixLen characters of the attempt
	Ext           string // with its leading dot, or empty
	// Partition is the Hive partition directories directly above the name
	// ("dt=2015-07-15/hm=08%3A00", "" for none): "<col>=<value>" segments
	// of a files sink's partition_by (HivePartitionSegment).
	Partition string
	// Dir is the rest of the directory, above Partition ("" at the sink
	// root; "_rejected", "@<sink>", "data" for other places floe writes).
	Dir string
}

// ParseOutputName parses the base name (the part after the last "/") of a
// sink key written by OutputName, and splits the directory above it into
// Dir and Partition. ok is false for any other name.
func ParseOutputName(key string) (OutputInfo, bool) {
	slash := strings.LastIndexByte(key, '/')
	name := key[slash+1:]
	var dir, part string
	if slash > 0 {
		dir, part = splitOutputDir(key[:slash])
	}
	rest, ok := strings.CutPrefix(name, "part-")
	if !ok {
		return OutputInfo{}, false
	}
	fields := strings.SplitN(rest, "-", 4)
	if len(fields) != 4 {
		return OutputInfo{}, false
	}
	gen, ok1 := parseNumber(fields[0], "g", GenerationDigits, 1)
	epoch, ok2 := parseNumber(fields[1], "e", EpochDigits, 1)
	sub, ok3 := parseNumber(fields[2], "s", SubtaskDigits, 0)
	if !ok1 || !ok2 || !ok3 || sub > maxInt {
		return OutputInfo{}, false
	}
	short, ext := fields[3], ""
	if i := strings.IndexByte(short, '.'); i >= 0 {
		short, ext = short[:i], short[i:]
	}
	if len(short) != AttemptPrefixLen || !isLowerHex(short) {
		return OutputInfo{}, false
	}
	return OutputInfo{Generation: gen, Epoch: epoch, Subtask: int(sub), AttemptPrefix: short, Ext: ext, Partition: part, Dir: dir}, true
}

// parseNumber parses prefix followed by a canonical zero-padded decimal of
// at least width digits whose value is at least lowest.
func parseNumber(s, prefix string, width int, lowest int64) (int64, bool) {
	digits, ok := strings.CutPrefix(s, prefix)
	if !ok || len(digits) < width {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	if fmt.Sprintf("%0*d", width, v) != digits {
		return 0, false // extra leading zeros: not what we write
	}
	return v, v >= lowest
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
