package gemini

import (
	"bytes"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker reads the body with a walk.Reader under proto3 JSON rules:
// the JSON path of what it is looking at is rendered only when it reports
// an error, as Google does, in proto field names (snake_case) with list
// indexes ("contents[2].parts[0].inline_data.data"), in the words of
// dialect.

// dialect words the typed readers' errors as Google does.
var dialect = &walk.Dialect{Missing: missing, Type: wrongType, Range: outOfRange}

// wants names the JSON types as Google's messages do.
var wants = [...]string{
	walk.String:  "TYPE_STRING",
	walk.Bool:    "TYPE_BOOL",
	walk.Number:  "TYPE_FLOAT",
	walk.Integer: "TYPE_INT32",
	walk.Object:  "object",
	walk.Array:   "list",
}

// missing is the error of a required member that is absent.
func missing(scope, param string) *formats.Error {
	return invalid(param, "* "+scope+"."+param+": "+leaf(param)+" is not specified")
}

// wrongType is the error of a value of the wrong JSON type.
func wrongType(_, param string, v []byte, want walk.Want) *formats.Error {
	return typeError(param, v, wants[want])
}

// outOfRange reports a number outside [min, max].
func outOfRange(scope, param string, _ []byte, _ bool, min, max, got float64) *formats.Error {
	name := leaf(param)
	switch {
	case min == 1 && max >= 1<<31-1:
		return valueError(scope, param, name+" must be positive, got "+walk.Num(got)+".")
	case max >= 1<<31-1:
		return valueError(scope, param, name+" must be at least "+walk.Num(min)+", got "+walk.Num(got)+".")
	}
	return valueError(scope, param, name+" must be between "+walk.Num(min)+" and "+walk.Num(max)+", got "+walk.Num(got)+".")
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

// typeError is Google's wrong-type error for a scalar ("Invalid value at
// 'generation_config.temperature' (TYPE_FLOAT), "hot"") or a message or
// list ("Invalid JSON payload received. Expected an object at 'tools[0]'.").
func typeError(param string, v []byte, want string) *formats.Error {
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

// valueError is an invalid value with a free explanation.
func valueError(scope, param, msg string) *formats.Error {
	return invalid(param, "* "+scope+"."+param+": "+msg)
}

// errType is Google's wrong-type error at the path's child.
func (w *walker) errType(child string, v []byte, want string) *formats.Error {
	return typeError(w.Param(child), v, want)
}

// errMissing is Google's missing-field error.
func (w *walker) errMissing(child string) *formats.Error {
	return missing(w.Scope, w.Param(child))
}

// errValue is an invalid value with a free explanation.
func (w *walker) errValue(child, msg string) *formats.Error {
	return valueError(w.Scope, w.Param(child), msg)
}

// errEnum lists the valid values of an enum.
func (w *walker) errEnum(child string, v []byte, allowed ...string) *formats.Error {
	param := w.Param(child)
	return invalid(param, "Invalid value at '"+param+"' (TYPE_ENUM), "+shown(v)+". Valid values: "+strings.Join(allowed, ", ")+".")
}

// optEnum reads an optional enum: a string matched case-insensitively
// against allowed (upper case). It returns the index in allowed, -1 when
// absent.
func (w *walker) optEnum(child string, v []byte, allowed ...string) (int, *formats.Error) {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return -1, nil
	case '"':
	default:
		return -1, w.errType(child, v, "TYPE_ENUM")
	}
	if i := enumIndex(v, allowed); i >= 0 {
		return i, nil
	}
	return -1, w.errEnum(child, v, allowed...)
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
func (w *walker) checkBase64(child string, v []byte) *formats.Error {
	if err := w.ReqString(child, v); err != nil {
		return err
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') >= 0 { // "\/" from some encoders
		s, _ := rawjson.Unquote(v)
		body = []byte(s)
	}
	if !validBase64(body) {
		return invalid(w.Param(child), "Invalid value at '"+w.Param(child)+"' (TYPE_BYTES), Base64 decoding failed for "+shown(v))
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
	num, ok := walk.ProtoNumber(v)
	if !ok {
		return 0
	}
	n, ok := rawjson.ParseInt(num)
	if !ok || n < 0 {
		return 0
	}
	return n
}

// absent reports a missing or null value.
func absent(v []byte) bool { return v == nil || rawjson.IsNull(v) }
