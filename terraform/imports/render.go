package imports

import (
	"errors"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/tidwall/gjson"
)

// maxIDLength is the longest import ID: longer is no ID terraform takes, and a state
// ranging a template over a long list makes no longer one.
const maxIDLength = 16 << 10

// noValue is what text/template prints for a value that is not there; an ID holding it
// is no ID.
const noValue = "<no value>"

var (
	errNotSimple = errors.New("not within what an import ID renders itself")
	errTooLong   = errors.New("import ID too long")
)

// idTemplate is the import ID template of a resource type and the attributes it reads.
type idTemplate struct {
	tmpl  *template.Template
	names []string
	// simple says the template is only text, attributes printed, and if, with and
	// range over them: it is rendered from the state as it is, where text/template would
	// need every value, and every element of a list it ranges over, decoded.
	simple bool
}

func newIDTemplate(tmpl *template.Template) (*idTemplate, error) {
	names, err := attributeNames(tmpl)
	if err != nil {
		return nil, err
	}
	t := &idTemplate{tmpl: tmpl, names: names}
	t.simple = len(tmpl.Templates()) == 1 && simple(tmpl.Tree.Root, true)
	return t, nil
}

// simple says whether n is within what render handles; top says whether dot is the
// attributes there.
func simple(n parse.Node, top bool) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return true
		}
		for _, c := range n.Nodes {
			if !simple(c, top) {
				return false
			}
		}
		return true
	case *parse.TextNode, *parse.CommentNode:
		return true
	case *parse.ActionNode:
		return simpleArg(n.Pipe, top) != nil
	case *parse.IfNode:
		return simpleArg(n.Pipe, top) != nil && simple(n.List, top) && simple(n.ElseList, top)
	case *parse.WithNode:
		return simpleArg(n.Pipe, top) != nil && simple(n.List, false) && simple(n.ElseList, top)
	case *parse.RangeNode:
		return simpleArg(n.Pipe, top) != nil && simple(n.List, false) && simple(n.ElseList, top)
	}
	return false
}

// simpleArg is the one argument of a pipeline that is an attribute (at the top) or dot
// (within a with or range), else nil.
func simpleArg(p *parse.PipeNode, top bool) parse.Node {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return nil
	}
	switch arg := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		if top && len(arg.Ident) == 1 {
			return arg
		}
	case *parse.DotNode:
		if !top {
			return arg
		}
	}
	return nil
}

// values are the attributes an ID template reads, as found in an instance's attributes.
type values struct {
	names []string
	found []gjson.Result
}

// read finds the attributes named in attrs, the later of duplicates, as encoding/json
// would; it says whether every one is there.
func (v *values) read(names []string, attrs gjson.Result) bool {
	v.names, v.found = names, slices.Grow(v.found[:0], len(names))[:len(names)]
	clear(v.found)
	if !attrs.IsObject() {
		return len(names) == 0
	}
	attrs.ForEach(func(key, value gjson.Result) bool {
		for i, name := range names {
			if name == key.Str {
				v.found[i] = value
			}
		}
		return true
	})
	for _, r := range v.found {
		if !r.Exists() {
			return false
		}
	}
	return true
}

func (v *values) get(name string) gjson.Result {
	for i, n := range v.names {
		if n == name {
			return v.found[i]
		}
	}
	return gjson.Result{}
}

// renderer renders a simple template as text/template would with the attributes decoded.
type renderer struct {
	values *values
	out    *limitedBuilder
}

// dot is the value of dot within a with or range; element says it is an element of a
// list, which is not read when it is a list itself.
type dot struct {
	v       gjson.Result
	element bool
}

func (r *renderer) renderTo(root *parse.ListNode, out *limitedBuilder) error {
	r.out = out
	return r.list(root, dot{})
}

func (r *renderer) list(l *parse.ListNode, d dot) error {
	if l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if err := r.node(n, d); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) arg(p *parse.PipeNode, d dot) dot {
	if f, ok := p.Cmds[0].Args[0].(*parse.FieldNode); ok {
		return dot{v: r.values.get(f.Ident[0])}
	}
	return d
}

func (r *renderer) node(n parse.Node, d dot) error {
	switch n := n.(type) {
	case *parse.TextNode:
		return r.out.write(string(n.Text))
	case *parse.ActionNode:
		if v := r.arg(n.Pipe, d); !v.element || !v.v.IsArray() {
			return writeValue(r.out, v.v, false)
		}
		return r.out.write(noValue)
	case *parse.IfNode:
		if truth(r.arg(n.Pipe, d).v) {
			return r.list(n.List, d)
		}
		return r.list(n.ElseList, d)
	case *parse.WithNode:
		if v := r.arg(n.Pipe, d); truth(v.v) {
			return r.list(n.List, v)
		}
		return r.list(n.ElseList, d)
	case *parse.RangeNode:
		return r.rangeOver(n, d)
	}
	return nil
}

// rangeOver ranges over a list as text/template does over its decoded []any: null is
// empty, and anything but a list that is read cannot be ranged over.
func (r *renderer) rangeOver(n *parse.RangeNode, d dot) error {
	v := r.arg(n.Pipe, d)
	if v.v.Type == gjson.Null {
		return r.list(n.ElseList, d)
	}
	if !v.v.IsArray() || v.element {
		return errNotSimple
	}
	ran := false
	var err error
	v.v.ForEach(func(_, element gjson.Result) bool {
		ran = true
		err = r.list(n.List, dot{v: element, element: true})
		return err == nil
	})
	if err != nil || ran {
		return err
	}
	return r.list(n.ElseList, d)
}

// truth is text/template's truth of the decoded value: a number is a json.Number, a
// string and true even when 0.
func truth(v gjson.Result) bool {
	switch v.Type {
	case gjson.String:
		return v.Str != ""
	case gjson.Number, gjson.True:
		return true
	case gjson.JSON:
		return !empty(v)
	}
	return false
}

// empty says whether an array or object has no element.
func empty(v gjson.Result) bool {
	found := false
	v.ForEach(func(_, _ gjson.Result) bool {
		found = true
		return false
	})
	return !found
}

// writeValue prints v as text/template prints its decoded value (fmt's %v): null as
// noValue, or as fmt prints nil within a list (nested). An object, or a list within a list, is printed as noValue: no ID is
// made of one, and printing a list of lists nested as deep as a state may nest them
// would take time in the square of their depth.
func writeValue(out *limitedBuilder, v gjson.Result, nested bool) error {
	switch v.Type {
	case gjson.String:
		return out.write(str(v))
	case gjson.Number:
		return out.write(v.Raw)
	case gjson.True:
		return out.write("true")
	case gjson.False:
		return out.write("false")
	case gjson.Null:
		if nested {
			return out.write("<nil>")
		}
		return out.write(noValue)
	}
	if !v.IsArray() || nested {
		return out.write(noValue)
	}
	if err := out.write("["); err != nil {
		return err
	}
	var err error
	first := true
	v.ForEach(func(_, element gjson.Result) bool {
		if !first {
			err = out.write(" ")
		}
		first = false
		if err == nil {
			err = writeValue(out, element, true)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	return out.write("]")
}

// limitedBuilder is a strings.Builder that refuses to grow beyond maxIDLength.
type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) write(s string) error {
	if b.Len()+len(s) > maxIDLength {
		return errTooLong
	}
	b.WriteString(s)
	return nil
}

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxIDLength {
		return 0, errTooLong
	}
	return b.Builder.Write(p)
}
