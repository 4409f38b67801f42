package gemini

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker keeps the JSON path of what it is looking at as a small stack,
// rendered only when it reports an error, as Google does: proto field names
// (snake_case) with list indexes, "contents[2].parts[0].inline_data.data".

type pathElem struct {
	name  string // "" for a list index (or a raw name)
	raw   []byte // a name from the body (a map key), not copied
	index int
}

type path struct {
	elems [12]pathElem
	n     int
	// req names the request message in "* GenerateContentRequest.x: …".
	req string
}

func (p *path) push(name string) {
	if p.n < len(p.elems) {
		p.elems[p.n] = pathElem{name: name}
	}
	p.n++
}

// pushRaw pushes a name that points into the body (no allocation).
func (p *path) pushRaw(name []byte) {
	if p.n < len(p.elems) {
		p.elems[p.n] = pathElem{raw: name}
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
		if e.raw != nil {
			b.WriteByte('[')
			b.Write(e.raw)
			b.WriteByte(']')
			continue
		}
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

// leaf is the last name of a param ("mime_type" of "a.inline_data.mime_type").
func leaf(param string) string {
	if i := strings.LastIndexByte(param, '.'); i >= 0 {
		return param[i+1:]
	}
	return param
}

func invalid(param, msg string) *formats.Error {
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Message: msg}
}

// shown is a raw value as Google quotes it in an error, cut short.
func shown(v []byte) string {
	if len(v) > 64 {
		return string(v[:64]) + "…"
	}
	return string(v)
}

// errType is Google's wrong-type error for a scalar ("Invalid value at
// 'generation_config.temperature' (TYPE_FLOAT), "hot"") or a message or
// list ("Invalid JSON payload received. Expected an object at 'tools[0]'.").
func (p *path) errType(child string, v []byte, want string) *formats.Error {
	param := p.param(child)
	switch want {
	case "object", "list":
		article := "an"
		if want == "list" {
			article = "a"
		}
		at := ""
		if param != "" {
			at = " at '" + param + "'"
		}
		return invalid(param, "Invalid JSON payload received. Expected "+article+" "+want+at+", got "+shown(v)+".")
	}
	return invalid(param, "Invalid value at '"+param+"' ("+want+"), "+shown(v))
}

// errMissing is Google's missing-field error.
func (p *path) errMissing(child string) *formats.Error {
	param := p.param(child)
	return invalid(param, "* "+p.req+"."+param+": "+leaf(param)+" is not specified")
}

// errValue is an invalid value with a free explanation.
func (p *path) errValue(child, msg string) *formats.Error {
	param := p.param(child)
	return invalid(param, "* "+p.req+"."+param+": "+msg)
}

// errEnum lists the valid values of an enum.
func (p *path) errEnum(child string, v []byte, allowed ...string) *formats.Error {
	param := p.param(child)
	return invalid(param, "Invalid value at '"+param+"' (TYPE_ENUM), "+shown(v)+". Valid values: "+strings.Join(allowed, ", ")+".")
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// errRange reports a number outside [min, max].
func (p *path) errRange(child string, min, max, got float64) *formats.Error {
	param := p.param(child)
	name := leaf(param)
	switch {
	case min == 1 && max >= 1<<31-1:
		return p.errValue(child, name+" must be positive, got "+fmtNum(got)+".")
	case max >= 1<<31-1:
		return p.errValue(child, name+" must be at least "+fmtNum(min)+", got "+fmtNum(got)+".")
	}
	return p.errValue(child, name+" must be between "+fmtNum(min)+" and "+fmtNum(max)+", got "+fmtNum(got)+".")
}

// Typed readers. Each takes the raw value of member child of the current
// path. null is the field's default: absent. Numbers may be JSON strings, as
// proto3 JSON allows.

func (p *path) optString(child string, v []byte) (ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, nil
	case '"':
		return true, nil
	}
	return false, p.errType(child, v, "TYPE_STRING")
}

func (p *path) reqString(child string, v []byte) *formats.Error {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return p.errMissing(child)
	case '"':
		return nil
	}
	return p.errType(child, v, "TYPE_STRING")
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
	return false, false, p.errType(child, v, "TYPE_BOOL")
}

// number reads a JSON number or a string holding one.
func number(v []byte) ([]byte, bool) {
	switch rawjson.Kind(v) {
	case '0':
		return v, true
	case '"':
		if len(v) >= 3 && bytes.IndexByte(v, '\\') < 0 {
			// the whole string must be a JSON number ("00", "1x" are not)
			if n := v[1 : len(v)-1]; rawjson.Kind(n) == '0' && jsontext.Value(n).IsValid() {
				return n, true
			}
		}
	}
	return nil, false
}

