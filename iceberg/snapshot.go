package iceberg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// readManifestList reads the manifest list at location (a full URI).
func readManifestList(io *storeIO, location string) ([]iceberg.ManifestFile, error) {
	data, err := io.ReadFile(location)
	if err != nil {
		return nil, err
	}
	mfs, err := iceberg.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("manifest list %s: %w", location, err)
	}
	return mfs, nil
}

// newSnapshotID is a random positive ID not used in m.
func newSnapshotID(m *tableMeta) int64 {
	for {
		id := rand.Int64N(math.MaxInt64-1) + 1
		if _, used := m.snapshotByID[id]; !used {
			return id
		}
	}
}

// appendSnapshot writes the manifest of dfs, merges manifests as the table's
// properties say (commit.manifest-merge.enabled,
// commit.manifest.min-count-to-merge, commit.manifest.target-size-bytes,
// the bin packing of Iceberg's merge-append) and writes the manifest list
// of a new snapshot on top of m's current one. It returns the snapshot; the
// caller commits it. summaryProps go into the snapshot summary; props are
// the table properties the commit leaves. Files are named by a fresh UUID, so a losing commit's
// files are unreferenced and only retention deletes them.
func appendSnapshot(io *storeIO, m *tableMeta, dfs []iceberg.DataFile, summaryProps, props iceberg.Properties, now time.Time) (*snapshot, error) {
	id := newSnapshotID(m)
	seq := m.lastSeq + 1
	commit := uuid.NewString()
	counter := 0
	newManifest := func() (*iceberg.ManifestWriter, *bytes.Buffer, string, error) {
		var buf bytes.Buffer
		w, err := iceberg.NewManifestWriter(formatVersion, &buf, m.spec, m.schema, id)
		if err != nil {
			return nil, nil, "", fmt.Errorf("manifest writer: %w", err)
		}
		name := fmt.Sprintf("%s/%s%s-m%d.avro", io.loc, metadataPrefix, commit, counter)
		counter++
		return w, &buf, name, nil
	}
	finish := func(w *iceberg.ManifestWriter, buf *bytes.Buffer, name string) (iceberg.ManifestFile, error) {
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
		mf, err := w.ToManifestFile(name, int64(buf.Len()))
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
		if err := io.WriteFile(name, buf.Bytes()); err != nil {
			return nil, err
		}
		return mf, nil
	}

	w, buf, name, err := newManifest()
	if err != nil {
		return nil, err
	}
	var added, addedBytes int64
	parts := map[string]bool{}
	for _, df := range dfs {
		if err := w.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &id, nil, nil, df)); err != nil {
			return nil, fmt.Errorf("manifest %s: add %s: %w", name, df.FilePath(), err)
		}
		added += df.Count()
		addedBytes += df.FileSizeBytes()
		parts[fmt.Sprint(df.Partition())] = true
	}
	first, err := finish(w, buf, name)
	if err != nil {
		return nil, err
	}
	manifests := []iceberg.ManifestFile{first}
	var parent *int64
	var parentSummary map[string]string
	if cur := m.current(); cur != nil {
		parent, parentSummary = &cur.ID, cur.Summary
		old, err := readManifestList(io, cur.ManifestList)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", cur.ID, err)
		}
		manifests = append(manifests, old...)
	}

	if v, _ := strconv.ParseBool(props[propManifestMergeEnabled]); v {
		minCount := intProp(props, propManifestMinMergeCount, DefaultManifestMergeMinCount)
		target := int64(intProp(props, propManifestTargetSize, defaultManifestTargetSize))
		var mergeable, rest []iceberg.ManifestFile
		for _, mf := range manifests {
			if mf.ManifestContent() == iceberg.ManifestContentData && mf.PartitionSpecID() == int32(m.spec.ID()) {
				mergeable = append(mergeable, mf)
			} else {
				rest = append(rest, mf)
			}
		}
		var merged []iceberg.ManifestFile
		for _, bin := range packEnd(mergeable, target) {
			if len(bin) == 1 || (len(bin) < minCount && slices.Contains(bin, first)) {
				merged = append(merged, bin...)
				continue
			}
			w, buf, name, err := newManifest()
			if err != nil {
				return nil, err
			}
			for _, mf := range bin {
				data, err := io.ReadFile(mf.FilePath())
				if err != nil {
					return nil, err
				}
				entries, err := iceberg.ReadManifest(mf, bytes.NewReader(data), true)
				if err != nil {
					return nil, fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
				}
				for _, e := range entries {
					if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == id {
						err = w.Add(e)
					} else {
						err = w.Existing(e)
					}
					if err != nil {
						return nil, fmt.Errorf("merge manifest %s into %s: %w", mf.FilePath(), name, err)
					}
				}
			}
			mf, err := finish(w, buf, name)
			if err != nil {
				return nil, err
			}
			merged = append(merged, mf)
		}
		manifests = append(merged, rest...)
	}

	var list bytes.Buffer
	if err := iceberg.WriteManifestList(formatVersion, &list, id, parent, &seq, 0, manifests); err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	listName := fmt.Sprintf("%s/%ssnap-%d-0-%s.avro", io.loc, metadataPrefix, id, commit)
	if err := io.WriteFile(listName, list.Bytes()); err != nil {
		return nil, err
	}

	summary := map[string]string{
		summaryOperation:          operationAppend,
		"added-data-files":        strconv.Itoa(len(dfs)),
		"added-records":           strconv.FormatInt(added, 10),
		"added-files-size":        strconv.FormatInt(addedBytes, 10),
		"changed-partition-count": strconv.Itoa(len(parts)),
	}
	totals := map[string]int64{
		"total-data-files": int64(len(dfs)), "total-records": added, "total-files-size": addedBytes,
		"total-delete-files": 0, "total-position-deletes": 0, "total-equality-deletes": 0,
	}
	known := true
	for k, v := range totals {
		if parent == nil {
			continue
		}
		p, err := strconv.ParseInt(parentSummary[k], 10, 64)
		if err != nil {
			known = false
			break
		}
		totals[k] = v + p
	}
	if known {
		for k, v := range totals {
			summary[k] = strconv.FormatInt(v, 10)
		}
	}
	for k, v := range summaryProps {
		if _, reserved := summary[k]; !reserved {
			summary[k] = v
		}
	}
	schemaID := m.schema.ID
	// Readers expect snapshot times not to go back (Iceberg's Java builder
	// refuses one older than the metadata's last update): a clock behind
	// the last writer's takes that writer's time.
	return &snapshot{ID: id, Parent: parent, Seq: seq, TimestampMs: max(now.UnixMilli(), m.lastUpdatedMs),
		ManifestList: listName, Summary: summary, SchemaID: &schemaID}, nil
}

