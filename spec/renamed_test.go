package spec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAggregateMappingForm: an aggregate is a string or a mapping
// {expr, renamed_from}; both forms mix in one window, in block and flow
// style, and old specs (strings only) decode as before.
func TestAggregateMappingForm(t *testing.T) {
	text := strings.Replace(base, `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`, `aggregates:
        clicks: "count()"
        bytes_total: {expr: "sum(bytes)", renamed_from: total_bytes}
        pages:
          expr: count_distinct(page)
        hi: {expr: "MAX( bytes )"}`, 1)
	p, err := Parse("clicks.yaml", []byte(text), "/srv/p")
	if err != nil {
		t.Fatal(err)
	}
	want := []Aggregate{
		{Name: "clicks", Func: Count},
		{Name: "bytes_total", Func: Sum, Column: "bytes", RenamedFrom: "total_bytes"},
		{Name: "pages", Func: CountDistinct, Column: "page"},
		{Name: "hi", Func: Max, Column: "bytes"},
	}
	if got := p.Operators[1].Window.Aggregates; !reflect.DeepEqual(got, want) {
		t.Fatalf("aggregates %+v, want %+v", got, want)
	}
	built := NewTumbling(time.Minute).Agg("clicks", Count, "").AggRenamed("bytes_total", Sum, "bytes", "total_bytes")
	if !reflect.DeepEqual(built.Aggregates, want[:2]) {
		t.Fatalf("builder: %+v", built.Aggregates)
	}
}

func TestAggregateMappingErrors(t *testing.T) {
	const old = `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`
	cases := []struct {
		name, new string
		want      []wantErr
	}{
		{"unknown field", `aggregates: {clicks: "count()", total_bytes: {expr: "sum(bytes)", renamed: old}}`,
			[]wantErr{{`|renamed: old`, `operators[1].window.aggregates.total_bytes.renamed: unknown field (allowed: expr, renamed_from)`}}},
		{"no expr", `aggregates: {clicks: "count()", total_bytes: {renamed_from: old}}`,
			[]wantErr{{`total_bytes: {|renamed_from`, `operators[1].window.aggregates.total_bytes: the mapping form needs expr, e.g. {expr: "sum(bytes)", renamed_from: old_name}`}}},
		{"expr not a string", `aggregates: {clicks: "count()", total_bytes: {expr: [sum]}}`,
			[]wantErr{{`expr: |[sum]`, `operators[1].window.aggregates.total_bytes: expected a string such as "sum(bytes)", or a mapping {expr: "sum(bytes)", renamed_from: old_name}, got a list`}}},
		{"list instead of aggregate", `aggregates: {clicks: "count()", total_bytes: [sum]}`,
			[]wantErr{{`total_bytes: |[sum]`, `operators[1].window.aggregates.total_bytes: expected a string such as "sum(bytes)", or a mapping {expr: "sum(bytes)", renamed_from: old_name}, got a list`}}},
		{"bad expr in mapping", `aggregates: {clicks: "count()", total_bytes: {expr: "summ(bytes)", renamed_from: old}}`,
			[]wantErr{{`expr: |"summ`, `operators[1].window.aggregates.total_bytes: unknown function "summ" (did you mean sum?)`}}},
		{"empty renamed_from", `aggregates: {clicks: "count()", total_bytes: {expr: "sum(bytes)", renamed_from: ""}}`,
			[]wantErr{{`renamed_from: |""`, `operators[1].window.aggregates.total_bytes.renamed_from: empty: name the aggregate's previous name, or leave renamed_from out`}}},
		{"own name", `aggregates: {clicks: "count()", total_bytes: {expr: "sum(bytes)", renamed_from: total_bytes}}`,
			[]wantErr{{`renamed_from: |total_bytes`, `operators[1].window.aggregates.total_bytes.renamed_from: is the aggregate's own name; name its previous name, or leave renamed_from out`}}},
		{"same renamed_from twice", `aggregates: {clicks: {expr: "count()", renamed_from: old}, total_bytes: {expr: "sum(bytes)", renamed_from: old}}`,
			[]wantErr{{`sum(bytes)", renamed_from: |old`, `operators[1].window.aggregates.total_bytes.renamed_from: old is also the renamed_from of clicks: one old aggregate can become only one new one`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(base, old, c.new, 1)
			if text == base {
				t.Fatal("edit did not apply")
			}
			_, err := Parse("clicks.yaml", []byte(text), "/srv/p")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse: %v, want ErrInvalid", err)
			}
			var want []string
			for _, w := range c.want {
				want = append(want, fmt.Sprintf("clicks.yaml:%s: %s", posOf(t, text, w.at), w.msg))
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n got: %s\nwant: %s", got, strings.Join(want, "\n"))
			}
		})
	}
}

// TestRenamedFromSwapAndGoBuilt: two aggregates may swap names (each names
// the other), and a Go-built window is validated by the same rules.
func TestRenamedFromSwapAndGoBuilt(t *testing.T) {
	text := strings.Replace(base, `aggregates: {clicks: "count()", total_bytes: "sum(bytes)"}`,
		`aggregates: {a: {expr: "count()", renamed_from: b}, b: {expr: "count(page)", renamed_from: a}}`, 1)
	if _, err := Parse("clicks.yaml", []byte(text), "/srv/p"); err != nil {
		t.Fatalf("swap: %v", err)
	}
	p, err := Parse("clicks.yaml", []byte(base), "/srv/p")
	if err != nil {
		t.Fatal(err)
	}
	p.Operators[1].Window.Aggregates = NewTumbling(time.Minute).AggRenamed("a", Count, "", " ").AggRenamed("b", Count, "", "x").AggRenamed("c", Count, "", "x").Aggregates
	err = p.Validate()
	for _, w := range []string{
		`operators[1].window.aggregates.a.renamed_from: empty: name the aggregate's previous name, or leave renamed_from out`,
		`operators[1].window.aggregates.c.renamed_from: x is also the renamed_from of b: one old aggregate can become only one new one`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate: %v\nwant %s", err, w)
		}
	}
}
