package openai

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// tools validates tools: function tools (translatable) and custom tools
// (OpenAI only: dropped when translating). It walks the tools member of the top-level iterator in place.
func (w *walker) tools(top *rawjson.Iter) *formats.Error {
	if top.Bytes()[top.Start()] == 'n' {
		return nil
	}
	it, err := w.Objects(top, "tools")
	if err != nil {
		return err
	}
	for w.NextObject(&it) {
		end, err := w.tool(it.Bytes(), it.Start())
		if err != nil {
			return err
		}
		it.SetEnd(end)
	}
	if err := w.ObjectsErr(&it); err != nil {
		return err
	}
	w.EndObjects(top, &it) // a malformed list is the body's error, reported by the top level
	return nil
}

// tool validates the tool object at b[start] and returns the offset just
// past it.
func (w *walker) tool(b []byte, start int) (int, *formats.Error) {
	var typ, fn, custom []byte
	it := rawjson.Object(b, start)
	for it.Next() {
		switch {
		case it.NameIs("type"):
			typ = it.Value()
		case it.NameIs("function"):
			fn = it.Value()
		case it.NameIs("custom"):
			custom = it.Value()
		}
	}
	end := it.End() + 1
	if err := w.ReqString("type", typ); err != nil {
		return end, err
	}
	w.req.size.Tools++
	w.req.size.TextBytes += int64(end - start)
	switch {
	case rawjson.StringIs(typ, "function"):
		if fn == nil {
			return end, w.errMissing("function")
		}
		w.Push("function")
		defer w.Pop()
		return end, w.function(fn)
	case rawjson.StringIs(typ, "custom"):
		if err := w.ReqObject("custom", custom); err != nil {
			return end, err
		}
		w.Push("custom")
		name := rawjson.Get(custom, "name")
		if err := w.ReqString("name", name); err != nil {
			return end, err
		}
		w.Pop()
		if w.ir != nil {
			w.ir.Drop("tools." + jsonval.Str(name))
		}
		return end, nil
	}
	return end, w.errEnum("type", typ, "function", "custom")
}

// function validates a function definition (the path ends with "function"
// or "functions[i]").
func (w *walker) function(v []byte) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "an object")
	}
	d, err := w.namedSchema(v, "parameters")
	if err != nil {
		return err
	}
	if w.ir != nil {
		w.ir.Tools = append(w.ir.Tools, formats.Tool{Name: d.name, Description: d.description, Parameters: d.schema, Strict: d.strict})
	}
	return nil
}

// namedSchemaDef is what a function definition and a json_schema response
// format share.
type namedSchemaDef struct {
	name, description string // set only when building the IR
	schema            []byte // nil when absent or null
	strict            *bool
}

// namedSchema validates an object of {name, description, <schemaKey>,
// strict}: a function definition (schemaKey "parameters") or a response
// format's json_schema (schemaKey "schema").
func (w *walker) namedSchema(v []byte, schemaKey string) (namedSchemaDef, *formats.Error) {
	var d namedSchemaDef
	var name, desc, schema, strict []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("name"):
			name = it.Value()
		case it.NameIs("description"):
			desc = it.Value()
		case it.NameIs(schemaKey):
			schema = it.Value()
		case it.NameIs("strict"):
			strict = it.Value()
		}
	}
	if err := w.checkName("name", name); err != nil {
		return d, err
	}
	hasDesc, err := w.OptString("description", desc)
	if err != nil {
		return d, err
	}
	switch rawjson.Kind(schema) {
	case 0, 'n':
		schema = nil
	case '{':
	default:
		return d, w.errType(schemaKey, schema, "an object")
	}
	sv, hasStrict, err := w.OptBool("strict", strict)
	if err != nil {
		return d, err
	}
	d.schema = schema
	if w.ir != nil {
		d.name = jsonval.Str(name)
		if hasDesc {
			d.description = jsonval.Str(desc)
		}
		if hasStrict {
			d.strict = walk.Ptr(sv)
		}
	}
	return d, nil
}

// functions validates the deprecated functions list.
func (w *walker) functions(v []byte) *formats.Error {
	if ok, err := w.OptArray("functions", v); !ok {
		return err
	}
	w.Push("functions")
	it := rawjson.Array(v, 0)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		w.req.size.Tools++
		w.req.size.TextBytes += int64(len(it.Value()))
		if err := w.function(it.Value()); err != nil {
			return err
		}
		w.Pop()
	}
	w.Pop()
	return nil
}

// toolChoice validates tool_choice.
func (w *walker) toolChoice(v []byte) *formats.Error {
	tc := formats.ToolChoice{}
	switch rawjson.Kind(v) {
	case 0, 'n':
		return nil
	case '"':
		switch {
		case rawjson.StringIs(v, "auto"):
			tc.Mode = formats.ToolChoiceAuto
		case rawjson.StringIs(v, "none"):
			tc.Mode = formats.ToolChoiceNone
		case rawjson.StringIs(v, "required"):
			tc.Mode = formats.ToolChoiceRequired
		default:
			return w.errEnum("tool_choice", v, "none", "auto", "required")
		}
	case '{':
		w.Push("tool_choice")
		typ := rawjson.Get(v, "type")
		if err := w.ReqString("type", typ); err != nil {
			return err
		}
		w.req.size.TextBytes += int64(len(v))
		switch {
		case rawjson.StringIs(typ, "function"):
			fn := rawjson.Get(v, "function")
			if err := w.ReqObject("function", fn); err != nil {
				return err
			}
			w.Push("function")
			name := rawjson.Get(fn, "name")
			if err := w.ReqString("name", name); err != nil {
				return err
			}
			w.Pop()
			tc.Mode = formats.ToolChoiceNamed
			if w.ir != nil {
				tc.Name = jsonval.Str(name)
			}
		case rawjson.StringIs(typ, "allowed_tools"):
			if err := w.allowedTools(rawjson.Get(v, "allowed_tools"), &tc); err != nil {
				return err
			}
		case rawjson.StringIs(typ, "custom"):
			c := rawjson.Get(v, "custom")
			if err := w.ReqObject("custom", c); err != nil {
				return err
			}
			if w.ir != nil {
				return errCode("tool_choice", "Forcing a custom tool with 'tool_choice' is not supported for this model's provider.", "unsupported_value")
			}
		default:
			return w.errEnum("type", typ, "function", "allowed_tools", "custom")
		}
		w.Pop()
	default:
		return w.errType("tool_choice", v, "one of a string or an object")
	}
	if w.ir != nil {
		w.ir.ToolChoice = tc
	}
	return nil
}