func intProp(props iceberg.Properties, key string, def int) int {
	if v, err := strconv.Atoi(props[key]); err == nil && v > 0 {
		return v
	}
	return def
}

// packEnd packs items into bins of at most target bytes (a bigger item gets
// a bin of its own), filling from the end of the list with a look-back of
// one bin, and returns the bins in list order: Iceberg's manifest merge
// packing, which keeps the oldest manifests in full bins that do not change.
func packEnd(items []iceberg.ManifestFile, target int64) [][]iceberg.ManifestFile {
	var bins [][]iceberg.ManifestFile
	var cur []iceberg.ManifestFile
	var size int64
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if len(cur) > 0 && size+it.Length() > target {
			bins = append(bins, cur)
			cur, size = nil, 0
		}
		cur = append(cur, it)
		size += it.Length()
	}
	if len(cur) > 0 {
		bins = append(bins, cur)
	}
	for _, b := range bins {
		slices.Reverse(b)
	}
	slices.Reverse(bins)
	return bins
}

// expireSnapshots returns the snapshots to remove: on each ref's ancestry the
// newest retainLast are kept and so are older ones whose timestamp is at or
// after cutoffMs; snapshots on no ref's ancestry are removed when older than
// cutoffMs. Snapshots a ref points at are always kept.
func expireSnapshots(m *tableMeta, retainLast int, cutoffMs int64) (map[int64]bool, error) {
	keep := map[int64]bool{}
	heads := map[int64]bool{}
	if m.currentID != noSnapshot {
		heads[m.currentID] = true
	}
	for name, ref := range m.refs {
		var id int64
		if err := jsonUnmarshal(ref["snapshot-id"], &id); err != nil {
			return nil, fmt.Errorf("ref %q: %w", name, err)
		}
		heads[id] = true
	}
	onAncestry := map[int64]bool{}
	for head := range heads {
		keep[head] = true
		n := 0
		for id, ok := head, true; ok; {
			i, found := m.snapshotByID[id]
			if !found {
				break
			}
			s := m.snapshots[i]
			onAncestry[s.ID] = true
			if n < retainLast || s.TimestampMs >= cutoffMs {
				keep[s.ID] = true
			}
			n++
			if s.Parent == nil {
				ok = false
			} else {
				id = *s.Parent
			}
		}
	}
	out := map[int64]bool{}
	for _, s := range m.snapshots {
		switch {
		case keep[s.ID]:
		case onAncestry[s.ID]:
			out[s.ID] = true
		case s.TimestampMs < cutoffMs:
			out[s.ID] = true
		}
	}
	return out, nil
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
