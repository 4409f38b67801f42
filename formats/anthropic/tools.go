package anthropic

import (
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// system validates the system prompt: a string or a list of text blocks.
func (w *walker) system(v []byte) *formats.Error {
	size := &w.req.size
	switch rawjson.Kind(v) {
	case 0, 'n':
		return nil
	case '"':
		size.Messages++
		size.TextBytes += int64(len(v) - 2)
		if w.ir != nil && len(v) > 2 {
			w.ir.System = append(w.ir.System, formats.Part{Type: formats.PartText, Text: jsonval.Str(v)})
		}
		return nil
	case '[':
	default:
		return w.errType("system", tList)
	}
	size.Messages++
	w.Push("system")
	it := rawjson.Array(v, 0)
	var sys []formats.Part
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		bv := it.Value()
		if rawjson.Kind(bv) != '{' {
			return w.errType("", tDict)
		}
		f := readBlock(bv)
		if err := w.ReqString("type", f.typ); err != nil {
			return err
		}
		if !rawjson.StringIs(f.typ, "text") {
			return w.errTag("", f.typ, "text")
		}
		if err := w.cacheControl(f.cacheControl); err != nil {
			return err
		}
		if err := w.ReqString("text", f.text); err != nil {
			return err
		}
		if ok, err := w.OptArray("citations", f.citations); err != nil {
			return err
		} else if ok {
			w.drop("citations")
		}
		size.TextBytes += int64(len(f.text) - 2)
		if w.ir != nil {
			sys = append(sys, formats.Part{Type: formats.PartText, Text: jsonval.Str(f.text)})
		}
		w.Pop()
	}
	w.Pop()
	if w.ir != nil {
		// the top-level system comes before any hoisted system messages
		w.ir.System = append(sys, w.ir.System...)
	}
	return nil
}

