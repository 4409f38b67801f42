package openai

import (
	"strconv"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/rawjson"
)

type role uint8

const (
	roleSystem role = iota
	roleDeveloper
	roleUser
	roleAssistant
	roleTool
	roleFunction
)

// Content part types, as a bit set of what a role allows.
const (
	partText = 1 << iota
	partImage
	partAudio
	partFile
	partRefusal
)

var roleParts = [...]uint8{
	roleSystem:    partText,
	roleDeveloper: partText,
	roleUser:      partText | partImage | partAudio | partFile,
	roleAssistant: partText | partRefusal,
	roleTool:      partText,
	roleFunction:  partText,
}

// messages walks the messages member of the top-level iterator in place
// and reports how many messages it holds.
func (w *walker) messages(top *rawjson.Iter) (int, *formats.Error) {
	it, err := w.Objects(top, "messages")
	if err != nil {
		return 0, err
	}
	for w.NextObject(&it) {
		end, err := w.message(it.Bytes(), it.Start())
		if err != nil {
			return 0, err
		}
		it.SetEnd(end)
	}
	if err := w.ObjectsErr(&it); err != nil {
		return 0, err
	}
	n, ok := w.EndObjects(top, &it)
	if !ok {
		return 0, errCode("messages", "We could not parse the JSON body of your request.", "invalid_json")
	}
	return n, nil
}

// message validates the message object at b[start] (the path ends with its
// index) and returns the offset just past it.
func (w *walker) message(b []byte, start int) (int, *formats.Error) {
	var roleV, content, name, toolCalls, toolCallID, refusal, functionCall []byte
	it := rawjson.Object(b, start)
	for it.Next() {
		m := it.Member()
		switch {
		case m.NameIs("role"):
			roleV = it.Value()
		case m.NameIs("content"):
			content = it.Value()
		case m.NameIs("name"):
			name = it.Value()
		case m.NameIs("tool_calls"):
			toolCalls = it.Value()
		case m.NameIs("tool_call_id"):
			toolCallID = it.Value()
		case m.NameIs("refusal"):
			refusal = it.Value()
		case m.NameIs("function_call"):
			functionCall = it.Value()
		}
	}
	end := it.End() + 1
	if err := w.ReqString("role", roleV); err != nil {
		return end, err
	}
	var r role
	switch {
	case rawjson.StringIs(roleV, "system"):
		r = roleSystem
	case rawjson.StringIs(roleV, "developer"):
		r = roleDeveloper
	case rawjson.StringIs(roleV, "user"):
		r = roleUser
	case rawjson.StringIs(roleV, "assistant"):
		r = roleAssistant
	case rawjson.StringIs(roleV, "tool"):
		r = roleTool
	case rawjson.StringIs(roleV, "function"):
		r = roleFunction
	default:
		return end, w.errEnum("role", roleV, "system", "assistant", "user", "function", "tool", "developer")
	}
	size := &w.req.size
	size.Messages++

	if ok, err := w.OptString("name", name); err != nil {
		return end, err
	} else if ok {
		size.TextBytes += int64(len(name) - 2)
	}
	if r == roleFunction {
		if err := w.ReqString("name", name); err != nil {
			return end, err
		}
	}

	// content: required, except for assistant messages with tool calls
	hasCalls := toolCalls != nil && !rawjson.IsNull(toolCalls) || functionCall != nil && !rawjson.IsNull(functionCall)
	switch {
	case content == nil && (r == roleAssistant && hasCalls || r == roleFunction):
	case content == nil && r == roleAssistant && refusal != nil && !rawjson.IsNull(refusal):
	case content == nil:
		return end, w.errMissing("content")
	case rawjson.IsNull(content) && (r == roleAssistant && hasCalls || r == roleFunction):
		content = nil
	case rawjson.IsNull(content) && r == roleAssistant && refusal != nil && !rawjson.IsNull(refusal):
		content = nil
	}

	var msg *formats.Message
	if w.ir != nil {
		msg = &formats.Message{}
		if name != nil && !rawjson.IsNull(name) {
			msg.Name = jsonval.Str(name)
		}
	}
	if content != nil {
		w.Push("content")
		err := w.content(content, r, msg)
		w.Pop()
		if err != nil {
			return end, err
		}
	}

	switch r {
	case roleAssistant:
		if ok, err := w.OptString("refusal", refusal); err != nil {
			return end, err
		} else if ok {
			size.TextBytes += int64(len(refusal) - 2)
			if msg != nil && len(refusal) > 2 {
				msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartRefusal, Text: jsonval.Str(refusal)})
			}
		}
		if err := w.toolCalls(toolCalls, msg); err != nil {
			return end, err
		}
		if err := w.legacyCall(functionCall, msg); err != nil {
			return end, err
		}
	case roleTool:
		if err := w.ReqString("tool_call_id", toolCallID); err != nil {
			return end, err
		}
		size.TextBytes += int64(len(toolCallID) - 2)
	}
	if msg == nil {
		return end, nil
	}
	return end, w.addMessage(r, msg, toolCallID, name)
}

