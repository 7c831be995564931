package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EncodeLatest validates l and returns its JSON encoding (indented, fields
// in declaration order, trailing newline).
func EncodeLatest(l *Latest) ([]byte, error) { return encode("latest pointer", l) }

// EncodeGeneration validates g and returns its JSON encoding.
func EncodeGeneration(g *Generation) ([]byte, error) { return encode("generation", g) }

// EncodeManifest validates m and returns its JSON encoding.
func EncodeManifest(m *Manifest) ([]byte, error) { return encode("manifest", m) }

// DecodeLatest strictly decodes and validates _latest.json. name is the
// object key, used in errors. Errors wrap ErrCorrupt.
func DecodeLatest(name string, data []byte) (*Latest, error) {
	var l Latest
	if err := decode("latest pointer", name, data, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DecodeGeneration strictly decodes and validates a _generation.json.
// name is the object key, used in errors. Errors wrap ErrCorrupt.
func DecodeGeneration(name string, data []byte) (*Generation, error) {
	var g Generation
	if err := decode("generation", name, data, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// DecodeManifest strictly decodes and validates a _manifest.json. name is
// the object key, used in errors. Errors wrap ErrCorrupt.
func DecodeManifest(name string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := decode("manifest", name, data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

type validatable interface{ Validate() error }

// document is a validatable document that carries its own checksum.
type document interface {
	validatable
	version() int
	sum() *string
}

func (l *Latest) version() int     { return l.FormatVersion }
func (l *Latest) sum() *string     { return &l.Checksum }
func (g *Generation) version() int { return g.FormatVersion }
func (g *Generation) sum() *string { return &g.Checksum }
func (m *Manifest) version() int   { return m.FormatVersion }
func (m *Manifest) sum() *string   { return &m.Checksum }
func (m *SinkMarker) version() int { return m.FormatVersion }
func (m *SinkMarker) sum() *string { return &m.Checksum }

// canonical is the encoding floe writes: indented JSON, fields in
// declaration order, map keys sorted, no HTML escaping, trailing newline.
func canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DocChecksum returns the checksum a format-2 document carries: Checksum
// (the file checksum function) of its canonical encoding with its own
// checksum field empty. d is not modified.
func docChecksum(d document) (string, error) {
	p := d.sum()
	saved := *p
	*p = ""
	data, err := canonical(d)
	*p = saved
	if err != nil {
		return "", err
	}
	return Checksum(data), nil
}

func encode(doc string, v document) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if v.version() < 2 {
		*v.sum() = "" // format 1 had no checksum (kept for golden round trips)
		return canonical(v)
	}
	sum, err := docChecksum(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", doc, err)
	}
	*v.sum() = sum
	data, err := canonical(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", doc, err)
	}
	return data, nil
}

// decode runs the passes of a strict decode: read format_version, check the
// JSON against the Go type's shape, unmarshal and validate, then verify the
// document's own checksum (format 2 on): a document whose bytes changed in
// any way that still parses is caught there.
func decode(doc, name string, data []byte, out document) error {
	wrap := func(err error) error { return withName(err, doc, name) }
	if err := checkVersion(data); err != nil {
		return wrap(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkNext(dec, reflect.TypeOf(out).Elem(), ""); err != nil {
		return wrap(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return wrap(&Error{Msg: fmt.Sprintf("trailing data after the JSON object at byte %d", dec.InputOffset())})
	}
	if err := json.Unmarshal(data, out); err != nil {
		// checkNext accepted what Unmarshal rejects: report, don't hide.
		return wrap(&Error{Msg: "invalid JSON: " + err.Error()})
	}
	if err := out.Validate(); err != nil {
		return wrap(err)
	}
	got := *out.sum()
	switch {
	case out.version() < 2 && got != "":
		return wrap(&Error{Field: "checksum", Msg: "format version 1 documents carry no checksum"})
	case out.version() < 2:
		return nil
	case got == "":
		return wrap(&Error{Field: "checksum", Msg: "missing"})
	}
	want, err := docChecksum(out)
	if err != nil {
		return wrap(&Error{Msg: "re-encode: " + err.Error()})
	}
	if got != want {
		return wrap(&Error{Field: "checksum", Msg: fmt.Sprintf("the document's bytes do not match its checksum %s (they hash to %s): it was changed after floe wrote it", got, want)})
	}
	return nil
}

// checkVersion reads the top-level format_version before anything else, so
// a document of a newer format fails with a version error rather than an
// unknown-field error.
func checkVersion(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &Error{Msg: fmt.Sprintf("want a JSON object, got %s", describe(tok))}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxErr(dec, err)
		}
		key, _ := tok.(string)
		if key != "format_version" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return syntaxErr(dec, err)
			}
			continue
		}
		tok, err = dec.Token()
		if err != nil {
			return syntaxErr(dec, err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			return &Error{Field: "format_version", Msg: fmt.Sprintf("want an integer, got %s", describe(tok))}
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return &Error{Field: "format_version", Msg: fmt.Sprintf("want an integer, got %s", n)}
		}
		if v < MinFormatVersion || v > FormatVersion {
			return &Error{Field: "format_version", Msg: fmt.Sprintf("unsupported format version %d (this release reads %d to %d)", v, MinFormatVersion, FormatVersion)}
		}
		return nil
	}
	return &Error{Field: "format_version", Msg: "missing"}
}

func syntaxErr(dec *json.Decoder, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Msg: "invalid JSON: unexpected end of input"}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &Error{Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	}
	return &Error{Msg: fmt.Sprintf("invalid JSON near byte %d: %v", dec.InputOffset(), err)}
}

var timeType = reflect.TypeOf(time.Time{})

// checkNext reads one JSON value from dec and checks it against Go type t:
// objects for structs with exactly the declared (case-sensitive) keys, each
// present unless tagged omitempty and none duplicated; arrays for slices;
// objects with unique keys for string-keyed maps; integers in range for
// integer kinds; RFC 3339 strings for time.Time; null only for pointers,
// slices and maps. Its recursion is bounded by the depth of t.
func checkNext(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(dec, err)
	}
	return checkValue(dec, tok, t, path)
}

// checkValue checks a value whose first token, tok, was already read.
func checkValue(dec *json.Decoder, tok json.Token, t reflect.Type, path string) error {
	bad := func(want string) error {
		return &Error{Field: path, Msg: fmt.Sprintf("want %s, got %s", want, describe(tok))}
	}
	if t == timeType {
		s, ok := tok.(string)
		if !ok {
			return bad("an RFC 3339 time string")
		}
		var tm time.Time
		if err := tm.UnmarshalText([]byte(s)); err != nil {
			return &Error{Field: path, Msg: fmt.Sprintf("%q is not an RFC 3339 time", s)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if tok == nil {
			return nil
		}
		return checkValue(dec, tok, t.Elem(), path)
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return bad("an object")
		}
		return checkStruct(dec, t, path)
	case reflect.Slice:
		if tok == nil {
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return bad("an array")
		}
		for i := 0; dec.More(); i++ {
			if err := checkNext(dec, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return closing(dec)
	case reflect.Map:
		if tok == nil {
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return bad("an object")
		}
		if t.Key().Kind() != reflect.String {
			return &Error{Field: path, Msg: "unsupported map key type " + t.Key().String()}
		}
		seen := map[string]bool{}
		for dec.More() {
			key, err := objectKey(dec)
			if err != nil {
				return err
			}
			kp := path + "[" + strconv.Quote(key) + "]"
			if seen[key] {
				return &Error{Field: kp, Msg: "duplicate key"}
			}
			seen[key] = true
			if err := checkNext(dec, t.Elem(), kp); err != nil {
				return err
			}
		}
		return closing(dec)
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return bad("a string")
		}
		return nil
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return bad("a boolean")
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return &Error{Field: path, Msg: fmt.Sprintf("%s is not an integer in the range of %s", n, t.Kind())}
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("an unsigned integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return &Error{Field: path, Msg: fmt.Sprintf("%s is not an integer in the range of %s", n, t.Kind())}
		}
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("a number")
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return &Error{Field: path, Msg: fmt.Sprintf("%s is out of range of %s", n, t.Kind())}
		}
		return nil
	default:
		return &Error{Field: path, Msg: "unsupported Go type " + t.String()}
	}
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", syntaxErr(dec, err)
	}
	key, ok := tok.(string)
	if !ok { // json.Decoder guarantees string keys; be defensive anyway.
		return "", &Error{Msg: fmt.Sprintf("invalid JSON near byte %d: object key is %s", dec.InputOffset(), describe(tok))}
	}
	return key, nil
}

// closing consumes the '}' or ']' that ends an object or array.
func closing(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return syntaxErr(dec, err)
	}
	return nil
}

// jsonField is one JSON-visible struct field.
type jsonField struct {
	name     string
	index    int
	required bool
}

func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		fields = append(fields, jsonField{name: name, index: i, required: !omit})
	}
	return fields
}

func checkStruct(dec *json.Decoder, t reflect.Type, path string) error {
	fields := jsonFields(t)
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[f.name] = i
	}
	seen := make([]bool, len(fields))
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		fp := joinPath(path, key)
		i, ok := byName[key]
		if !ok {
			return &Error{Field: fp, Msg: "unknown field"}
		}
		if seen[i] {
			return &Error{Field: fp, Msg: "duplicate field"}
		}
		seen[i] = true
		if err := checkNext(dec, t.Field(fields[i].index).Type, fp); err != nil {
			return err
		}
	}
	if err := closing(dec); err != nil {
		return err
	}
	for i, f := range fields {
		if f.required && !seen[i] {
			return &Error{Field: joinPath(path, f.name), Msg: "missing"}
		}
	}
	return nil
}

// describe names a JSON token for an error message.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return strconv.Quote(v.String())
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return "string " + strconv.Quote(v)
	case json.Number:
		return "number " + string(v)
	case bool:
		return "boolean " + strconv.FormatBool(v)
	default:
		return fmt.Sprintf("%T", tok)
	}
}
