// Package expr compiles floe's filter and projection expressions and evaluates
// them a column at a time over Arrow record batches.
//
// Expressions use expr-lang syntax (github.com/expr-lang/expr), but only its
// parser: the AST is type-checked against an Arrow schema and evaluated by
// vectorised kernels here, never by expr-lang's per-row VM.
//
// The user documentation of the language is docs/expressions.md; this is its
// summary, and the two change together.
//
// # Language
//
//   - Column references: identifiers (bytes, user_id) or $env["any name"] for
//     names that are not identifiers. Backquotes are string literals in
//     expr-lang, not quoted names.
//   - Literals: integers, floats, 'single' or "double" quoted strings, true,
//     false, nil, and timestamp("2024-01-01T00:00:00Z") (RFC 3339 or a date).
//     A string literal compared with a timestamp is read as a timestamp.
//   - No comments: expr-lang's lexer skips // and /* */; here // is integer
//     division, and /*, # and -- (SQL's comment, which expr-lang reads as two
//     minus signs) are refused at their position (prepare, lex.go).
//   - Arithmetic: unary -, + - * / // %. Integers of any width compute as
//     int64; an int64 result that overflows is null, never wrapped. int mixed
//     with float is float64. / always divides as float64 (expr-lang: 7 / 2 ==
//     3.5). // is integer division truncating toward zero (-7 // 2 == -3, as
//     DuckDB's // and SQL's integer division) and % its remainder with the
//     sign of the dividend (-7 % 2 == -1); both need integers (a float
//     operand of // is a compile error: Python floors, DuckDB divides). A zero
//     divisor gives null, never a panic or Inf. Strings concatenate with +.
//   - Comparison: == != < <= > >= on numbers, strings (byte order) and
//     timestamps (any units; converted to the finer one); == and != on bools.
//     a < b < c is a < b and b < c (expr-lang).
//   - Logic: and/&&, or/||, not/!, in [list], not in [list]. || is logical
//     or, not SQL's concatenation. not binds tighter than comparisons in
//     expr-lang, so not x == y without parentheses is refused (bareNot).
//   - Strings: contains, startsWith, endsWith, matches (a literal RE2 pattern,
//     compiled once), lower(s), upper(s), len(s) (in runes, like expr-lang).
//   - Others: abs(x), coalesce(a, b, ...) and a ?? b, is_null(x). ?? binds
//     tightest in expr-lang (-a ?? 5 is -(a ?? 5)), so an unparenthesized ??
//     on the right of another operator is refused (bareCoalesce).
//   - now() is rejected: an epoch that is re-run must keep the same rows.
//
// # Conditionals and let
//
//   - c ? a : b (nestable), if c { a } else if d { b } else { e }, and
//     case(c1, v1, c2, v2, ..., [else]) like SQL's searched CASE. The first
//     branch whose condition is true wins; a false or null condition falls
//     through (SQL CASE WHEN); without else the result is null. The values
//     meet at one type: int64 with float64 at float64, timestamps at the
//     finer unit, nil with anything; other mixes are compile errors.
//     Every branch is evaluated over the whole batch and rows are picked
//     after, so a branch must be safe on rows it does not pick (every
//     built-in is: errors are nulls, never failures).
//   - let x = value; body binds x (evaluated once per batch) in body; it
//     shadows a column of that name ($env["x"] still reads the column).
//
// # Functions
//
// Every function returns null when any argument is null (except coalesce,
// is_null and case). Arguments that must be constant are checked at compile
// time; errors name the function and the argument:
// `substring() argument 2 (start) needs int64, got string`.
//
// Numbers:
//   - floor(x), ceil(x), trunc(x): float64 on a float64, x itself on an int64.
//   - round(x[, digits]): half away from zero (DuckDB's round of a double);
//     digits is a constant and may be negative; an int64 stays int64.
//   - cast(x, 'int64' | 'float64' | 'string' | 'bool' | 'timestamp'): a value
//     that cannot be converted is null (DuckDB's TRY_CAST); a float to int64
//     rounds to the nearest, ties to even (DuckDB's CAST); strings to int64
//     must be decimal integers. The conversion table is in docs/expressions.md.
//
// Strings (positions count characters, i.e. runes, from 1, as in SQL):
//   - length(s) (= len), lower, upper, trim(s[, chars]), ltrim, rtrim.
//   - substring(s, start[, len]): characters start .. start+len-1 that exist
//     (substring('héllo', 2, 3) = 'éll'; a start below 1 still counts from
//     there, so substring(s, 0, 2) is one character); a negative len is null
//     (a compile error when constant).
//   - concat(s, ...): null if any argument is null (unlike PostgreSQL's
//     concat, which skips nulls: wrap an argument in coalesce(x, "")).
//   - split_part(s, sep, n): field n counting from 1, or from -1 at the end;
//     "" when there is no such field; n = 0 is null; an empty sep does not split.
//   - replace(s, from, to): every occurrence; an empty from changes nothing.
//   - starts_with(s, prefix), ends_with(s, suffix). contains has no function
//     form: contains is an operator in expr-lang, so write s contains 'x'.
//   - regexp_match(s, pattern) and regexp_extract(s, pattern[, group]): RE2
//     syntax; the pattern must be a constant and is compiled once (an invalid
//     one is a compile error naming the argument). regexp_extract returns the
//     group (default 0, the whole match) of the first match, and null when
//     nothing matches or the group took no part in the match.
//
// Dates and times take timestamps of any unit and compute in UTC (a column's
// time zone label does not change results):
//   - date_trunc(unit, ts): unit 'second', 'minute', 'hour', 'day', 'week'
//     (weeks start on Monday), 'month', 'quarter' or 'year'; the result has
//     the type of ts.
//   - extract(field, ts) and date_part(field, ts): int64 'year', 'quarter',
//     'month', 'day', 'doy' (1-366), 'dow' (0 = Sunday .. 6), 'isodow'
//     (1 = Monday .. 7), 'hour', 'minute', 'second', 'epoch' (whole seconds).
//   - format_time(ts, layout): strftime layouts (chosen over Go's reference
//     layouts because SQL users know them): %Y %m %d %H %M %S, %f
//     (microseconds, 6 digits), %j (day of year), %y, %a %A (weekday), %b %B
//     (month), %p %I (12-hour clock), %u (1-7, Monday first), %w (0-6, Sunday
//     first), %s (Unix seconds), %Z (UTC), %z (+0000), %F (%Y-%m-%d), %T
//     (%H:%M:%S), %%. Other directives are compile errors.
//   - unit, field and layout must be constants.
//
// User-defined scalar functions are Go funcs registered in a [Functions] set
// and passed to the compilers with [WithFunctions]; see [Functions] for the
// accepted signatures and the determinism contract.
//
// # Nulls
//
// SQL semantics: an operation with a null operand is null, with these
// exceptions. and/or are three-valued (false and null is false, true or null
// is true). is_null(x), x == nil and x != nil test for null and are never
// null themselves (x == nil is expr-lang's null test, not SQL's always-null
// comparison). coalesce returns its first non-null argument. x in [..] is
// null when x is null, or when nothing matches and the list contains nil.
// Filter drops rows where the predicate is null.
//
// Subtrees made of literals only are folded at compile time.
//
// # Arrow memory
//
// expr releases the Arrow data it allocates, as Arrow's reference counting
// documents. [Expr.Eval], [Filter] and [Projection.Apply] allocate new buffers
// from the allocator they are given and return arrays or batches the caller
// releases; every intermediate is released before they return. A result may
// share buffers with the input (a bare column reference, a filter that keeps
// every row returns the input batch itself) through an extra reference, so
// the caller releases input and result independently. Nothing is retained
// after a call. TestFilterThenProjectReleasesArrowMemory and the tests of
// Eval, Filter and Projection check this with memory.NewCheckedAllocator.
package expr
