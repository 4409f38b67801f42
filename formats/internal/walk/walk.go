// Package walk holds what the vendor request parsers share: the stack of
// the JSON path a parser is validating, rendered as a parameter name only
// when an error names it, and the typed readers of member values, whose
// errors each vendor words in its own way (a Dialect).
//
// Nothing here allocates unless it reports an error.
package walk

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Style is how a path is rendered as a parameter name.
type Style uint8

// The path styles.
const (
	// Brackets puts list indexes, and names taken from the body, in
	// brackets: messages[2].content[0].type (OpenAI, Google).
	Brackets Style = iota
	// Dots joins every element with dots: messages.2.content.0.type
	// (Anthropic).
	Dots
)

// maxDepth is how many elements a path keeps; deeper elements are counted
// but left out of the rendered name.
const maxDepth = 12

type elem struct {
	name  string // "" for a list index or a raw name
	raw   []byte // a name taken from the body (a map key), not copied
	index int
}

// Path is the JSON path of the value being validated, as a stack.
type Path struct {
	elems [maxDepth]elem
	n     int
	style Style
}

// Push enters the member name.
func (p *Path) Push(name string) {
	if p.n < len(p.elems) {
		p.elems[p.n] = elem{name: name}
	}
	p.n++
}

// PushRaw enters a member whose name is taken from the body (a map key);
// the body must not change while the path is in use.
func (p *Path) PushRaw(name []byte) {
	if p.n < len(p.elems) {
		p.elems[p.n] = elem{raw: name}
	}
	p.n++
}

// PushIndex enters the list element i.
func (p *Path) PushIndex(i int) {
	if p.n < len(p.elems) {
		p.elems[p.n] = elem{index: i}
	}
	p.n++
}

// Pop leaves the innermost element.
func (p *Path) Pop() { p.n-- }

// Depth is the number of elements on the path.
func (p *Path) Depth() int { return p.n }

// Truncate leaves every element past the first n (an error leaves the
// path where it was found).
func (p *Path) Truncate(n int) { p.n = n }

// Param renders the path, with child appended when not empty.
func (p *Path) Param(child string) string {
	var b strings.Builder
	for i := 0; i < p.n && i < len(p.elems); i++ {
		e := p.elems[i]
		switch {
		case p.style == Dots:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			switch {
			case e.raw != nil:
				b.Write(e.raw)
			case e.name != "":
				b.WriteString(e.name)
			default:
				b.WriteString(strconv.Itoa(e.index))
			}
		case e.raw != nil:
			b.WriteByte('[')
			b.Write(e.raw)
			b.WriteByte(']')
		case e.name == "":
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.name)
		}
	}
	if child != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(child)
	}
	return b.String()
}

// Want is the JSON type a typed reader expected.
type Want uint8

// The types the readers expect.
const (
	String Want = iota
	Bool
	Number  // any number
	Integer // a number without a fraction
	Object
	Array
)

// A Dialect words a vendor's validation errors: three functions, each
// given the rendered path of the offending value (param) and the Reader's
// Scope. A vendor keeps its Dialect in a package variable and hands the
// Readers a pointer to it, so that calling it keeps the walk on the stack.
type Dialect struct {
	// Missing is the error of a required member that is absent.
	Missing func(scope, param string) *formats.Error
	// Type is the error of the value v, which is not of the wanted type.
	Type func(scope, param string, v []byte, want Want) *formats.Error
	// Range is the error of v, whose number got is outside [min, max].
	Range func(scope, param string, v []byte, integer bool, min, max, got float64) *formats.Error
}

// Reader reads the typed values of the members at a Path. Each reader takes
// the name of the member (child, relative to the path) and its raw value,
// nil when the member is absent; an optional member's null is absent.
type Reader struct {
	Path
	// Dialect words the errors.
	Dialect *Dialect
	// Scope is passed to the Dialect (Google names the request message
	// that the path starts in: "GenerateContentRequest").
	Scope string
	// NullMissing makes a required member's null missing rather than of
	// the wrong type (proto3 JSON's rule, and Responses').
	NullMissing bool
	// QuotedNumbers accepts a number given as a JSON string, as proto3 JSON
	// does (ProtoNumber).
	QuotedNumbers bool
}

