package anthropic

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker keeps the JSON path of what it is looking at as a small stack,
// turned into Anthropic's dotted form ("messages.2.content.0.text") only
// when it reports an error.

type pathElem struct {
	name  string // "" for an array index
	index int
}

type path struct {
	elems [12]pathElem
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
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if e := p.elems[i]; e.name != "" {
			b.WriteString(e.name)
		} else {
			b.WriteString(strconv.Itoa(e.index))
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

// invalid is Anthropic's 400: "<path>: <what is wrong>", the path also in
// Param.
func invalid(param, msg string) *formats.Error {
	if param != "" {
		msg = param + ": " + msg
	}
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Message: msg}
}

// errAt reports msg at the path's child.
func (p *path) errAt(child, msg string) *formats.Error { return invalid(p.param(child), msg) }

// errMissing is Anthropic's missing-field error.
func (p *path) errMissing(child string) *formats.Error { return p.errAt(child, "Field required") }

// errType is Anthropic's wrong-type error; want is "a valid string" and the
// like.
func (p *path) errType(child, want string) *formats.Error {
	return p.errAt(child, "Input should be "+want)
}

// The type names of Anthropic's (pydantic's) messages.
const (
	tString = "a valid string"
	tInt    = "a valid integer"
	tNumber = "a valid number"
	tBool   = "a valid boolean"
	tList   = "a valid list"
	tDict   = "a valid dictionary"
)

// quoteList renders 'a', 'b' or 'c'.
func quoteList(vals []string) string {
	var b strings.Builder
	for i, v := range vals {
		switch {
		case i == 0:
		case i == len(vals)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString("'" + v + "'")
	}
	return b.String()
}

// errEnum lists the allowed values.
func (p *path) errEnum(child string, vals ...string) *formats.Error {
	return p.errAt(child, "Input should be "+quoteList(vals))
}

// errTag is the error of an unknown discriminator of a tagged union.
func (p *path) errTag(child string, got []byte, tags ...string) *formats.Error {
	s, _ := rawjson.Unquote(got)
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	var b strings.Builder
	for i, t := range tags {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + t + "'")
	}
	return p.errAt(child, "Input tag '"+s+"' found using 'type' does not match any of the expected tags: "+b.String())
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (p *path) errGE(child string, min float64) *formats.Error {
	return p.errAt(child, "Input should be greater than or equal to "+fmtNum(min))
}

func (p *path) errLE(child string, max float64) *formats.Error {
	return p.errAt(child, "Input should be less than or equal to "+fmtNum(max))
}

// Typed readers. Each takes the raw value of member child of the current
// path; v is nil when the member is absent. An optional field's null is
// treated as absent, as Anthropic does.

func (p *path) optString(child string, v []byte) (ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, nil
	case '"':
		return true, nil
	}
	return false, p.errType(child, tString)
}

func (p *path) reqString(child string, v []byte) *formats.Error {
	switch rawjson.Kind(v) {
	case 0:
		return p.errMissing(child)
	case '"':
		return nil
	}
	return p.errType(child, tString)
}

func (p *path) optBool(child string, v []byte) (val, ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, false, nil
	case 't':
		return true, true, nil
	case 'f':
		return false, true, nil
	}
	return false, false, p.errType(child, tBool)
}

func (p *path) optNumber(child string, v []byte, min, max float64) (f float64, ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return 0, false, nil
	case '0':
	default:
		return 0, false, p.errType(child, tNumber)
	}
	f, ok = rawjson.ParseFloat(v)
	if !ok {
		return 0, false, p.errType(child, tNumber)
	}
	if f < min {
		return 0, false, p.errGE(child, min)
	}
	if f > max {
		return 0, false, p.errLE(child, max)
	}
	return f, true, nil
}

// checkInt reads an integer within [min, max]; absent is reported by
// the caller.
func (p *path) checkInt(child string, v []byte, min, max int64) (int64, *formats.Error) {
	if rawjson.Kind(v) != '0' {
		return 0, p.errType(child, tInt)
	}
	n, ok := rawjson.ParseInt(v)
	if !ok {
		if _, isNum := rawjson.ParseFloat(v); isNum && bytes.ContainsAny(v, ".eE") {
			return 0, p.errAt(child, "Input should be a valid integer, got a number with a fractional part")
		}
		return 0, p.errType(child, tInt)
	}
	if n < min {
		return 0, p.errGE(child, float64(min))
	}
	if n > max {
		return 0, p.errLE(child, float64(max))
	}
	return n, nil
}

func (p *path) optInt(child string, v []byte, min, max int64) (n int64, ok bool, err *formats.Error) {
	if k := rawjson.Kind(v); k == 0 || k == 'n' {
		return 0, false, nil
	}
	n, err = p.checkInt(child, v, min, max)
	return n, err == nil, err
}

// optObject checks that v is an object (or absent, or null).
func (p *path) optObject(child string, v []byte) (ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, nil
	case '{':
		return true, nil
	}
	return false, p.errType(child, tDict)
}

// optArray checks that v is an array (or absent, or null).
func (p *path) optArray(child string, v []byte) (ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, nil
	case '[':
		return true, nil
	}
	return false, p.errType(child, tList)
}

// validToolName reports whether s matches ^[a-zA-Z0-9_-]{1,128}$ (client
// tool names; Anthropic documents 64, some models take 128).
func validToolName[S ~string | ~[]byte](s S) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	return validIDChars(s)
}

// validID reports whether s matches ^[a-zA-Z0-9_-]+$ (tool_use ids).
func validID[S ~string | ~[]byte](s S) bool { return len(s) > 0 && validIDChars(s) }

func validIDChars[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// rawValid reports whether the raw JSON string v, unescaped, passes ok.
func rawValid(v []byte, ok func([]byte) bool) bool {
	if len(v) < 2 {
		return false
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		u, good := rawjson.AppendUnquote(nil, v)
		return good && ok(u)
	}
	return ok(v[1 : len(v)-1])
}

// SanitizeToolID maps a tool call id to one Anthropic accepts
// (^[a-zA-Z0-9_-]+$): every other byte becomes '_', and an empty id
// becomes "toolu_". The function is deterministic, so that a call and its
// result, sanitised apart, still match (wire/translation.md §4.5).
func SanitizeToolID(id string) string {
	if id == "" {
		return "toolu_"
	}
	if validIDChars(id) {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !idByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