// addMessage appends a converted message to the IR.
func (w *walker) addMessage(r role, msg *formats.Message, toolCallID, name []byte) *formats.Error {
	ir := w.ir
	switch r {
	case roleSystem, roleDeveloper:
		if !w.sawTurn {
			ir.System = append(ir.System, msg.Parts...)
			return nil
		}
		msg.Role = formats.RoleSystem
	case roleUser:
		msg.Role = formats.RoleUser
	case roleAssistant:
		msg.Role = formats.RoleAssistant
	case roleTool, roleFunction:
		res := &formats.ToolResult{Parts: msg.Parts}
		if r == roleTool {
			res.CallID = jsonval.Str(toolCallID)
			res.Name = ir.ToolName(res.CallID)
		} else {
			res.Name = jsonval.Str(name)
			res.CallID = legacyCallID(ir, res.Name)
		}
		part := formats.Part{Type: formats.PartToolResult, ToolResult: res}
		w.sawTurn = true
		if n := len(ir.Messages); n > 0 && ir.Messages[n-1].Role == formats.RoleTool {
			ir.Messages[n-1].Parts = append(ir.Messages[n-1].Parts, part)
			return nil
		}
		ir.Messages = append(ir.Messages, formats.Message{Role: formats.RoleTool, Parts: []formats.Part{part}})
		return nil
	}
	w.sawTurn = true
	ir.Messages = append(ir.Messages, *msg)
	return nil
}

// legacyCallID finds the id given to the last deprecated function_call of
// that name.
func legacyCallID(ir *formats.Request, name string) string {
	for i := len(ir.Messages) - 1; i >= 0; i-- {
		parts := ir.Messages[i].Parts
		for j := len(parts) - 1; j >= 0; j-- {
			if parts[j].Type == formats.PartToolCall && parts[j].ToolCall.Name == name {
				return parts[j].ToolCall.ID
			}
		}
	}
	return "call_" + name
}

// content validates a message's content (the path ends with "content").
func (w *walker) content(v []byte, r role, msg *formats.Message) *formats.Error {
	size := &w.req.size
	switch rawjson.Kind(v) {
	case '"':
		size.TextBytes += int64(len(v) - 2)
		if msg != nil && (len(v) > 2 || r != roleAssistant) {
			msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartText, Text: jsonval.Str(v)})
		}
		return nil
	case '[':
	default:
		if r == roleUser {
			return w.errType("", v, "one of a string or array of objects")
		}
		return w.errType("", v, "one of a string or array of text content parts")
	}
	allowed := roleParts[r]
	it := rawjson.Array(v, 0)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		if err := w.part(it.Value(), allowed, msg); err != nil {
			return err
		}
		w.Pop()
	}
	if it.Len() == 0 && r != roleAssistant {
		return w.errEmpty("")
	}
	return nil
}