// tools validates tools, walking the member of the top-level iterator in
// place: client tools (name, input_schema), which translate, and server
// tools with a versioned type, which pass through and are dropped when
// translating.
func (w *walker) tools(top *rawjson.Iter) *formats.Error {
	if top.Bytes()[top.Start()] == 'n' {
		return nil
	}
	it, err := w.Objects(top, "tools")
	if err != nil {
		return err
	}
	for w.NextObject(&it) {
		end, err := w.tool(it.Bytes(), it.Start(), it.Len()-1)
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

// tool validates the tool object at b[start], tools[index], and returns the
// offset just past it.
func (w *walker) tool(b []byte, start, index int) (int, *formats.Error) {
	var typ, name, desc, schema, strict, cc, maxUses, maxContent []byte
	it := rawjson.Object(b, start)
	for it.Next() {
		switch m := it.Member(); {
		case m.NameIs("max_uses"):
			maxUses = it.Value()
		case m.NameIs("max_content_tokens"):
			maxContent = it.Value()
		case m.NameIs("type"):
			typ = it.Value()
		case m.NameIs("name"):
			name = it.Value()
		case m.NameIs("description"):
			desc = it.Value()
		case m.NameIs("input_schema"):
			schema = it.Value()
		case m.NameIs("strict"):
			strict = it.Value()
		case m.NameIs("cache_control"):
			cc = it.Value()
		}
	}
	end := it.End() + 1
	size := &w.req.size
	size.Tools++
	size.TextBytes += int64(end - start)
	if err := w.cacheControl(cc); err != nil {
		return end, err
	}
	isServer := false
	switch rawjson.Kind(typ) {
	case 0, 'n':
	case '"':
		isServer = !rawjson.StringIs(typ, "custom")
	default:
		return end, w.errType("type", tString)
	}
	if isServer {
		// a server or typed tool (web_search_20250305, bash_20250124,
		// mcp_toolset…): Anthropic checks its fields
		ok, err := w.OptString("name", name)
		if err != nil {
			return end, err
		}
		label := jsonval.Str(typ)
		if ok {
			label = jsonval.Str(name)
		}
		if w.ir != nil {
			w.serverTools = append(w.serverTools, label)
			w.ir.Drop("tools." + label)
		}
		if g, gated := serverToolGate(jsonval.Str(typ), maxUses, maxContent); gated {
			g.Label, g.Tool = "tools."+label, index
			w.gate(g)
		}
		return end, nil
	}
	if err := w.ReqString("name", name); err != nil {
		return end, err
	}
	if !rawValid(name, validToolName[[]byte]) {
		return end, w.errAt("name", "String should match pattern '^[a-zA-Z0-9_-]{1,128}$'")
	}
	hasDesc, err := w.OptString("description", desc)
	if err != nil {
		return end, err
	}
	if err := w.ReqObject("input_schema", schema); err != nil {
		return end, err
	}
	if t := rawjson.Get(schema, "type"); !rawjson.StringIs(t, "object") {
		w.Push("input_schema")
		defer w.Pop()
		if t == nil {
			return end, w.errMissing("type")
		}
		return end, w.errEnum("type", "object")
	}
	sv, hasStrict, err := w.OptBool("strict", strict)
	if err != nil {
		return end, err
	}
	if w.ir != nil {
		t := formats.Tool{Name: jsonval.Str(name), Parameters: schema}
		if hasDesc {
			t.Description = jsonval.Str(desc)
		}
		if hasStrict {
			t.Strict = walk.Ptr(sv)
		}
		w.ir.Tools = append(w.ir.Tools, t)
	}
	return end, nil
}

// toolChoice validates tool_choice.
func (w *walker) toolChoice(v []byte) *formats.Error {
	if ok, err := w.OptObject("tool_choice", v); !ok {
		return err
	}
	w.Push("tool_choice")
	defer w.Pop()
	var typ, name, dpt []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("type"):
			typ = it.Value()
		case it.NameIs("name"):
			name = it.Value()
		case it.NameIs("disable_parallel_tool_use"):
			dpt = it.Value()
		}
	}
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	w.req.size.TextBytes += int64(len(v))
	tc := formats.ToolChoice{}
	switch {
	case rawjson.StringIs(typ, "auto"):
		tc.Mode = formats.ToolChoiceAuto
	case rawjson.StringIs(typ, "any"):
		tc.Mode = formats.ToolChoiceRequired
	case rawjson.StringIs(typ, "none"):
		tc.Mode = formats.ToolChoiceNone
	case rawjson.StringIs(typ, "tool"):
		tc.Mode = formats.ToolChoiceNamed
		if err := w.ReqString("name", name); err != nil {
			return err
		}
		if w.ir != nil {
			tc.Name = jsonval.Str(name)
			for _, s := range w.serverTools {
				if s == tc.Name {
					return invalid("tool_choice.name", "tool_choice forces the Anthropic server tool '"+s+"', which this model's provider cannot run.")
				}
			}
		}
	default:
		return w.errTag("", typ, "auto", "any", "tool", "none")
	}
	disable, ok, err := w.OptBool("disable_parallel_tool_use", dpt)
	if err != nil {
		return err
	}
	if w.ir != nil {
		w.ir.ToolChoice = tc
		if ok && disable && tc.Mode != formats.ToolChoiceNone {
			w.ir.ParallelToolCalls = walk.Ptr(false)
		}
	}
	return nil
}

// thinking validates thinking: enabled with a budget, disabled, or
// adaptive.
func (w *walker) thinking(v []byte) *formats.Error {
	if ok, err := w.OptObject("thinking", v); !ok {
		return err
	}
	w.Push("thinking")
	defer w.Pop()
	var typ, budget, display []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("type"):
			typ = it.Value()
		case it.NameIs("budget_tokens"):
			budget = it.Value()
		case it.NameIs("display"):
			display = it.Value()
		}
	}
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	if _, err := w.OptString("display", display); err != nil {
		return err
	}
	var r formats.Reasoning
	switch {
	case rawjson.StringIs(typ, "enabled"):
		w.Push("enabled")
		if budget == nil {
			err := w.errMissing("budget_tokens")
			w.Pop()
			return err
		}
		n, err := w.Int("budget_tokens", budget, 1024, 1<<31-1)
		w.Pop()
		if err != nil {
			return err
		}
		if !w.count && int(n) >= w.req.maxTokens {
			return invalid("max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens` ("+strconv.FormatInt(n, 10)+")")
		}
		r.Budget = int(n)
	case rawjson.StringIs(typ, "disabled"):
		r.Disabled = true
	case rawjson.StringIs(typ, "adaptive"):
		r.Adaptive = true
	default:
		return w.errTag("", typ, "enabled", "disabled", "adaptive")
	}
	if w.ir != nil {
		if w.ir.Reasoning != nil { // output_config.effort came first
			r.Effort = w.ir.Reasoning.Effort
		}
		w.ir.Reasoning = walk.Ptr(r)
	}
	return nil
}

