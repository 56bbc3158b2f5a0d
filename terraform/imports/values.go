package imports

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tidwall/gjson"
)

// A template beyond what an import ID renders itself runs on text/template, over the
// attributes it names, decoded as encoding/json decodes them (numbers as json.Number)
// but for two kinds: a list is read element by element as the template ranges over it,
// and an object, or a list within a list, is never read.

// list is a non-empty list attribute: a template may range over it and print it, but
// not index it nor take its length.
type list func(yield func(any) bool)

// Format prints the list as fmt prints its decoded []any, each element with the verb and
// flags given, until it is longer than an import ID may be.
func (l list) Format(f fmt.State, verb rune) {
	format := fmt.FormatString(f, verb)
	counted := &countingWriter{w: f}
	counted.Write([]byte("["))
	first := true
	for element := range l {
		if !first {
			counted.Write([]byte(" "))
		}
		first = false
		if element == nil {
			// fmt prints a nil element of a slice so whatever the verb.
			counted.Write([]byte("<nil>"))
		} else {
			fmt.Fprintf(counted, format, element)
		}
		if counted.n > maxIDLength {
			return
		}
	}
	counted.Write([]byte("]"))
}

// String makes the list printable by text/template, which prints no func that is not a
// fmt.Stringer.
func (l list) String() string { return fmt.Sprint(l) }

type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}

// unread is an object, or a list within a list: nil when it is empty, so that it is
// false as its decoded value would be. It prints as no value, so no ID is made of it,
// and cannot be ranged over.
type unread struct{}

func (*unread) String() string { return noValue }

// unreadValue stands for v, an object or a list, which is not read.
func unreadValue(v gjson.Result) *unread {
	if empty(v) {
		return nil
	}
	return &unread{}
}

// decoded is the value of v for text/template.
func decoded(v gjson.Result) any {
	switch v.Type {
	case gjson.String:
		return str(v)
	case gjson.Number:
		return json.Number(v.Raw)
	case gjson.True:
		return true
	case gjson.False:
		return false
	case gjson.Null:
		return nil
	}
	if !v.IsArray() {
		return unreadValue(v)
	}
	if empty(v) {
		return []any{}
	}
	return list(func(yield func(any) bool) {
		v.ForEach(func(_, element gjson.Result) bool {
			if element.Type == gjson.JSON {
				return yield(unreadValue(element))
			}
			return yield(decoded(element))
		})
	})
}
