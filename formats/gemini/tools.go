package gemini

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// builtinTool reports a Gemini built-in tool member of a Tool and returns
// its camelCase name.
func builtinTool(name []byte) string {
	switch string(name) {
	case "googleSearch", "google_search":
		return "googleSearch"
	case "googleSearchRetrieval", "google_search_retrieval":
		return "googleSearchRetrieval"
	case "codeExecution", "code_execution":
		return "codeExecution"
	case "urlContext", "url_context":
		return "urlContext"
	case "fileSearch", "file_search":
		return "fileSearch"
	case "googleMaps", "google_maps":
		return "googleMaps"
	case "computerUse", "computer_use":
		return "computerUse"
	case "enterpriseWebSearch", "enterprise_web_search":
		return "enterpriseWebSearch"
	case "retrieval":
		return "retrieval"
	}
	return ""
}

// builtinGate classifies a built-in tool: Google Search grounding
// costs a fee per search query, URL context fetches pages, Google Maps
// grounding costs a fee the gateway cannot count from the answer (never
// served, as are the Vertex-only search tools), fileSearch reads the
// operator's file search stores. Gemini cannot force a built-in tool, so
// none is ever a 400 for want of a price. codeExecution (a sandbox without
// state) and computerUse (run by the client) are not gated.
func builtinGate(bt string) (formats.Gated, bool) {
	var g formats.Gated
	switch bt {
	case "googleSearch", "googleSearchRetrieval":
		g.Hosted = formats.HostedWebSearch
	case "urlContext":
		g.Hosted = formats.HostedWebFetch
	case "googleMaps", "enterpriseWebSearch", "retrieval":
		g.Hosted = formats.HostedUnmetered
	case "fileSearch":
		g.State = formats.StateFileSearch
	default:
		return g, false
	}
	return g, true
}

// tools walks the tools member of the top-level iterator in place:
// functionDeclarations (translatable) and built-in tools (dropped when
// translating: no other vendor runs them, and toolConfig cannot force one).
func (w *walker) tools(top *rawjson.Iter) *formats.Error {
	if top.Bytes()[top.Start()] == 'n' {
		return nil
	}
	it, err := w.Objects(top, "tools")
	if err != nil {
		return err
	}
	for w.NextObject(&it) {
		t := it.Value()
		w.req.size.TextBytes += int64(len(t))
		var nameBuf [48]byte
		ti := rawjson.Object(t, 0)
		var decls []byte
		for ti.Next() {
			name := key(&ti, nameBuf[:0])
			v := ti.Value()
			switch string(name) {
			case "functionDeclarations", "function_declarations":
				if decls != nil {
					return w.dupError("function_declarations")
				}
				decls = v
				continue
			}
			if rawjson.IsNull(v) {
				continue
			}
			if bt := builtinTool(name); bt != "" {
				if rawjson.Kind(v) != '{' {
					return w.errType(snakeCase(bt), v, "object")
				}
				w.req.builtins++
				if w.ir != nil {
					w.ir.Drop("tools." + bt)
				}
				if g, ok := builtinGate(bt); ok {
					g.Param, g.Label, g.Tool, g.Member = w.Param(snakeCase(bt)), "tools."+bt, it.Len()-1, string(name)
					w.gate(g)
				}
				continue
			}
			if w.ir != nil {
				w.ir.Drop("tools." + string(name))
			}
		}
		if err := w.declarations(decls); err != nil {
			return err
		}
	}
	if err := w.ObjectsErr(&it); err != nil {
		return err
	}
	w.EndObjects(top, &it) // a malformed list is the body's error, reported by the top level
	return nil
}

func (w *walker) declarations(v []byte) *formats.Error {
	if ok, err := w.OptArray("function_declarations", v); !ok {
		return err
	}
	w.Push("function_declarations")
	it := rawjson.Array(v, 0)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		if err := w.declaration(it.Value()); err != nil {
			return err
		}
		w.Pop()
	}
	w.Pop()
	return nil
}

// validDeclName checks a raw name string without copying it.
func validDeclName(v []byte) bool {
	if bytes.IndexByte(v, '\\') >= 0 {
		return geminiName(jsonval.Str(v))
	}
	return geminiName(v[1 : len(v)-1])
}

var behaviors = []string{"UNSPECIFIED", "BLOCKING", "NON_BLOCKING"}

