package anthropic

import (
	"bytes"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker reads the body with a walk.Reader: the JSON path of what it
// is looking at is rendered in Anthropic's dotted form
// ("messages.2.content.0.text") only when it reports an error, in the words
// of dialect.

// dialect words the typed readers' errors as Anthropic (pydantic) does.
var dialect = &walk.Dialect{Missing: missing, Type: wrongType, Range: outOfRange}

// wants names the JSON types as Anthropic's messages do.
var wants = [...]string{
	walk.String:  tString,
	walk.Bool:    tBool,
	walk.Number:  tNumber,
	walk.Integer: tInt,
	walk.Object:  tDict,
	walk.Array:   tList,
}

// missing is the error of a required member that is absent.
func missing(_, param string) *formats.Error { return invalid(param, "Field required") }

// wrongType is the error of a value of the wrong JSON type.
func wrongType(_, param string, v []byte, want walk.Want) *formats.Error {
	if want == walk.Integer && rawjson.Kind(v) == '0' {
		if _, isNum := rawjson.ParseFloat(v); isNum && bytes.ContainsAny(v, ".eE") {
			return invalid(param, "Input should be a valid integer, got a number with a fractional part")
		}
	}
	return invalid(param, "Input should be "+wants[want])
}

// outOfRange is the error of a number out of its range.
func outOfRange(_, param string, _ []byte, _ bool, min, max, got float64) *formats.Error {
	if got < min {
		return invalid(param, "Input should be greater than or equal to "+walk.Num(min))
	}
	return invalid(param, "Input should be less than or equal to "+walk.Num(max))
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
func (w *walker) errAt(child, msg string) *formats.Error { return invalid(w.Param(child), msg) }

// errMissing is Anthropic's missing-field error.
func (w *walker) errMissing(child string) *formats.Error { return w.errAt(child, "Field required") }

// errType is Anthropic's wrong-type error; want is "a valid string" and the
// like.
func (w *walker) errType(child, want string) *formats.Error {
	return w.errAt(child, "Input should be "+want)
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
func (w *walker) errEnum(child string, vals ...string) *formats.Error {
	return w.errAt(child, "Input should be "+quoteList(vals))
}

// errTag is the error of an unknown discriminator of a tagged union.
func (w *walker) errTag(child string, got []byte, tags ...string) *formats.Error {
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
	return w.errAt(child, "Input tag '"+s+"' found using 'type' does not match any of the expected tags: "+b.String())
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
// (^[a-zA-Z0-9_-]+$): every other byte becomes '_', and an empty id becomes
// "toolu_". The function is deterministic, so that a call and its result,
// sanitised apart, still match (docs/translation.md,
// "Tool call ids and arguments").
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