// part validates one content part (the path ends with its index).
func (w *walker) part(v []byte, allowed uint8, msg *formats.Message) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "an object")
	}
	var typ, text, image, audio, file, refusal []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		m := it.Member()
		switch {
		case m.NameIs("type"):
			typ = it.Value()
		case m.NameIs("text"):
			text = it.Value()
		case m.NameIs("image_url"):
			image = it.Value()
		case m.NameIs("input_audio"):
			audio = it.Value()
		case m.NameIs("file"):
			file = it.Value()
		case m.NameIs("refusal"):
			refusal = it.Value()
		}
	}
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	var kind uint8
	switch {
	case rawjson.StringIs(typ, "text"):
		kind = partText
	case rawjson.StringIs(typ, "image_url"):
		kind = partImage
	case rawjson.StringIs(typ, "input_audio"):
		kind = partAudio
	case rawjson.StringIs(typ, "file"):
		kind = partFile
	case rawjson.StringIs(typ, "refusal"):
		kind = partRefusal
	}
	if kind&allowed == 0 {
		var names []string
		for _, k := range [...]struct {
			bit  uint8
			name string
		}{{partText, "text"}, {partImage, "image_url"}, {partAudio, "input_audio"}, {partFile, "file"}, {partRefusal, "refusal"}} {
			if allowed&k.bit != 0 {
				names = append(names, k.name)
			}
		}
		return w.errEnum("type", typ, names...)
	}
	size := &w.req.size
	switch kind {
	case partText:
		if err := w.ReqString("text", text); err != nil {
			return err
		}
		size.TextBytes += int64(len(text) - 2)
		if msg != nil {
			msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartText, Text: jsonval.Str(text)})
		}
	case partRefusal:
		if err := w.ReqString("refusal", refusal); err != nil {
			return err
		}
		size.TextBytes += int64(len(refusal) - 2)
		if msg != nil {
			msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartRefusal, Text: jsonval.Str(refusal)})
		}
	case partImage:
		return w.imagePart(image, msg)
	case partAudio:
		return w.audioPart(audio, msg)
	case partFile:
		return w.filePart(file, msg)
	}
	return nil
}

func (w *walker) imagePart(v []byte, msg *formats.Message) *formats.Error {
	if err := w.ReqObject("image_url", v); err != nil {
		return err
	}
	w.Push("image_url")
	var url, detail []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("url"):
			url = it.Value()
		case it.NameIs("detail"):
			detail = it.Value()
		}
	}
	if err := w.ReqString("url", url); err != nil {
		return err
	}
	if ok, err := w.OptString("detail", detail); err != nil {
		return err
	} else if ok && !rawjson.StringIs(detail, "auto") && !rawjson.StringIs(detail, "low") && !rawjson.StringIs(detail, "high") {
		return w.errEnum("detail", detail, "auto", "low", "high")
	}
	w.Pop()
	w.req.size.Images++
	if msg != nil {
		m := &formats.Media{}
		u := jsonval.Str(url)
		if mt, data, ok := formats.ParseDataURL(u); ok {
			m.MediaType, m.Data = mt, data
		} else {
			m.URL = u
		}
		if detail != nil && !rawjson.IsNull(detail) {
			m.Detail = jsonval.Str(detail)
		}
		msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartImage, Media: m})
	}
	return nil
}

func (w *walker) audioPart(v []byte, msg *formats.Message) *formats.Error {
	if err := w.ReqObject("input_audio", v); err != nil {
		return err
	}
	w.Push("input_audio")
	var data, format []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("data"):
			data = it.Value()
		case it.NameIs("format"):
			format = it.Value()
		}
	}
	if err := w.ReqString("data", data); err != nil {
		return err
	}
	if err := w.ReqString("format", format); err != nil {
		return err
	}
	if !rawjson.StringIs(format, "wav") && !rawjson.StringIs(format, "mp3") {
		return w.errEnum("format", format, "wav", "mp3")
	}
	w.Pop()
	w.req.size.Audio++
	w.req.size.MediaBytes += int64(len(data) - 2)
	if msg != nil {
		mt := "audio/wav"
		if rawjson.StringIs(format, "mp3") {
			mt = "audio/mpeg"
		}
		msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartAudio, Media: &formats.Media{MediaType: mt, Data: jsonval.Str(data)}})
	}
	return nil
}