// declaration validates a FunctionDeclaration (the path ends with its
// index) and adds it to the IR's tools.
func (w *walker) declaration(v []byte) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "object")
	}
	var name, desc, params, jsonParams, behavior []byte
	var nameBuf [32]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "name":
			name = it.Value()
		case "description":
			desc = it.Value()
		case "parameters":
			params = it.Value()
		case "parametersJsonSchema", "parameters_json_schema":
			jsonParams = it.Value()
		case "behavior":
			behavior = it.Value()
		}
	}
	if err := w.ReqString("name", name); err != nil {
		return err
	}
	if !validDeclName(name) {
		return w.errValue("name", "Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 128.")
	}
	hasDesc, err := w.OptString("description", desc)
	if err != nil {
		return err
	}
	hasParams, err := w.OptObject("parameters", params)
	if err != nil {
		return err
	}
	if hasParams {
		w.Push("parameters")
		err := w.schema(params)
		w.Pop()
		if err != nil {
			return err
		}
	}
	hasJSON := !absent(jsonParams)
	if hasJSON {
		if k := rawjson.Kind(jsonParams); k != '{' && k != 't' && k != 'f' {
			return w.errType("parameters_json_schema", jsonParams, "object")
		}
	}
	if hasParams && hasJSON {
		return w.errValue("parameters_json_schema", "parameters and parameters_json_schema cannot both be set.")
	}
	if _, err := w.optEnum("behavior", behavior, behaviors...); err != nil {
		return err
	}
	w.decls++
	if w.decls > maxDeclarations {
		return w.errValue("", "at most "+strconv.Itoa(maxDeclarations)+" function declarations are allowed.")
	}
	w.req.size.Tools++
	if w.ir == nil {
		return nil
	}
	n, ok := toSafe(jsonval.Str(name))
	if !ok {
		return w.reject("name", "the function name is too long for this model's provider (64 characters).")
	}
	t := formats.Tool{Name: n}
	if hasDesc {
		t.Description = jsonval.Str(desc)
	}
	switch {
	case hasJSON && rawjson.Kind(jsonParams) == '{':
		t.Parameters = jsonParams
	case hasParams:
		t.Parameters = openAPIToJSONSchema(nil, params, 0)
	}
	w.ir.Tools = append(w.ir.Tools, t)
	return nil
}

var schemaTypes = []string{"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}

// schema validates a Schema (Google's OpenAPI subset): its type values and
// the shape of its nested schemas. The path ends with the schema's name.
func (w *walker) schema(v []byte) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "object")
	}
	var nameBuf [32]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		if rawjson.IsNull(val) {
			continue
		}
		switch string(key(&it, nameBuf[:0])) {
		case "type":
			if _, err := w.optEnum("type", val, schemaTypes...); err != nil {
				return err
			}
		case "items":
			w.Push("items")
			if err := w.schema(val); err != nil {
				return err
			}
			w.Pop()
		case "properties":
			if rawjson.Kind(val) != '{' {
				return w.errType("properties", val, "object")
			}
			w.Push("properties")
			pi := rawjson.Object(val, 0)
			for pi.Next() {
				w.PushRaw(pi.Member().Name)
				if err := w.schema(pi.Value()); err != nil {
					return err
				}
				w.Pop()
			}
			w.Pop()
		case "anyOf", "any_of":
			if rawjson.Kind(val) != '[' {
				return w.errType("any_of", val, "list")
			}
			w.Push("any_of")
			ai := rawjson.Array(val, 0)
			for ai.Next() {
				w.PushIndex(ai.Len() - 1)
				if err := w.schema(ai.Value()); err != nil {
					return err
				}
				w.Pop()
			}
			w.Pop()
		}
	}
	return nil
}

// openAPIToJSONSchema appends the JSON Schema form of a Gemini Schema
// (docs/translation.md, "Tool schemas", from GEM): types lower-cased, nullable
// → "null" added to the type, propertyOrdering and example dropped, snake_case
// keys in JSON Schema's camelCase, int64 counts as numbers.
func openAPIToJSONSchema(dst, v []byte, depth int) []byte {
	if rawjson.Kind(v) != '{' || depth > 64 {
		return rawjson.Compact(dst, v)
	}
	nullable := false
	it := rawjson.Object(v, 0)
	for it.Next() {
		if it.NameIs("nullable") && rawjson.Kind(it.Value()) == 't' {
			nullable = true
		}
	}
	dst = append(dst, '{')
	n := 0
	member := func(name string) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = rawjson.AppendQuote(dst, name)
		dst = append(dst, ':')
	}
	var nameBuf [32]byte
	it = rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		name := string(key(&it, nameBuf[:0]))
		switch name {
		case "nullable", "propertyOrdering", "property_ordering", "example":
		case "type":
			t := strings.ToLower(jsonval.Str(val))
			if rawjson.Kind(val) != '"' || t == "type_unspecified" || t == "" {
				continue
			}
			member("type")
			if nullable && t != "null" {
				dst = append(dst, '[')
				dst = rawjson.AppendQuote(dst, t)
				dst = append(dst, `,"null"]`...)
			} else {
				dst = rawjson.AppendQuote(dst, t)
			}
		case "items", "not":
			member(name)
			dst = openAPIToJSONSchema(dst, val, depth+1)
		case "properties":
			member(name)
			if rawjson.Kind(val) != '{' {
				dst = rawjson.Compact(dst, val)
				continue
			}
			dst = append(dst, '{')
			pi := rawjson.Object(val, 0)
			for pi.Next() {
				if pi.Len() > 1 {
					dst = append(dst, ',')
				}
				dst = rawjson.AppendQuote(dst, pi.AppendName(nil))
				dst = append(dst, ':')
				dst = openAPIToJSONSchema(dst, pi.Value(), depth+1)
			}
			dst = append(dst, '}')
		case "anyOf", "any_of":
			member("anyOf")
			if rawjson.Kind(val) != '[' {
				dst = rawjson.Compact(dst, val)
				continue
			}
			dst = append(dst, '[')
			ai := rawjson.Array(val, 0)
			for ai.Next() {
				if ai.Len() > 1 {
					dst = append(dst, ',')
				}
				dst = openAPIToJSONSchema(dst, ai.Value(), depth+1)
			}
			dst = append(dst, ']')
		case "minItems", "min_items", "maxItems", "max_items", "minProperties", "min_properties",
			"maxProperties", "max_properties", "minLength", "min_length", "maxLength", "max_length":
			member(camel(name))
			if num, ok := walk.ProtoNumber(val); ok {
				dst = append(dst, num...)
			} else {
				dst = rawjson.Compact(dst, val)
			}
		default:
			member(camel(name))
			dst = rawjson.Compact(dst, val)
		}
	}
	return append(dst, '}')
}

