package responses

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// known are the top-level members the translation reads or deliberately
// leaves out without naming them (stream settings only the gateway uses).
var known = map[string]bool{
	"model": true, "input": true, "instructions": true, "max_output_tokens": true, "temperature": true,
	"top_p": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true, "stream": true,
	"text": true, "reasoning": true, "user": true, "safety_identifier": true, "metadata": true,
	"service_tier": true, "store": true, "previous_response_id": true, "conversation": true,
	"background": true, "top_logprobs": true, "stream_options": true,
	// dropped by name below
	"include": true, "truncation": true, "prompt_cache_key": true, "max_tool_calls": true,
}

// ToIR converts the request for an upstream of another format
// (docs/translation.md, "Request mapping", "What cannot be mapped"). Stored
// conversation state cannot be honoured there and is refused, naming the field;
// hosted tools are dropped when merely offered and refused when tool_choice
// forces one; what else has no equivalent is dropped and listed in Dropped.
func (r *Request) ToIR() (*formats.Request, *formats.Error) {
	for _, f := range []string{"previous_response_id", "conversation"} {
		if r.present(f) {
			return nil, invalid(f, "Unsupported parameter '"+f+"': this model's upstream does not keep conversation state; send the whole conversation in 'input'.")
		}
	}
	if b, _, _ := r.optBool("store"); b {
		return nil, invalid("store", "Unsupported parameter 'store': this gateway does not store responses for this model; send 'store': false.")
	}
	if b, _, _ := r.optBool("background"); b {
		return nil, invalid("background", "Unsupported parameter 'background': background responses need stored state, which this model's upstream does not keep.")
	}

	ir := &formats.Request{Names: &responsesNames, Model: r.Model, Stream: r.Stream, MaxTokens: r.maxOutput}
	var unknown []string
	for name := range r.top {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		ir.Drop(name)
	}
	for _, name := range []string{"include", "truncation", "prompt_cache_key", "max_tool_calls"} {
		if _, ok := r.top[name]; ok {
			ir.Drop(name)
		}
	}

	if s, ok, _ := r.optString("instructions"); ok && s != "" {
		ir.System = append(ir.System, formats.Part{Type: formats.PartText, Text: s})
	}
	if err := r.messagesToIR(ir); err != nil {
		return nil, err
	}

	if f, ok, _ := r.optNumber("temperature", 0, 2); ok {
		ir.Temperature = &f
	}
	if f, ok, _ := r.optNumber("top_p", 0, 1); ok {
		ir.TopP = &f
	}
	if b, ok, _ := r.optBool("parallel_tool_calls"); ok {
		ir.ParallelToolCalls = &b
	}
	if n, ok, err := r.optInt("top_logprobs", 0); err != nil {
		return nil, err
	} else if ok && n > 0 {
		ir.Logprobs, ir.TopLogprobs = true, &n
	}
	if s, ok, _ := r.optString("safety_identifier"); ok {
		ir.User = s
	} else if s, ok, _ := r.optString("user"); ok {
		ir.User = s
	}
	if s, ok, _ := r.optString("service_tier"); ok {
		ir.ServiceTier = s
	}
	if v := r.top["metadata"]; len(v) > 0 && !rawjson.IsNull(v) {
		_ = json.Unmarshal(v, &ir.Metadata)
	}
	ir.ResponseFormat, _ = r.textFormat()
	ir.Reasoning, _ = r.reasoning()
	if v := r.top["reasoning"]; len(v) > 0 && len(rawjson.Get(v, "summary")) > 0 {
		ir.Drop("reasoning.summary")
	}
	if v := r.top["text"]; len(v) > 0 && len(rawjson.Get(v, "verbosity")) > 0 {
		ir.Drop("text.verbosity")
	}

	ir.Tools = r.tools
	for _, h := range r.hosted {
		ir.Drop(h)
	}
	tc, err := r.toolChoice()
	if err != nil {
		return nil, err
	}
	if tc.Mode == formats.ToolChoiceNamed && len(tc.Name) > 0 && tc.Name[0] == 0 {
		return nil, invalid("tool_choice", "Unsupported value for 'tool_choice': the hosted tool '"+tc.Name[1:]+"' runs only on OpenAI's servers, and this model's upstream is not OpenAI.")
	}
	ir.ToolChoice = tc
	return ir, nil
}

