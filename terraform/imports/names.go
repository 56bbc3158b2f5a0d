package imports

import (
	"errors"
	"slices"
	"text/template"
	"text/template/parse"
)

// errWholeAttributes is a template that reads the attributes as a whole: it could
// read any of them, and an index decodes only those its templates name.
var errWholeAttributes = errors.New("reads the attributes as a whole (`.` or `$` outside a with or range): name each attribute it reads, as in {{.id}}")

// attributeNames are the attributes a template reads: the first field of every field
// chain (`.cidr_blocks`, `$.id`). A name that is a field of an element within a with
// or a range is counted too, which only reads an attribute more.
func attributeNames(t *template.Template) ([]string, error) {
	w := &nameWalk{tmpl: t, names: map[string]bool{}, walked: map[walkedTemplate]bool{}}
	if err := w.walk(t.Tree.Root, true); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(w.names))
	for name := range w.names {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

type nameWalk struct {
	tmpl   *template.Template
	names  map[string]bool
	walked map[walkedTemplate]bool
}

// walkedTemplate is a template walked, with the attributes as its dot or another.
type walkedTemplate struct {
	name string
	top  bool
}

// walk visits node; top says whether dot is the attributes there.
func (w *nameWalk) walk(node parse.Node, top bool) error {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := w.walk(c, top); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return w.walk(n.Pipe, top)
	case *parse.PipeNode:
		for _, c := range n.Cmds {
			if err := w.walk(c, top); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, arg := range n.Args {
			if err := w.walk(arg, top); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return w.walk(n.Node, top)
	case *parse.FieldNode:
		w.names[n.Ident[0]] = true
	case *parse.VariableNode:
		if n.Ident[0] == "$" {
			if len(n.Ident) == 1 {
				return errWholeAttributes
			}
			w.names[n.Ident[1]] = true
		}
	case *parse.DotNode:
		if top {
			return errWholeAttributes
		}
	case *parse.IfNode:
		return w.branch(&n.BranchNode, top, top)
	case *parse.WithNode:
		return w.branch(&n.BranchNode, top, false)
	case *parse.RangeNode:
		return w.branch(&n.BranchNode, top, false)
	case *parse.TemplateNode:
		return w.template(n, top)
	}
	return nil
}

// branch visits an if, with or range: its body has dot as inner says, its else the
// dot of the branch.
func (w *nameWalk) branch(n *parse.BranchNode, top, inner bool) error {
	if err := w.walk(n.Pipe, top); err != nil {
		return err
	}
	if err := w.walk(n.List, inner); err != nil {
		return err
	}
	return w.walk(n.ElseList, top)
}

// template visits a template invoked with {{template "name" pipeline}} once: with the
// attributes as its dot when they are passed as they are, else with another dot.
func (w *nameWalk) template(n *parse.TemplateNode, top bool) error {
	passed := false
	if n.Pipe != nil {
		if len(n.Pipe.Decl) == 0 && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
			_, passed = n.Pipe.Cmds[0].Args[0].(*parse.DotNode)
		}
		if !passed || !top {
			if err := w.walk(n.Pipe, top); err != nil {
				return err
			}
		}
	}
	called := w.tmpl.Lookup(n.Name)
	walked := walkedTemplate{name: n.Name, top: passed && top}
	if called == nil || called.Tree == nil || w.walked[walked] {
		return nil
	}
	w.walked[walked] = true
	return w.walk(called.Tree.Root, walked.top)
}