// New returns a Reader whose paths render in style and whose errors d words.
func New(style Style, d *Dialect) Reader {
	return Reader{Path: Path{style: style}, Dialect: d}
}

// The error paths hand the Dialect a copy of the Scope, which keeps the
// Reader (and the walker that holds it) out of what the compiler sees
// leaving for the heap.

func (r *Reader) missing(child string) *formats.Error {
	return r.Dialect.Missing(strings.Clone(r.Scope), r.Param(child))
}

func (r *Reader) wrongType(child string, v []byte, want Want) *formats.Error {
	return r.Dialect.Type(strings.Clone(r.Scope), r.Param(child), v, want)
}

func (r *Reader) outOfRange(child string, v []byte, integer bool, min, max, got float64) *formats.Error {
	return r.Dialect.Range(strings.Clone(r.Scope), r.Param(child), v, integer, min, max, got)
}

// absent reports a value that stands for no value.
func absent(v []byte) bool { return len(v) == 0 || rawjson.IsNull(v) }

// OptString checks an optional string; ok reports that it is there.
func (r *Reader) OptString(child string, v []byte) (ok bool, err *formats.Error) {
	switch {
	case absent(v):
		return false, nil
	case v[0] == '"':
		return true, nil
	}
	return false, r.wrongType(child, v, String)
}

// ReqString checks a required string. A null one has the wrong type,
// except under NullMissing.
func (r *Reader) ReqString(child string, v []byte) *formats.Error {
	switch {
	case len(v) == 0, r.NullMissing && rawjson.IsNull(v):
		return r.missing(child)
	case v[0] == '"':
		return nil
	}
	return r.wrongType(child, v, String)
}

// OptBool reads an optional boolean.
func (r *Reader) OptBool(child string, v []byte) (val, ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, false, nil
	case 't':
		return true, true, nil
	case 'f':
		return false, true, nil
	}
	return false, false, r.wrongType(child, v, Bool)
}

// number is the JSON number of v (under QuotedNumbers, ProtoNumber).
func (r *Reader) number(v []byte) ([]byte, bool) {
	if r.QuotedNumbers {
		return ProtoNumber(v)
	}
	return v, rawjson.Kind(v) == '0'
}

// ProtoNumber is the JSON number of v, which proto3 JSON may also give as a
// JSON string holding exactly one number ("00" and "1x" are none).
func ProtoNumber(v []byte) ([]byte, bool) {
	switch rawjson.Kind(v) {
	case '0':
		return v, true
	case '"':
		if len(v) >= 3 && bytes.IndexByte(v, '\\') < 0 {
			if n := v[1 : len(v)-1]; rawjson.Kind(n) == '0' && jsontext.Value(n).IsValid() {
				return n, true
			}
		}
	}
	return nil, false
}

// OptNumber reads an optional number within [min, max].
func (r *Reader) OptNumber(child string, v []byte, min, max float64) (f float64, ok bool, err *formats.Error) {
	if absent(v) {
		return 0, false, nil
	}
	if num, isNum := r.number(v); isNum {
		f, ok = rawjson.ParseFloat(num)
	}
	if !ok {
		return 0, false, r.wrongType(child, v, Number)
	}
	if f < min || f > max {
		return 0, false, r.outOfRange(child, v, false, min, max, f)
	}
	return f, true, nil
}

// Int reads an integer within [min, max] that is there (a null one has the
// wrong type); the caller reports an absent one.
func (r *Reader) Int(child string, v []byte, min, max int64) (n int64, err *formats.Error) {
	ok := false
	if num, isNum := r.number(v); isNum {
		n, ok = rawjson.ParseInt(num)
	}
	if !ok {
		return 0, r.wrongType(child, v, Integer)
	}
	if n < min || n > max {
		return 0, r.outOfRange(child, v, true, float64(min), float64(max), float64(n))
	}
	return n, nil
}

