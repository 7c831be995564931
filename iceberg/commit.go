package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/store"
)

// Keys and names of the table layout under the table location.
const (
	metadataPrefix = "metadata/"
	dataPrefix     = "data/"
	versionPrefix  = "metadata/v"
	versionSuffix  = ".metadata.json"
	versionHintKey = "metadata/version-hint.text"
)

// Table properties floe writes.
const (
	// PropMetadataVersion is stamped by floe into every metadata file it
	// writes: the file's own version N (metadata/vN.metadata.json). A
	// current metadata file whose stamp differs was written by someone else.
	PropMetadataVersion = "floe.metadata-version"
	// PropWriter names the writer ("floe").
	PropWriter = "floe.writer"
)

func versionKey(n int64) string { return fmt.Sprintf("%s%d%s", versionPrefix, n, versionSuffix) }

// parseVersion returns N for a key metadata/vN.metadata.json (N > 0, no
// leading zeros, no other characters).
func parseVersion(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, versionPrefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, versionSuffix)
	if !ok || digits == "" || digits[0] == '0' || len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// version is one metadata file found by listing.
type version struct {
	n    int64
	info store.ObjectInfo
}

// versions lists metadata/vN.metadata.json, oldest first.
func (t *Table) versions(ctx context.Context) ([]version, error) {
	objs, err := t.st.List(ctx, versionPrefix)
	if err != nil {
		return nil, fmt.Errorf("iceberg: list %s: %w", versionPrefix, err)
	}
	var out []version
	for _, o := range objs {
		if n, ok := parseVersion(o.Key); ok {
			out = append(out, version{n: n, info: o})
		}
	}
	slices.SortFunc(out, func(a, b version) int { return cmpInt(a.n, b.n) })
	return out, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// state is one loaded metadata version.
type state struct {
	version int64
	key     string // store key of the metadata file
	loc     string // its full location
	meta    *tableMeta
}

// load returns the current version: the highest N present, whatever the
// version hint says. It returns nil, nil when there is no table yet.
func (t *Table) load(ctx context.Context) (*state, error) {
	vs, err := t.versions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return t.loadVersion(ctx, vs[len(vs)-1].n)
}

// loadVersion reads and parses metadata/vN.metadata.json.
func (t *Table) loadVersion(ctx context.Context, n int64) (*state, error) {
	key := versionKey(n)
	data, err := store.Read(ctx, t.st, key)
	if err != nil {
		return nil, fmt.Errorf("iceberg: read %s: %w", key, err)
	}
	md, err := parseMeta(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	return &state{version: n, key: key, loc: t.loc + "/" + key, meta: md}, nil
}

// commit applies c on top of exactly the base version (plus floe's version
// stamp) and creates version base+1 only if it does not exist. A commit on
// an older base can therefore never succeed.
func (t *Table) commit(ctx context.Context, base *state, c change) (*tableMeta, error) {
	n := base.version + 1
	c.props = maps.Clone(c.props)
	if c.props == nil {
		c.props = iceberg.Properties{}
	}
	maps.Copy(c.props, stamp(n))
	c.baseFile = base.loc
	c.nowMs = time.Now().UnixMilli()
	md, err := base.meta.apply(c)
	if err != nil {
		return nil, fmt.Errorf("iceberg: apply changes on %s: %w", base.key, err)
	}
	if _, err := t.createVersion(ctx, n, md); err != nil {
		return nil, err
	}
	return md, nil
}

func stamp(n int64) iceberg.Properties {
	return iceberg.Properties{PropMetadataVersion: strconv.FormatInt(n, 10), PropWriter: "floe"}
}

// createVersion writes md as metadata/vN.metadata.json with create-if-absent.
//
// Outcomes: nil (committed: the file is ours and it is the head of the
// table); an error matching ErrCommitFailed (nothing of ours is
// current: another writer has version N, or ours landed in a slot that
// retention had emptied behind the head); any other error, matching
// ErrCommitUnknown when the write may have landed. The caller resolves every
// failure the same way: reload and re-check its epoch marker.
func (t *Table) createVersion(ctx context.Context, n int64, md *tableMeta) (string, error) {
	key := versionKey(n)
	data, err := md.encode()
	if err != nil {
		return "", fmt.Errorf("iceberg: encode %s: %w", key, err)
	}
	_, err = t.st.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if err != nil {
		if errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrOutcomeUnknown) {
			return "", fmt.Errorf("%w: %s already exists: another writer committed version %d", ErrCommitFailed, key, n)
		}
		// The write may have applied (lost response, a retried write that
		// then lost to itself): read it back and compare.
		got, rerr := store.Read(ctx, t.st, key)
		switch {
		case rerr == nil && bytes.Equal(got, data):
			t.log.Debug("iceberg: ambiguous metadata write resolved as committed", "key", key, "cause", err)
		case rerr == nil:
			return "", fmt.Errorf("%w: %s was written by another writer (our write failed: %v)", ErrCommitFailed, key, err)
		case errors.Is(rerr, store.ErrNotFound):
			// Not there now. A delayed request could still land later;
			// then it is a commit like any other and the epoch marker
			// inside it keeps the retry from applying the epoch twice.
			return "", fmt.Errorf("%w: %s not written: %v", ErrCommitFailed, key, err)
		default:
			return "", fmt.Errorf("%w: create %s: %v; reading it back: %v", ErrCommitUnknown, key, err, rerr)
		}
	}
	loc := t.loc + "/" + key
	if err := t.verifyHead(ctx, n, loc, md.lastUpdatedMs); err != nil {
		return "", err
	}
	// Best effort: readers that trust the hint also check for newer
	// versions; floe's own reader always lists.
	if _, err := t.st.Put(ctx, versionHintKey, []byte(strconv.FormatInt(n, 10)), store.PutOptions{}); err != nil {
		t.log.Warn("iceberg: write version hint", "table", t.loc, "version", n, "err", err)
	}
	return loc, nil
}

// verifyHead checks that version n, just created, is (or was) the head: no
// higher version exists, or version n+1 was built on it. Retention deletes
// old metadata files, so a writer stalled for longer than the retention
// grace could recreate a deleted low version; that file is unreachable and
// the commit counts as failed.
func (t *Table) verifyHead(ctx context.Context, n int64, loc string, lastUpdatedMs int64) error {
	vs, err := t.versions(ctx)
	if err != nil {
		return fmt.Errorf("%w: created %s but could not check it is the head: %v", ErrCommitUnknown, versionKey(n), err)
	}
	if len(vs) == 0 || vs[len(vs)-1].n <= n {
		return nil
	}
	next, err := t.loadVersion(ctx, n+1)
	if err == nil {
		for _, e := range next.meta.metadataLog {
			if e.MetadataFile == loc && e.TimestampMs == lastUpdatedMs {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s was created behind the head (version %d exists and does not follow it): a stalled writer refilled a slot emptied by retention",
		ErrCommitFailed, versionKey(n), vs[len(vs)-1].n)
}
