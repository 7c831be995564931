package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Checksum returns the checksum of data in the form FileRef.Checksum uses:
// "sha256:<64 lowercase hex digits>".
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewFileRef returns a FileRef for data stored at path with its size and
// checksum filled in; the caller sets the remaining fields.
func NewFileRef(path string, data []byte) FileRef {
	return FileRef{Path: path, Size: int64(len(data)), Checksum: Checksum(data)}
}

// VerifyFile checks data, the content read for ref, against the size and
// checksum the manifest recorded. A mismatch is an *Error wrapping
// ErrCorrupt that names ref.Path and gives the expected and actual values.
func VerifyFile(ref FileRef, data []byte) error {
	fail := func(format string, args ...any) error {
		return &Error{Doc: "file", Name: ref.Path, Msg: fmt.Sprintf(format, args...)}
	}
	if msg := checkChecksum(ref.Checksum); msg != "" {
		return fail("manifest records an invalid %s", msg)
	}
	if int64(len(data)) != ref.Size {
		return fail("size mismatch: manifest records %d bytes, read %d", ref.Size, len(data))
	}
	if got := Checksum(data); got != ref.Checksum {
		return fail("checksum mismatch: manifest records %s, read %s", ref.Checksum, got)
	}
	return nil
}
