// Package flinksql is floe's SQL front end: it reads a file of Flink-dialect
// SQL statements and lowers them onto the same spec.Pipeline a YAML spec
// decodes to (docs/sql.md).
package flinksql

import _ "vitess.io/vitess/go/vt/sqlparser"