func (p *path) optInt(child string, v []byte, min, max int64) (n int64, ok bool, err *formats.Error) {
	if k := rawjson.Kind(v); k == 0 || k == 'n' {
		return 0, false, nil
	}
	num, isNum := number(v)
	if isNum {
		n, ok = rawjson.ParseInt(num)
	}
	if !ok {
		return 0, false, p.errType(child, v, "TYPE_INT32")
	}
	if n < min || n > max {
		return 0, false, p.errRange(child, float64(min), float64(max), float64(n))
	}
	return n, true, nil
}

func (p *path) optFloat(child string, v []byte, min, max float64) (f float64, ok bool, err *formats.Error) {
	if k := rawjson.Kind(v); k == 0 || k == 'n' {
		return 0, false, nil
	}
	num, isNum := number(v)
	if isNum {
		f, ok = rawjson.ParseFloat(num)
	}
	if !ok {
		return 0, false, p.errType(child, v, "TYPE_FLOAT")
	}
	if f < min || f > max {
		return 0, false, p.errRange(child, min, max, f)
	}
	return f, true, nil
}

// optObject checks an optional message field.
func (p *path) optObject(child string, v []byte) (ok bool, err *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return false, nil
	case '{':
		return true, nil
	}
	return false, p.errType(child, v, "object")
}

// optEnum reads an optional enum: a string matched case-insensitively
// against allowed (upper case). It returns the index in allowed, -1 when
// absent.
func (p *path) optEnum(child string, v []byte, allowed ...string) (int, *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return -1, nil
	case '"':
	default:
		return -1, p.errType(child, v, "TYPE_ENUM")
	}
	if i := enumIndex(v, allowed); i >= 0 {
		return i, nil
	}
	return -1, p.errEnum(child, v, allowed...)
}

// enumIndex matches a raw JSON string case-insensitively.
func enumIndex(v []byte, allowed []string) int {
	var buf [48]byte
	s, ok := rawjson.AppendUnquote(buf[:0], v)
	if !ok {
		return -1
	}
	for i, a := range allowed {
		if len(a) == len(s) && equalFold(s, a) {
			return i
		}
	}
	return -1
}

// equalFold compares ASCII case-insensitively (enum values are ASCII).
func equalFold(s []byte, upper string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != upper[i] {
			return false
		}
	}
	return true
}

// enumIs reports whether a raw value is the enum value (any case).
func enumIs(v []byte, upper string) bool {
	if len(v) != len(upper)+2 || rawjson.Kind(v) != '"' {
		return enumIndex(v, []string{upper}) == 0
	}
	return equalFold(v[1:len(v)-1], upper)
}

// checkBase64 validates the raw JSON string v as base64 bytes, standard or
// URL-safe alphabet, padded or not, as proto3 JSON accepts them.
func (p *path) checkBase64(child string, v []byte) *formats.Error {
	if err := p.reqString(child, v); err != nil {
		return err
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') >= 0 { // "\/" from some encoders
		s, _ := rawjson.Unquote(v)
		body = []byte(s)
	}
	if !validBase64(body) {
		return invalid(p.param(child), "Invalid value at '"+p.param(child)+"' (TYPE_BYTES), Base64 decoding failed for "+shown(v))
	}
	return nil
}

func validBase64(s []byte) bool {
	n := len(s)
	pad := 0
	for n > 0 && s[n-1] == '=' {
		n--
		pad++
	}
	if pad > 2 || (pad > 0 && len(s)%4 != 0) || n%4 == 1 {
		return false
	}
	for _, c := range s[:n] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// stdBase64 rewrites base64 text in the standard alphabet with padding (the
// IR's form).
func stdBase64(s string) string {
	clean := len(s)%4 == 0
	for i := 0; i < len(s) && clean; i++ {
		if s[i] == '-' || s[i] == '_' {
			clean = false
		}
	}
	if clean {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		switch c {
		case '-':
			b[i] = '+'
		case '_':
			b[i] = '/'
		}
	}
	for len(b)%4 != 0 {
		b = append(b, '=')
	}
	return string(b)
}

// key appends the current member's unescaped name to buf.
func key(it *rawjson.Iter, buf []byte) []byte { return it.AppendName(buf) }

// count reads a non-negative count (a number or a string holding one).
func count(v []byte) int64 {
	num, ok := number(v)
	if !ok {
		return 0
	}
	n, ok := rawjson.ParseInt(num)
	if !ok || n < 0 {
		return 0
	}
	return n
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// absent reports a missing or null value.
func absent(v []byte) bool { return v == nil || rawjson.IsNull(v) }