// outputConfig validates output_config: effort and format.
func (w *walker) outputConfig(v []byte) *formats.Error {
	if ok, err := w.OptObject("output_config", v); !ok {
		return err
	}
	w.Push("output_config")
	defer w.Pop()
	var effort, format []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("effort"):
			effort = it.Value()
		case it.NameIs("format"):
			format = it.Value()
		}
	}
	if ok, err := w.OptString("effort", effort); err != nil {
		return err
	} else if ok && w.ir != nil {
		if w.ir.Reasoning == nil {
			w.ir.Reasoning = &formats.Reasoning{}
		}
		w.ir.Reasoning.Effort = jsonval.Str(effort)
	}
	return w.jsonFormat("format", format)
}

// outputFormat validates the older top-level output_format (structured
// outputs beta), which has the shape of output_config.format.
func (w *walker) outputFormat(v []byte) *formats.Error {
	return w.jsonFormat("output_format", v)
}

// jsonFormat validates {"type":"json_schema","schema":{...}}.
func (w *walker) jsonFormat(child string, v []byte) *formats.Error {
	if ok, err := w.OptObject(child, v); !ok {
		return err
	}
	w.Push(child)
	defer w.Pop()
	typ, schema := rawjson.Get(v, "type"), rawjson.Get(v, "schema")
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	if !rawjson.StringIs(typ, "json_schema") {
		return w.errTag("", typ, "json_schema")
	}
	if err := w.ReqObject("schema", schema); err != nil {
		return err
	}
	w.req.size.TextBytes += int64(len(schema))
	if w.ir != nil {
		w.ir.ResponseFormat = formats.ResponseFormat{Type: formats.FormatJSONSchema, Schema: schema}
	}
	return nil
}

// serverToolGate classifies a server tool by its versioned type:
// web_search_* and web_fetch_* cost a fee per use (the gateway adds
// max_uses, and max_content_tokens for a fetch, when the client set none,
// so that the hold bounds them); code_execution_* runs in a container and
// mcp_toolset calls the request's MCP servers, both state in the operator's
// account. Other server and typed tools (bash, text_editor, computer,
// memory, tool search) run on the client or cost tokens only.
func serverToolGate(typ string, maxUses, maxContent []byte) (formats.Gated, bool) {
	var g formats.Gated
	switch {
	case strings.HasPrefix(typ, "web_search_"):
		g.Hosted = formats.HostedWebSearch
	case strings.HasPrefix(typ, "web_fetch_"):
		g.Hosted = formats.HostedWebFetch
		if rawjson.Kind(maxContent) != '0' {
			g.ToolAdd = append(g.ToolAdd, formats.IntMember("max_content_tokens", formats.FetchTokens))
		}
	case strings.HasPrefix(typ, "code_execution_"):
		g.State = formats.StateCodeExecution
		return g, true
	case typ == "mcp_toolset":
		g.State = formats.StateMCP
		return g, true
	default:
		return g, false
	}
	if n, ok := rawjson.ParseInt(maxUses); ok && rawjson.Kind(maxUses) == '0' && n > 0 {
		g.MaxUses = n
	} else {
		g.ToolAdd = append(g.ToolAdd, formats.IntMember("max_uses", formats.DefaultHostedUses))
	}
	return g, true
}
