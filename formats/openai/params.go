package openai

import (
	"bytes"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The walker reads the body with a walk.Reader: the JSON path of what it
// is looking at is rendered as an OpenAI-style param
// ("messages[2].content[0].type") only when it reports an error, in the
// words of dialect.

// dialect words the typed readers' errors as OpenAI does.
var dialect = &walk.Dialect{Missing: missing, Type: wrongType, Range: outOfRange}

// wants names the JSON types as OpenAI's messages do.
var wants = [...]string{
	walk.String:  "a string",
	walk.Bool:    "a boolean",
	walk.Number:  "a decimal",
	walk.Integer: "an integer",
	walk.Object:  "an object",
	walk.Array:   "an array",
}

// missing is the error of a required member that is absent.
func missing(_, param string) *formats.Error { return missingError(param) }

// wrongType is the error of a value of the wrong JSON type.
func wrongType(_, param string, v []byte, want walk.Want) *formats.Error {
	return typeError(param, v, wants[want])
}

// outOfRange is the error of a number out of its range.
func outOfRange(_, param string, _ []byte, integer bool, min, max, got float64) *formats.Error {
	if got < min {
		return belowError(param, integer, min, got)
	}
	return aboveError(param, integer, max, got)
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

// typeError is OpenAI's wrong-type error.
func typeError(param string, v []byte, want string) *formats.Error {
	return errCode(param, "Invalid type for '"+param+"': expected "+want+", but got "+kindName(v)+" instead.", "invalid_type")
}

// missingError is OpenAI's missing-parameter error.
func missingError(param string) *formats.Error {
	return errCode(param, "Missing required parameter: '"+param+"'.", "missing_required_parameter")
}

// errType is OpenAI's wrong-type error at the path's child.
func (w *walker) errType(child string, v []byte, want string) *formats.Error {
	return typeError(w.Param(child), v, want)
}

// errMissing is OpenAI's missing-parameter error at the path's child.
func (w *walker) errMissing(child string) *formats.Error { return missingError(w.Param(child)) }

// errValue is an invalid value with a free message.
func (w *walker) errValue(child, msg string) *formats.Error {
	return errCode(w.Param(child), msg, "invalid_value")
}

// errEnum lists the supported values.
func (w *walker) errEnum(child string, v []byte, allowed ...string) *formats.Error {
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
	return w.errValue(child, b.String())
}

// errEmpty is OpenAI's empty-array error.
func (w *walker) errEmpty(child string) *formats.Error {
	param := w.Param(child)
	return errCode(param, "Invalid '"+param+"': empty array. Expected an array with minimum length 1, but got an empty array instead.", "empty_array")
}

// belowError and aboveError are OpenAI's range errors.
func belowError(param string, integer bool, min, got float64) *formats.Error {
	kind, code := "decimal", "decimal_below_min_value"
	if integer {
		kind, code = "integer", "integer_below_min_value"
	}
	return errCode(param, "Invalid '"+param+"': "+kind+" below minimum value. Expected a value >= "+walk.Num(min)+", but got "+walk.Num(got)+" instead.", code)
}

func aboveError(param string, integer bool, max, got float64) *formats.Error {
	kind, code := "decimal", "decimal_above_max_value"
	if integer {
		kind, code = "integer", "integer_above_max_value"
	}
	return errCode(param, "Invalid '"+param+"': "+kind+" above maximum value. Expected a value <= "+walk.Num(max)+", but got "+walk.Num(got)+" instead.", code)
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

func (w *walker) checkName(child string, v []byte) *formats.Error {
	if err := w.ReqString(child, v); err != nil {
		return err
	}
	if !validName(v) {
		got, _ := rawjson.Unquote(v)
		if len(got) > 80 {
			got = got[:80] + "…"
		}
		return w.errValue(child, "Invalid '"+w.Param(child)+"': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$', but got '"+got+"' instead.")
	}
	return nil
}

// ptr returns a pointer to a copy of v (allocated only when called).
