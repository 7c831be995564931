package spec

import (
	"fmt"
	"math"
	"strconv"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// node is a YAML value reduced to what the decoder needs: its kind, its
// position, and ordered children. Anchors and aliases are resolved; tags
// are dropped.
type node struct {
	kind  nodeKind
	pos   Pos
	str   string // scalar text (unquoted); "" for null
	sType scalarType
	keys  []*node // mapping keys (scalars), in document order
	vals  []*node // mapping values, parallel to keys
	items []*node // sequence items
}

type nodeKind int

const (
	kindScalar nodeKind = iota
	kindMap
	kindSeq
)

type scalarType int

const (
	scalarString scalarType = iota
	scalarInt
	scalarFloat
	scalarBool
	scalarNull
)

// describe names a node's kind for "expected X, got Y" messages.
func (n *node) describe() string {
	switch n.kind {
	case kindMap:
		return "a mapping"
	case kindSeq:
		return "a list"
	}
	switch n.sType {
	case scalarInt:
		return "an integer"
	case scalarFloat:
		return "a number"
	case scalarBool:
		return "a boolean"
	case scalarNull:
		return "null"
	}
	return excerpt(n.str)
}

type converter struct {
	anchors map[string]*node
}

func tokenPos(tk *token.Token) Pos {
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{Line: tk.Position.Line, Column: tk.Position.Column}
}

// convert turns an AST node into a node. A nil AST node is null. Errors
// are *FieldError with a position where one is known.
func (c *converter) convert(n ast.Node, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, &FieldError{Msg: fmt.Sprintf("nesting deeper than %d levels", maxDepth)}
	}
	if n == nil {
		return &node{kind: kindScalar, sType: scalarNull}, nil
	}
	pos := tokenPos(n.GetToken())
	switch v := n.(type) {
	case *ast.DocumentNode:
		return c.convert(v.Body, depth+1)
	case *ast.NullNode:
		return &node{kind: kindScalar, sType: scalarNull, pos: pos}, nil
	case *ast.StringNode:
		return &node{kind: kindScalar, sType: scalarString, str: v.Value, pos: pos}, nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return &node{kind: kindScalar, sType: scalarString, str: s, pos: pos}, nil
	case *ast.IntegerNode:
		return &node{kind: kindScalar, sType: scalarInt, str: intText(v), pos: pos}, nil
	case *ast.FloatNode:
		return &node{kind: kindScalar, sType: scalarFloat, str: strconv.FormatFloat(v.Value, 'g', -1, 64), pos: pos}, nil
	case *ast.InfinityNode:
		return &node{kind: kindScalar, sType: scalarFloat, str: strconv.FormatFloat(v.Value, 'g', -1, 64), pos: pos}, nil
	case *ast.NanNode:
		return &node{kind: kindScalar, sType: scalarFloat, str: strconv.FormatFloat(math.NaN(), 'g', -1, 64), pos: pos}, nil
	case *ast.BoolNode:
		return &node{kind: kindScalar, sType: scalarBool, str: strconv.FormatBool(v.Value), pos: pos}, nil
	case *ast.TagNode:
		return c.convert(v.Value, depth+1)
	case *ast.AnchorNode:
		out, err := c.convert(v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		if v.Name != nil {
			c.anchors[v.Name.GetToken().Value] = out
		}
		return out, nil
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.GetToken().Value
		}
		out, ok := c.anchors[name]
		if !ok {
			return nil, &FieldError{Pos: pos, Msg: "unknown alias " + excerpt(name)}
		}
		return out, nil
	case *ast.MappingNode:
		out := &node{kind: kindMap, pos: pos}
		if len(v.Values) > 0 {
			out.pos = tokenPos(v.Values[0].Key.GetToken())
		}
		for _, mv := range v.Values {
			if err := c.addPair(out, mv, depth); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *ast.MappingValueNode:
		out := &node{kind: kindMap, pos: tokenPos(v.Key.GetToken())}
		if err := c.addPair(out, v, depth); err != nil {
			return nil, err
		}
		return out, nil
	case *ast.SequenceNode:
		out := &node{kind: kindSeq, pos: pos}
		for _, it := range v.Values {
			cn, err := c.convert(it, depth+1)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, cn)
		}
		return out, nil
	case *ast.MappingKeyNode:
		return c.convert(v.Value, depth+1)
	case *ast.CommentGroupNode, *ast.CommentNode:
		return &node{kind: kindScalar, sType: scalarNull, pos: pos}, nil
	}
	return nil, &FieldError{Pos: pos, Msg: fmt.Sprintf("unsupported YAML construct %s", n.Type())}
}

func (c *converter) addPair(m *node, mv *ast.MappingValueNode, depth int) error {
	if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
		return &FieldError{Pos: tokenPos(mv.Key.GetToken()), Msg: "merge keys (<<) are not supported"}
	}
	k, err := c.convert(mv.Key, depth+1)
	if err != nil {
		return err
	}
	if k.kind != kindScalar {
		return &FieldError{Pos: k.pos, Msg: "mapping keys must be scalars"}
	}
	val, err := c.convert(mv.Value, depth+1)
	if err != nil {
		return err
	}
	if val.sType == scalarNull && val.pos == (Pos{}) {
		val.pos = k.pos
	}
	m.keys = append(m.keys, k)
	m.vals = append(m.vals, val)
	return nil
}

func intText(v *ast.IntegerNode) string {
	switch x := v.Value.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case int:
		return strconv.Itoa(x)
	}
	if tk := v.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}
