package manifest

import (
	"strings"
	"unicode/utf8"
)

// Hive-style partition directories of a files sink (partition_by):
// "<col>=<value>/..." above the usual output names, as Hive, Spark and
// DuckDB's COPY ... PARTITION_BY write them and their readers
// (hive_partitioning) read them back.

// HiveDefaultPartition is the directory value of a null (or empty) partition
// value, as Hive and Spark write it; readers turn it back into null.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// MaxPartitionSegment is the longest "<col>=<value>" directory name, in
// bytes after escaping (the limit of a file name on common file systems).
const MaxPartitionSegment = 255

// EscapeHivePathName escapes s as Hive's FileUtils.escapePathName does:
// control characters (0x00-0x1F, 0x7F) and "#%'*/:=?\{[]^ become %XX
// (upper-case hex); everything else, non-ASCII letters included, stays.
// Bytes that are not UTF-8 are escaped too (an object key must be UTF-8).
// The empty string is returned as is: a value uses HiveDefaultPartition.
func EscapeHivePathName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 {
				escapeByte(&b, c)
				i++
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		if hiveEscapes(c) {
			escapeByte(&b, c)
		} else {
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

func hiveEscapes(c byte) bool {
	return c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0
}

func escapeByte(b *strings.Builder, c byte) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// HivePartitionSegment returns the directory name "<col>=<value>" of one
// partition column, both escaped; a null or empty value (valid false, or
// "") is HiveDefaultPartition.
func HivePartitionSegment(col, value string, valid bool) string {
	v := HiveDefaultPartition
	if valid && value != "" {
		v = EscapeHivePathName(value)
	}
	return EscapeHivePathName(col) + "=" + v
}

// isPartitionSegment reports whether seg can be a "<col>=<value>" directory
// name HivePartitionSegment wrote: one "=" after a non-empty name.
func isPartitionSegment(seg string) bool {
	i := strings.IndexByte(seg, '=')
	return i > 0 && strings.IndexByte(seg[i+1:], '=') < 0 && len(seg) <= MaxPartitionSegment
}

// splitOutputDir splits the directory part of a sink key (dir, without the
// trailing slash) into what lies above its Hive partition directories and
// the partition directories: "@s/dt=1/hm=2" gives ("@s", "dt=1/hm=2").
func splitOutputDir(dir string) (above, partition string) {
	if dir == "" {
		return "", ""
	}
	segs := strings.Split(dir, "/")
	i := len(segs)
	for i > 0 && isPartitionSegment(segs[i-1]) {
		i--
	}
	return strings.Join(segs[:i], "/"), strings.Join(segs[i:], "/")
}