func (w *walker) filePart(v []byte, msg *formats.Message) *formats.Error {
	if err := w.ReqObject("file", v); err != nil {
		return err
	}
	w.Push("file")
	var data, id, filename []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("file_data"):
			data = it.Value()
		case it.NameIs("file_id"):
			id = it.Value()
		case it.NameIs("filename"):
			filename = it.Value()
		}
	}
	hasData, err := w.OptString("file_data", data)
	if err != nil {
		return err
	}
	hasID, err := w.OptString("file_id", id)
	if err != nil {
		return err
	}
	hasName, err := w.OptString("filename", filename)
	if err != nil {
		return err
	}
	if !hasData && !hasID {
		return w.errMissing("file_data")
	}
	if hasID && w.ir == nil {
		// a file in the operator's account
		w.req.gated = append(w.req.gated, formats.Gated{State: formats.StateFiles, Param: w.Param("file_id"), Tool: -1})
	}
	w.Pop()
	size := &w.req.size
	size.Files++
	if hasData {
		size.MediaBytes += int64(len(data) - 2)
	}
	if hasName {
		size.TextBytes += int64(len(filename) - 2)
	}
	if msg != nil {
		m := &formats.Media{}
		if hasData {
			d := jsonval.Str(data)
			if mt, b64, ok := formats.ParseDataURL(d); ok {
				m.MediaType, m.Data = mt, b64
			} else {
				m.Data = d // bare base64
			}
		}
		if hasID {
			m.FileID = jsonval.Str(id)
		}
		if hasName {
			m.Filename = jsonval.Str(filename)
		}
		msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartFile, Media: m})
	}
	return nil
}

// toolCalls validates an assistant message's tool_calls.
func (w *walker) toolCalls(v []byte, msg *formats.Message) *formats.Error {
	if ok, err := w.OptArray("tool_calls", v); !ok {
		return err
	}
	w.Push("tool_calls")
	it := rawjson.Array(v, 0)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		if err := w.toolCall(it.Value(), msg); err != nil {
			return err
		}
		w.Pop()
	}
	w.Pop()
	return nil
}

func (w *walker) toolCall(v []byte, msg *formats.Message) *formats.Error {
	if rawjson.Kind(v) != '{' {
		return w.errType("", v, "an object")
	}
	var id, typ, fn, custom []byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		switch {
		case it.NameIs("id"):
			id = it.Value()
		case it.NameIs("type"):
			typ = it.Value()
		case it.NameIs("function"):
			fn = it.Value()
		case it.NameIs("custom"):
			custom = it.Value()
		}
	}
	if err := w.ReqString("id", id); err != nil {
		return err
	}
	if err := w.ReqString("type", typ); err != nil {
		return err
	}
	size := &w.req.size
	size.TextBytes += int64(len(id) - 2)
	switch {
	case rawjson.StringIs(typ, "function"):
		if err := w.ReqObject("function", fn); err != nil {
			return err
		}
		w.Push("function")
		name, args := rawjson.Get(fn, "name"), rawjson.Get(fn, "arguments")
		if err := w.ReqString("name", name); err != nil {
			return err
		}
		if err := w.ReqString("arguments", args); err != nil {
			return err
		}
		w.Pop()
		size.TextBytes += int64(len(name) + len(args) - 4)
		if msg != nil {
			msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartToolCall,
				ToolCall: &formats.ToolCall{ID: jsonval.Str(id), Name: jsonval.Str(name), Arguments: jsonval.Str(args)}})
		}
	case rawjson.StringIs(typ, "custom"):
		if rawjson.Kind(custom) != '{' {
			return w.errType("custom", custom, "an object")
		}
		size.TextBytes += int64(len(custom))
		if msg != nil {
			return w.errValue("type", "Custom tool calls in '"+w.Param("")+"' cannot be sent to this model's provider.")
		}
	default:
		return w.errEnum("type", typ, "function", "custom")
	}
	return nil
}

// legacyCall validates the deprecated assistant function_call.
func (w *walker) legacyCall(v []byte, msg *formats.Message) *formats.Error {
	if ok, err := w.OptObject("function_call", v); !ok {
		return err
	}
	w.Push("function_call")
	name, args := rawjson.Get(v, "name"), rawjson.Get(v, "arguments")
	if err := w.ReqString("name", name); err != nil {
		return err
	}
	if err := w.ReqString("arguments", args); err != nil {
		return err
	}
	w.Pop()
	w.req.size.TextBytes += int64(len(name) + len(args) - 4)
	if msg != nil {
		id := "call_" + strconv.Itoa(len(w.ir.Messages))
		msg.Parts = append(msg.Parts, formats.Part{Type: formats.PartToolCall,
			ToolCall: &formats.ToolCall{ID: id, Name: jsonval.Str(name), Arguments: jsonval.Str(args)}})
	}
	return nil
}
