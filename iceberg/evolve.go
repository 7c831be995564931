package iceberg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/store"
)

// Schema evolution. An epoch's data files carry the columns of the plan
// that wrote them; when they differ from the table's current schema (an
// aggregate added, removed, renamed with renamed_from or widened), the
// commit that adds the epoch's files also adds the schema they are written
// under and makes it current, as Iceberg's schema evolution does:
//
//   - a column of the same name keeps its field id; a column renamed
//     (Options.Renames, new name -> previous name) keeps the previous
//     column's field id under its new name;
//   - a new column gets a new field id (above last-column-id) and is
//     optional, so older data files read it as null;
//   - a column the files no longer have is dropped from the schema (older
//     data files keep it; readers of the current schema do not see it);
//   - a type changes only as Iceberg allows (int -> long, float -> double,
//     a decimal's precision widened); a required column may become
//     optional.
//
// Every other difference (long -> double, say, as a sum turned avg
// produces) is refused, and so is a change that would drop the partition
// column or give a new column a name that the table's name mapping gives to
// another field (older files without field ids are read through that
// mapping, so the name would read their data into the wrong column).
// CheckSchema runs the same decision without writing, so a run refuses an
// incompatible plan before it commits anything.

// schemaChange is what evolveSchema decided.
type schemaChange struct {
	schema  *iceberg.Schema // the schema to write under (the current one when nothing changed)
	mapping iceberg.NameMapping
	changes []string // human-readable, empty when nothing changed
}

// evolveSchema returns the schema data files of Arrow schema out are
// written under, on top of m's current schema.
func evolveSchema(m *tableMeta, out *arrow.Schema, renames map[string]string) (*schemaChange, error) {
	want, err := icebergSchema(out)
	if err != nil {
		return nil, err
	}
	cur := m.schema
	next := max(m.lastColumnID, cur.HighestFieldID())
	var (
		fields  []iceberg.NestedField
		changes []string
		used    = map[int]bool{}
	)
	for _, wf := range want.Fields() {
		f, ok := cur.FindFieldByName(wf.Name)
		if ok && used[f.ID] {
			ok = false
		}
		if !ok {
			if old := renames[wf.Name]; old != "" && len(out.FieldIndices(old)) == 0 {
				if f, ok = cur.FindFieldByName(old); ok && used[f.ID] {
					ok = false
				}
			}
		}
		if !ok {
			next++
			fields = append(fields, iceberg.NestedField{ID: next, Name: wf.Name, Type: wf.Type})
			changes = append(changes, fmt.Sprintf("add column %s %s", wf.Name, wf.Type))
			continue
		}
		used[f.ID] = true
		nf := f
		nf.Name = wf.Name
		if f.Name != wf.Name {
			changes = append(changes, fmt.Sprintf("rename column %s to %s", f.Name, wf.Name))
		}
		if !f.Type.Equals(wf.Type) {
			if !promotable(f.Type, wf.Type) {
				return nil, fmt.Errorf("column %q is %s in the table and %s in the output: Iceberg cannot change a column's type that way (it allows int to long, float to double and a wider decimal); keep the column's type, give the new column another name, or write to a new table",
					wf.Name, f.Type, wf.Type)
			}
			nf.Type = wf.Type
			changes = append(changes, fmt.Sprintf("widen column %s from %s to %s", wf.Name, f.Type, wf.Type))
		}
		if f.Required && !wf.Required {
			nf.Required = false
			changes = append(changes, fmt.Sprintf("make column %s optional", wf.Name))
		}
		fields = append(fields, nf)
	}
	for _, f := range cur.Fields() {
		if used[f.ID] {
			continue
		}
		for _, pf := range m.spec.Fields() {
			if pf.SourceID() == f.ID {
				return nil, fmt.Errorf("column %q is the table's partition source (%s): the output must keep it", f.Name, pf.Name)
			}
		}
		changes = append(changes, fmt.Sprintf("drop column %s", f.Name))
	}
	mapping, err := m.nameMapping()
	if err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return &schemaChange{schema: cur, mapping: mapping}, nil
	}
	for _, f := range fields {
		i := slices.IndexFunc(mapping, func(mf iceberg.MappedField) bool { return mf.FieldID != nil && *mf.FieldID == f.ID })
		for j, mf := range mapping {
			if j != i && slices.Contains(mf.Names, f.Name) {
				return nil, fmt.Errorf("column %q: the table's name mapping gives that name to field %d (%s), whose older data files hold it; a new column cannot take the name: choose another",
					f.Name, *mf.FieldID, strings.Join(mf.Names, ", "))
			}
		}
		if i < 0 {
			id := f.ID
			mapping = append(mapping, iceberg.MappedField{Names: []string{f.Name}, FieldID: &id})
		} else if !slices.Contains(mapping[i].Names, f.Name) {
			mapping[i].Names = append([]string{f.Name}, mapping[i].Names...)
		}
	}
	return &schemaChange{schema: iceberg.NewSchema(m.maxSchemaID+1, fields...), mapping: mapping, changes: changes}, nil
}

// promotable reports whether Iceberg allows a column of type from to
// become type to.
func promotable(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := to.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() >= f.Precision()
	}
	return false
}

// nameMapping returns the table's default name mapping (a copy), or one
// made from the current schema when the table has none.
func (m *tableMeta) nameMapping() (iceberg.NameMapping, error) {
	raw, ok := m.props[propNameMappingDefault]
	if !ok {
		return m.schema.NameMapping(), nil
	}
	var nm iceberg.NameMapping
	if err := json.Unmarshal([]byte(raw), &nm); err != nil {
		return nil, fmt.Errorf("%w: table property %s: %v", ErrCorrupt, propNameMappingDefault, err)
	}
	return nm, nil
}

// parquetArrowSchema reads the Arrow schema of a Parquet file's columns.
func parquetArrowSchema(data []byte) (sc *arrow.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc, err = nil, fmt.Errorf("read Parquet footer: %v", r)
		}
	}()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read Parquet footer: %w", err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	sc, err = pqarrow.FromParquet(md.Schema, nil, md.KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("read Parquet schema: %w", err)
	}
	return sc, nil
}

// CheckSchema reports whether data files of Arrow schema out can be added
// to the table, evolving its schema if needed, and which changes that
// makes (none when the table does not exist yet or already fits). It
// writes nothing.
func (t *Table) CheckSchema(ctx context.Context, out *arrow.Schema) ([]string, error) {
	s, err := t.load(ctx)
	if err != nil || s == nil {
		return nil, err
	}
	sc, err := evolveSchema(s.meta, out, t.opts.Renames)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", t.loc, err)
	}
	return sc.changes, nil
}

// CheckDataFile reports whether the data file at path (relative to the
// table location) can be added to the table, evolving its schema if
// needed, and which changes that makes. It writes nothing.
func (t *Table) CheckDataFile(ctx context.Context, path string) ([]string, error) {
	data, err := store.Read(ctx, t.st, path)
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", path, err)
	}
	out, err := parquetArrowSchema(data)
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", path, err)
	}
	return t.CheckSchema(ctx, out)
}
