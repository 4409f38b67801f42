package openai

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker keeps the JSON path of what it is looking at as a small stack,
// turned into an OpenAI-style param ("messages[2].content[0].type") only when
// it reports an error.

type pathElem struct {
	name  string // "" for an array index
	index int
}

type path struct {
	elems [10]pathElem
	n     int
}

func (p *path) push(name string) {
	if p.n < len(p.elems) {
		p.elems[p.n] = pathElem{name: name}
	}
	p.n++
}

func (p *path) pushIndex(i int) {
	if p.n < len(p.elems) {
		p.elems[p.n] = pathElem{index: i}
	}
	p.n++
}

func (p *path) pop() { p.n-- }

// param renders the path, with child appended when not empty.
func (p *path) param(child string) string {
	var b strings.Builder
	for i := 0; i < p.n && i < len(p.elems); i++ {
		e := p.elems[i]
		if e.name == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.name)
	}
	if child != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(child)
	}
	return b.String()
}

// kindName describes a raw value's JSON type as OpenAI's messages do.
func kindName(v []byte) string {
	switch rawjson.Kind(v) {
	case '"':
		return "a string"
	case '0':
		if _, ok := rawjson.ParseInt(v); ok {
			return "an integer"
		}
		return "a decimal"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "an invalid value"
}

func errCode(param, msg, code string) *formats.Error {
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Message: msg, Code: code}
}

// errType is OpenAI's wrong-type error.
func (p *path) errType(child string, v []byte, want string) *formats.Error {
	param := p.param(child)
	return errCode(param, "Invalid type for '"+param+"': expected "+want+", but got "+kindName(v)+" instead.", "invalid_type")
}

// errMissing is OpenAI's missing-parameter error.
func (p *path) errMissing(child string) *formats.Error {
	param := p.param(child)
	return errCode(param, "Missing required parameter: '"+param+"'.", "missing_required_parameter")
}

// errValue is an invalid value with a free message.
func (p *path) errValue(child, msg string) *formats.Error {
	return errCode(p.param(child), msg, "invalid_value")
}

// errEnum lists the supported values.
func (p *path) errEnum(child string, v []byte, allowed ...string) *formats.Error {
	got, _ := rawjson.Unquote(v)
	if len(got) > 64 {
		got = got[:64] + "…"
	}
	var b strings.Builder
	b.WriteString("Invalid value: '")
	b.WriteString(got)
	b.WriteString("'. Supported values are: ")
	for i, a := range allowed {
		switch {
		case i == 0:
		case i == len(allowed)-1 && len(allowed) > 2:
			b.WriteString(", and ")
		case i == len(allowed)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString("'" + a + "'")
	}
	b.WriteByte('.')
	return p.errValue(child, b.String())
}

// errEmpty is OpenAI's empty-array error.
func (p *path) errEmpty(child string) *formats.Error {
	param := p.param(child)
	return errCode(param, "Invalid '"+param+"': empty array. Expected an array with minimum length 1, but got an empty array instead.", "empty_array")
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// errBelow and errAbove are OpenAI's range errors.
func (p *path) errBelow(child string, integer bool, min, got float64) *formats.Error {
	param := p.param(child)
	kind, code := "decimal", "decimal_below_min_value"
	if integer {
		kind, code = "integer", "integer_below_min_value"
	}
	return errCode(param, "Invalid '"+param+"': "+kind+" below minimum value. Expected a value >= "+fmtNum(min)+", but got "+fmtNum(got)+" instead.", code)
}

func (p *path) errAbove(child string, integer bool, max, got float64) *formats.Error {
	param := p.param(child)
	kind, code := "decimal", "decimal_above_max_value"
	if integer {
		kind, code = "integer", "integer_above_max_value"
	}
	return errCode(param, "Invalid '"+param+"': "+kind+" above maximum value. Expected a value <= "+fmtNum(max)+", but got "+fmtNum(got)+" instead.", code)
}

// Typed readers. Each takes the raw value of member child of the current
// path; null is reported as absent (ok false) where the field is optional,
// as OpenAI accepts it.

func (p *path) optString(child string, v []byte) (ok bool, err *formats.Error) {
	if v == nil {
		return false, nil
	}
	switch rawjson.Kind(v) {
	case '"':
		return true, nil
	case 'n':
		return false, nil
	}
	return false, p.errType(child, v, "a string")
}

func (p *path) reqString(child string, v []byte) *formats.Error {
	if v == nil {
		return p.errMissing(child)
	}
	if rawjson.Kind(v) != '"' {
		return p.errType(child, v, "a string")
	}
	return nil
}

func (p *path) optBool(child string, v []byte) (val, ok bool, err *formats.Error) {
	if v == nil {
		return false, false, nil
	}
	switch rawjson.Kind(v) {
	case 't':
		return true, true, nil
	case 'f':
		return false, true, nil
	case 'n':
		return false, false, nil
	}
	return false, false, p.errType(child, v, "a boolean")
}

func (p *path) optNumber(child string, v []byte, min, max float64) (f float64, ok bool, err *formats.Error) {
	if v == nil {
		return 0, false, nil
	}
	switch rawjson.Kind(v) {
	case 'n':
		return 0, false, nil
	case '0':
	default:
		return 0, false, p.errType(child, v, "a decimal")
	}
	f, ok = rawjson.ParseFloat(v)
	if !ok {
		return 0, false, p.errType(child, v, "a decimal")
	}
	if f < min {
		return 0, false, p.errBelow(child, false, min, f)
	}
	if f > max {
		return 0, false, p.errAbove(child, false, max, f)
	}
	return f, true, nil
}

func (p *path) optInt(child string, v []byte, min, max int64) (n int64, ok bool, err *formats.Error) {
	if v == nil {
		return 0, false, nil
	}
	switch rawjson.Kind(v) {
	case 'n':
		return 0, false, nil
	case '0':
	default:
		return 0, false, p.errType(child, v, "an integer")
	}
	n, ok = rawjson.ParseInt(v)
	if !ok {
		return 0, false, p.errType(child, v, "an integer")
	}
	if n < min {
		return 0, false, p.errBelow(child, true, float64(min), float64(n))
	}
	if n > max {
		return 0, false, p.errAbove(child, true, float64(max), float64(n))
	}
	return n, true, nil
}

// validName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$.
func validName(v []byte) bool {
	if bytes.IndexByte(v, '\\') >= 0 {
		s, ok := rawjson.Unquote(v)
		return ok && validNameString(s)
	}
	if len(v) < 3 || len(v) > 66 {
		return false
	}
	return validNameString(v[1 : len(v)-1])
}

func validNameString[S ~string | ~[]byte](s S) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p *path) checkName(child string, v []byte) *formats.Error {
	if err := p.reqString(child, v); err != nil {
		return err
	}
	if !validName(v) {
		got, _ := rawjson.Unquote(v)
		if len(got) > 80 {
			got = got[:80] + "…"
		}
		return p.errValue(child, "Invalid '"+p.param(child)+"': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$', but got '"+got+"' instead.")
	}
	return nil
}

// ptr returns a pointer to a copy of v (allocated only when called).
func ptr[T any](v T) *T { return &v }