// snakeCase turns a lowerCamelCase name into snake_case.
func snakeCase(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// camel turns a snake_case name into lowerCamelCase.
func camel(s string) string {
	if strings.IndexByte(s, '_') <= 0 {
		return s
	}
	var b strings.Builder
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		b.WriteByte(c)
	}
	return b.String()
}

var callingModes = []string{"MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"}

// toolConfig validates toolConfig and maps functionCallingConfig to the IR's
// tool choice (docs/translation.md, "Tool choice").
func (w *walker) toolConfig(v []byte) *formats.Error {
	if ok, err := w.OptObject("tool_config", v); !ok {
		return err
	}
	w.Push("tool_config")
	defer w.Pop()
	var fcc []byte
	var nameBuf [48]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		name := key(&it, nameBuf[:0])
		switch string(name) {
		case "functionCallingConfig", "function_calling_config":
			if fcc != nil {
				return w.dupError("function_calling_config")
			}
			fcc = it.Value()
		default:
			if w.ir != nil && !rawjson.IsNull(it.Value()) {
				w.ir.Drop("toolConfig." + string(name))
			}
		}
	}
	if ok, err := w.OptObject("function_calling_config", fcc); !ok {
		return err
	}
	w.Push("function_calling_config")
	var mode, allowed []byte
	fi := rawjson.Object(fcc, 0)
	for fi.Next() {
		switch string(key(&fi, nameBuf[:0])) {
		case "mode":
			mode = fi.Value()
		case "allowedFunctionNames", "allowed_function_names":
			allowed = fi.Value()
		}
	}
	mi, err := w.optEnum("mode", mode, callingModes...)
	if err != nil {
		return err
	}
	var names []string
	hasNames := false
	switch rawjson.Kind(allowed) {
	case 0, 'n':
	case '[':
		hasNames = true
		w.Push("allowed_function_names")
		ai := rawjson.Array(allowed, 0)
		for ai.Next() {
			if rawjson.Kind(ai.Value()) != '"' {
				w.PushIndex(ai.Len() - 1)
				return w.errType("", ai.Value(), "TYPE_STRING")
			}
			w.req.size.TextBytes += int64(len(ai.Value()))
			if w.ir != nil {
				n, ok := toSafe(jsonval.Str(ai.Value()))
				if !ok {
					w.PushIndex(ai.Len() - 1)
					return w.reject("", "the function name is too long for this model's provider (64 characters).")
				}
				names = append(names, n)
			}
		}
		w.Pop()
	default:
		return w.errType("allowed_function_names", allowed, "list")
	}
	w.Pop()
	if w.ir == nil {
		return nil
	}
	tc := formats.ToolChoice{}
	m := "MODE_UNSPECIFIED"
	if mi >= 0 {
		m = callingModes[mi]
	}
	switch m {
	case "NONE":
		tc.Mode = formats.ToolChoiceNone
	case "ANY":
		switch len(names) {
		case 1:
			tc = formats.ToolChoice{Mode: formats.ToolChoiceNamed, Name: names[0]}
		case 0:
			tc.Mode = formats.ToolChoiceRequired
		default:
			tc = formats.ToolChoice{Mode: formats.ToolChoiceRequired, Allowed: names}
		}
	case "AUTO", "VALIDATED":
		tc.Mode = formats.ToolChoiceAuto
		if hasNames {
			tc.Allowed = names
			if tc.Allowed == nil {
				tc.Allowed = []string{}
			}
		}
	default:
		if hasNames {
			tc = formats.ToolChoice{Mode: formats.ToolChoiceAuto, Allowed: names}
		}
	}
	w.ir.ToolChoice = tc
	return nil
}
