// Package expr compiles floe's filter and projection expressions and evaluates
// them a column at a time over Arrow record batches.
//
// Expressions use expr-lang syntax (github.com/expr-lang/expr), but only its
// parser: the AST is type-checked against an Arrow schema and evaluated by
// vectorised kernels here, never by expr-lang's per-row VM.
//
// # Language
//
//   - Column references: identifiers (bytes, user_id) or $env["any name"] for
//     names that are not identifiers. Backquotes are string literals in
//     expr-lang, not quoted names.
//   - Literals: integers, floats, 'single' or "double" quoted strings, true,
//     false, nil, and timestamp("2024-01-01T00:00:00Z") (RFC 3339 or a date).
//     A string literal compared with a timestamp is read as a timestamp.
//   - Arithmetic: unary -, + - * / %. Integers of any width compute as int64
//     and wrap on overflow, like Go and expr-lang; int mixed with float is
//     float64. / always divides as float64 (expr-lang: 7 / 2 == 3.5); % needs
//     integers. A zero divisor gives null, never a panic or Inf. Strings
//     concatenate with +.
//   - Comparison: == != < <= > >= on numbers, strings (byte order) and
//     timestamps (any units; converted to the finer one); == and != on bools.
//   - Logic: and/&&, or/||, not/!, in [list], not in [list].
//   - Strings: contains, startsWith, endsWith, matches (a literal RE2 pattern,
//     compiled once), lower(s), upper(s), len(s) (in runes, like expr-lang).
//   - Others: abs(x), coalesce(a, b, ...) and a ?? b, is_null(x).
//   - now() is rejected: an epoch that is re-run must keep the same rows.
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
