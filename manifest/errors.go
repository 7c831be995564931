package manifest

import (
	"errors"
	"strings"
)

// ErrCorrupt marks a metadata document (or a file it references) that cannot
// be trusted: malformed JSON, an unsupported format version, a missing or
// invalid field, or a size/checksum mismatch. Every error returned by a
// Decode function, a Validate method, ValidateRef, ValidateOpID and
// VerifyFile satisfies errors.Is(err, ErrCorrupt). Recovery must stop and
// name the file rather than resume from such a document.
var ErrCorrupt = errors.New("corrupt metadata")

// Error describes one invalid field of a metadata document. It unwraps to
// ErrCorrupt. Obtain it with errors.As to read the failing field.
type Error struct {
	// Doc is the document type: "manifest", "latest pointer", "generation"
	// or "file"; empty for a standalone check such as ValidateRef.
	Doc string
	// Name is the object key of the document, when known.
	Name string
	// Field is the JSON path of the offending field, e.g.
	// "operators[2].files[0].checksum"; empty when the whole document is at
	// fault (syntax error, trailing data).
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error formats as `<doc> <name>: field <field>: <msg>`, leaving out the
// parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Doc)
	if e.Name != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Name)
	}
	if e.Field != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString("field ")
		b.WriteString(e.Field)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrCorrupt.
func (e *Error) Unwrap() error { return ErrCorrupt }

// withName returns err with Doc and Name filled in when err is an *Error
// that lacks them; other errors are returned unchanged.
func withName(err error, doc, name string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	if c.Doc == "" {
		c.Doc = doc
	}
	if c.Name == "" {
		c.Name = name
	}
	return &c
}

// fieldErr builds a field error of a document without a name yet.
func fieldErr(doc, field, msg string) *Error {
	return &Error{Doc: doc, Field: field, Msg: msg}
}

// joinPath appends a struct field name to a JSON path.
func joinPath(base, field string) string {
	if base == "" {
		return field
	}
	return base + "." + field
}