// messagesToIR maps the input items (docs/translation.md,
// "Messages and roles"): leading system and developer messages (after
// instructions) become the system prompt; consecutive function calls, with the
// assistant message just before them, form one assistant turn; each function
// call output is a tool message; reasoning and hosted-tool items are dropped.
func (r *Request) messagesToIR(ir *formats.Request) *formats.Error {
	sawTurn := false
	for i := range r.items {
		it := &r.items[i]
		p := "input[" + strconv.Itoa(i) + "]"
		switch it.Type {
		case "message":
			parts, err := contentToIR(p+".content", it.Content)
			if err != nil {
				return err
			}
			switch it.Role {
			case "system", "developer":
				if !sawTurn {
					ir.System = append(ir.System, parts...)
					continue
				}
				ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleSystem, Parts: parts})
			case "assistant":
				sawTurn = true
				ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleAssistant, Parts: parts})
			default:
				sawTurn = true
				ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleUser, Parts: parts})
			}
		case "function_call":
			sawTurn = true
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + namespaceSep + it.Name
			}
			call := formats.Part{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{ID: it.CallID, Name: name, Arguments: it.Arguments}}
			if n := len(ir.Messages); n > 0 && ir.Messages[n-1].Role == formats.RoleAssistant {
				ir.Messages[n-1].Parts = append(ir.Messages[n-1].Parts, call)
			} else {
				ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleAssistant, Parts: []formats.Part{call}})
			}
		case "function_call_output":
			sawTurn = true
			res := &formats.ToolResult{CallID: it.CallID, Name: ir.ToolName(it.CallID)}
			if rawjson.Kind(it.Output) == '"' {
				s, _ := rawjson.Unquote(it.Output)
				res.Parts = []formats.Part{{Type: formats.PartText, Text: s}}
			} else {
				parts, err := contentToIR(p+".output", it.Output)
				if err != nil {
					return err
				}
				res.Parts = parts
			}
			ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleTool,
				Parts: []formats.Part{{Type: formats.PartToolResult, ToolResult: res}}})
		case "item_reference":
			return invalid(p, "Unsupported input item 'item_reference': it refers to a stored item, and this model's upstream does not keep conversation state.")
		default:
			// reasoning (encrypted for OpenAI only), hosted tool calls and
			// their outputs: nothing another vendor can read
			ir.Drop("input." + it.Type)
		}
	}
	if len(ir.Messages) == 0 {
		return invalid("input", "Invalid 'input': it holds no user message.")
	}
	return nil
}

// contentToIR maps a message's content (a string or parts).
func contentToIR(p string, raw json.RawMessage) ([]formats.Part, *formats.Error) {
	if rawjson.Kind(raw) == '"' {
		s, _ := rawjson.Unquote(raw)
		return []formats.Part{{Type: formats.PartText, Text: s}}, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalidType(p, "a string or an array of content parts")
	}
	out := make([]formats.Part, 0, len(parts))
	for j := range parts {
		cp := &parts[j]
		pp := p + "[" + strconv.Itoa(j) + "]"
		switch cp.Type {
		case "input_text", "output_text", "text":
			out = append(out, formats.Part{Type: formats.PartText, Text: cp.Text})
		case "refusal":
			out = append(out, formats.Part{Type: formats.PartRefusal, Text: cp.Refusal})
		case "summary_text", "reasoning_text":
			// reasoning shown to the user: not carried across vendors
		case "input_image":
			m := &formats.Media{Detail: cp.Detail, FileID: cp.FileID}
			if rawjson.Kind(cp.ImageURL) == '"' {
				u, _ := rawjson.Unquote(cp.ImageURL)
				if mt, data, ok := formats.ParseDataURL(u); ok {
					m.MediaType, m.Data = mt, data
				} else {
					m.URL = u
				}
			}
			out = append(out, formats.Part{Type: formats.PartImage, Media: m})
		case "input_file":
			m := &formats.Media{Filename: cp.Filename, FileID: cp.FileID, URL: cp.FileURL}
			if cp.FileData != "" {
				if mt, data, ok := formats.ParseDataURL(cp.FileData); ok {
					m.MediaType, m.Data = mt, data
				} else {
					return nil, invalid(pp+".file_data", "Invalid '"+pp+".file_data': expected a base64 data URL (data:application/pdf;base64,...).")
				}
			}
			out = append(out, formats.Part{Type: formats.PartFile, Media: m})
		}
	}
	return out, nil
}