func (w *walker) allowedTools(v []byte, tc *formats.ToolChoice) *formats.Error {
	if err := w.ReqObject("allowed_tools", v); err != nil {
		return err
	}
	w.Push("allowed_tools")
	mode, tools := rawjson.Get(v, "mode"), rawjson.Get(v, "tools")
	if err := w.ReqString("mode", mode); err != nil {
		return err
	}
	switch {
	case rawjson.StringIs(mode, "auto"):
		tc.Mode = formats.ToolChoiceAuto
	case rawjson.StringIs(mode, "required"):
		tc.Mode = formats.ToolChoiceRequired
	default:
		return w.errEnum("mode", mode, "auto", "required")
	}
	if tools == nil {
		return w.errMissing("tools")
	}
	if rawjson.Kind(tools) != '[' {
		return w.errType("tools", tools, "an array")
	}
	w.Push("tools")
	it := rawjson.Array(tools, 0)
	for it.Next() {
		t := it.Value()
		w.PushIndex(it.Len() - 1)
		if rawjson.Kind(t) != '{' {
			return w.errType("", t, "an object")
		}
		typ := rawjson.Get(t, "type")
		if err := w.ReqString("type", typ); err != nil {
			return err
		}
		var name []byte
		switch {
		case rawjson.StringIs(typ, "function"):
			fn := rawjson.Get(t, "function")
			if rawjson.Kind(fn) != '{' {
				if fn == nil {
					return w.errMissing("function")
				}
				return w.errType("function", fn, "an object")
			}
			name = rawjson.Get(fn, "name")
			w.Push("function")
			if err := w.ReqString("name", name); err != nil {
				return err
			}
			w.Pop()
		case rawjson.StringIs(typ, "custom"):
			// OpenAI-only; a custom tool is dropped when translating
		default:
			return w.errEnum("type", typ, "function", "custom")
		}
		w.Pop()
		if w.ir != nil && name != nil {
			tc.Allowed = append(tc.Allowed, jsonval.Str(name))
		}
	}
	w.Pop()
	w.Pop()
	if w.ir != nil && tc.Allowed == nil {
		tc.Allowed = []string{}
	}
	return nil
}

// functionCall validates the deprecated function_call (a tool_choice).
func (w *walker) functionCall(v []byte) *formats.Error {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return nil
	case '"':
		if !rawjson.StringIs(v, "none") && !rawjson.StringIs(v, "auto") {
			return w.errEnum("function_call", v, "none", "auto")
		}
		if w.ir != nil && w.ir.ToolChoice.Mode == formats.ToolChoiceUnset {
			w.ir.ToolChoice.Mode = formats.ToolChoiceAuto
			if rawjson.StringIs(v, "none") {
				w.ir.ToolChoice.Mode = formats.ToolChoiceNone
			}
		}
		return nil
	case '{':
		w.Push("function_call")
		name := rawjson.Get(v, "name")
		if err := w.ReqString("name", name); err != nil {
			return err
		}
		w.Pop()
		if w.ir != nil && w.ir.ToolChoice.Mode == formats.ToolChoiceUnset {
			w.ir.ToolChoice = formats.ToolChoice{Mode: formats.ToolChoiceNamed, Name: jsonval.Str(name)}
		}
		return nil
	}
	return w.errType("function_call", v, "one of a string or an object")
}

// responseFormat validates response_format.
func (w *walker) responseFormat(v []byte) *formats.Error {
	if ok, err := w.OptObject("response_format", v); !ok {
		return err
	}
	w.Push("response_format")
	defer w.Pop()
	typ := rawjson.Get(v, "type")
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	rf := formats.ResponseFormat{}
	switch {
	case rawjson.StringIs(typ, "text"):
		rf.Type = formats.FormatText
	case rawjson.StringIs(typ, "json_object"):
		rf.Type = formats.FormatJSONObject
	case rawjson.StringIs(typ, "json_schema"):
		rf.Type = formats.FormatJSONSchema
		js := rawjson.Get(v, "json_schema")
		if err := w.ReqObject("json_schema", js); err != nil {
			return err
		}
		w.Push("json_schema")
		d, err := w.namedSchema(js, "schema")
		if err != nil {
			return err
		}
		w.Pop()
		w.req.size.TextBytes += int64(len(js))
		rf.Name, rf.Description, rf.Schema, rf.Strict = d.name, d.description, d.schema, d.strict
	default:
		return w.errEnum("type", typ, "text", "json_object", "json_schema")
	}
	if w.ir != nil {
		w.ir.ResponseFormat = rf
	}
	return nil
}