// OptInt reads an optional integer within [min, max].
func (r *Reader) OptInt(child string, v []byte, min, max int64) (n int64, ok bool, err *formats.Error) {
	if absent(v) {
		return 0, false, nil
	}
	n, err = r.Int(child, v, min, max)
	return n, err == nil, err
}

// ReqObject checks a required object. A null one has the wrong type,
// except under NullMissing.
func (r *Reader) ReqObject(child string, v []byte) *formats.Error {
	switch {
	case len(v) == 0, r.NullMissing && rawjson.IsNull(v):
		return r.missing(child)
	case v[0] == '{':
		return nil
	}
	return r.wrongType(child, v, Object)
}

// OptObject checks an optional object; ok reports that it is there.
func (r *Reader) OptObject(child string, v []byte) (ok bool, err *formats.Error) {
	switch {
	case absent(v):
		return false, nil
	case v[0] == '{':
		return true, nil
	}
	return false, r.wrongType(child, v, Object)
}

// OptArray checks an optional array; ok reports that it is there.
func (r *Reader) OptArray(child string, v []byte) (ok bool, err *formats.Error) {
	switch {
	case absent(v):
		return false, nil
	case v[0] == '[':
		return true, nil
	}
	return false, r.wrongType(child, v, Array)
}

// Objects starts the walk, in place, of the array child, the current
// value of top (after its NextLazy), whose elements must be objects: it
// enters child on the path and returns the iterator of the elements for
// NextObject. The error is the Dialect's when the value is not an array.
//
//	it, err := r.Objects(top, "messages")
//	...
//	for r.NextObject(&it) {
//		end, err := walkElement(it.Bytes(), it.Start())
//		...
//		it.SetEnd(end)
//	}
//	if err := r.ObjectsErr(&it); err != nil {
//		...
//	}
//	n, ok := r.EndObjects(top, &it)
func (r *Reader) Objects(top *rawjson.Iter, child string) (rawjson.Iter, *formats.Error) {
	b, start := top.Bytes(), top.Start()
	if b[start] != '[' {
		return rawjson.Iter{}, r.wrongType(child, top.Value(), Array)
	}
	r.Push(child)
	return rawjson.Array(b, start), nil
}

// NextObject advances it to the next element, with the path ending in the
// element's index instead of the previous one's, and reports whether there
// is one that is an object. The walk stops at the end of the array, with
// the path back at the array, or at an element of another type (see
// ObjectsErr), with the path at its index.
func (r *Reader) NextObject(it *rawjson.Iter) bool {
	if it.Len() > 0 {
		r.Pop()
	}
	if !it.NextLazy() {
		return false
	}
	r.PushIndex(it.Len() - 1)
	return it.Bytes()[it.Start()] == '{'
}

// ObjectsErr is the Dialect's error for the element NextObject stopped at
// when it is not an object; nil when the walk reached the end of the array
// (or found it malformed: see EndObjects).
func (r *Reader) ObjectsErr(it *rawjson.Iter) *formats.Error {
	if it.End() >= 0 || it.Err() != nil || it.Len() == 0 {
		return nil //nolint:nilerr // a malformed array is EndObjects' to report
	}
	return r.wrongType("", it.Value(), Object)
}

// EndObjects ends a walk that ran to the end of the array: it leaves the
// array on the path and, when the array is well formed, reports its end to
// top, which then need not scan it again. n is the number of elements; ok
// is false for a malformed array.
func (r *Reader) EndObjects(top, it *rawjson.Iter) (n int, ok bool) {
	r.Pop()
	if it.Err() != nil {
		return it.Len(), false
	}
	top.SetEnd(it.End() + 1)
	return it.Len(), true
}
