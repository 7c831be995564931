package formats

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"
)

func decodeCSV(file string, data []byte, opts DecodeOptions) (*Decoded, error) {
	p, err := newPlan(file, opts)
	if err != nil {
		return nil, err
	}
	data = stripBOM(data)
	r := csv.NewReader(bytes.NewReader(data))
	r.ReuseRecord = true
	r.FieldsPerRecord = -1
	if opts.CSV.Delimiter != 0 {
		r.Comma = opts.CSV.Delimiter
	}
	// index[i] is the file field of declared column i.
	index := make([]int, len(p.names))
	for i := range index {
		index[i] = i
	}
	width := len(p.names)
	if !opts.CSV.NoHeader {
		hdr, err := r.Read()
		if errors.Is(err, io.EOF) {
			rb := newRowBuilder(p)
			return rb.result(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: CSV header: %w", file, err)
		}
		pos := make(map[string]int, len(hdr))
		for j, h := range hdr {
			h = strings.TrimSpace(h)
			if _, dup := pos[h]; !dup {
				pos[h] = j
			}
		}
		for i, n := range p.names {
			j, ok := pos[n]
			if !ok {
				return nil, fmt.Errorf("%s: CSV header has no column %q", file, n)
			}
			index[i] = j
		}
		width = len(hdr)
	}
	// Fields are cut from the file at ASCII bytes or whole delimiter runes,
	// so when the whole file is valid UTF-8 every field is.
	checkUTF8 := !utf8.Valid(data)
	rb := newRowBuilder(p)
	rb.reserve(bytes.Count(data, []byte{'\n'}) + 1)
	for {
		start := r.InputOffset()
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		end := r.InputOffset()
		raw := bytes.TrimRight(data[start:end], "\r\n")
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				rb.reject(int64(pe.StartLine), "invalid CSV: "+pe.Err.Error(), raw)
				continue
			}
			rb.release()
			return nil, fmt.Errorf("%s: CSV: %w", file, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != width {
			rb.reject(int64(line), fmt.Sprintf("CSV record has %d fields, want %d", len(rec), width), raw)
			continue
		}
		rb.resetCells()
		reason := ""
		for i, j := range index {
			f := rec[j]
			if p.kinds[i] == kString {
				if checkUTF8 && !utf8.ValidString(f) {
					reason = rb.badUTF8(i, []byte(f))
					break
				}
			} else if f == "" {
				continue // null
			}
			if reason = rb.setText(i, unsafe.Slice(unsafe.StringData(f), len(f))); reason != "" {
				break
			}
		}
		if reason == "" {
			reason = rb.checkEventTime(true) // the column exists; an empty field is null
		}
		if reason != "" {
			rb.reject(int64(line), reason, raw)
			continue
		}
		rb.commit()
	}
	return rb.result(), nil
}
