package gemini

import (
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// c is a valid contents list for the table below.
const c = `"contents":[{"role":"user","parts":[{"text":"hi"}]}]`

func decl(d string) string { return `{` + c + `,"tools":[{"functionDeclarations":[` + d + `]}]}` }

func gen(g string) string { return `{` + c + `,"generationConfig":{` + g + `}}` }

func part(p string) string { return `{"contents":[{"role":"user","parts":[` + p + `]}]}` }

func TestParseGenerateRequestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
	}{
		// the body
		{"not json", `{"contents":`, ""},
		{"trailing data", `{` + c + `} x`, ""},
		{"invalid utf8", "{" + c + ",\"cachedContent\":\"\xff\"}", ""},
		{"duplicate key", `{` + c + `,` + c + `}`, "contents"},
		{"both spellings", `{` + c + `,"generationConfig":{},"generation_config":{}}`, "generation_config"},
		{"not an object", `[1,2]`, ""},
		{"null body", `null`, ""},
		// contents
		{"contents missing", `{}`, "contents"},
		{"contents empty", `{"contents":[]}`, "contents"},
		{"contents null", `{"contents":null}`, "contents"},
		{"contents string", `{"contents":"hi"}`, "contents"},
		{"content not object", `{"contents":["hi"]}`, "contents[0]"},
		{"role assistant", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "contents[0].role"},
		{"role number", `{"contents":[{"role":1,"parts":[{"text":"x"}]}]}`, "contents[0].role"},
		{"parts missing", `{"contents":[{"role":"user"}]}`, "contents[0].parts"},
		{"parts empty", `{"contents":[{"role":"user","parts":[]}]}`, "contents[0].parts"},
		{"parts string", `{"contents":[{"role":"user","parts":"hi"}]}`, "contents[0].parts"},
		{"second content", `{"contents":[{"parts":[{"text":"a"}]},{"role":"model","parts":[{"text":1}]}]}`, "contents[1].parts[0].text"},
		// parts
		{"part not object", part(`"x"`), "contents[0].parts[0]"},
		{"part without data", part(`{}`), "contents[0].parts[0].data"},
		{"part with only thought", part(`{"thought":true}`), "contents[0].parts[0].data"},
		{"two data fields", part(`{"text":"a","inlineData":{"mimeType":"image/png","data":"AAAA"}}`), "contents[0].parts[0].inline_data"},
		{"text number", part(`{"text":5}`), "contents[0].parts[0].text"},
		{"inline mime missing", part(`{"inlineData":{"data":"AAAA"}}`), "contents[0].parts[0].inline_data.mime_type"},
		{"inline data missing", part(`{"inline_data":{"mime_type":"image/png"}}`), "contents[0].parts[0].inline_data.data"},
		{"inline bad base64", part(`{"inline_data":{"mime_type":"image/png","data":"A*=="}}`), "contents[0].parts[0].inline_data.data"},
		{"inline bad padding", part(`{"inlineData":{"mimeType":"image/png","data":"AAAAA==="}}`), "contents[0].parts[0].inline_data.data"},
		{"inline string", part(`{"inlineData":"AAAA"}`), "contents[0].parts[0].inline_data"},
		{"file uri missing", part(`{"fileData":{"mimeType":"video/mp4"}}`), "contents[0].parts[0].file_data.file_uri"},
		{"call name missing", part(`{"functionCall":{"args":{}}}`), "contents[0].parts[0].function_call.name"},
		{"call args array", part(`{"functionCall":{"name":"f","args":[]}}`), "contents[0].parts[0].function_call.args"},
		{"call id number", part(`{"function_call":{"name":"f","id":1}}`), "contents[0].parts[0].function_call.id"},
		{"response name missing", part(`{"functionResponse":{"response":{}}}`), "contents[0].parts[0].function_response.name"},
		{"response string", part(`{"functionResponse":{"name":"f","response":"ok"}}`), "contents[0].parts[0].function_response.response"},
		{"response parts blob", part(`{"functionResponse":{"name":"f","response":{},"parts":[{"inlineData":{"mimeType":"image/png","data":"@"}}]}}`), "contents[0].parts[0].function_response.parts[0].inline_data.data"},
		{"thought string", part(`{"text":"a","thought":"yes"}`), "contents[0].parts[0].thought"},
		{"signature not base64", part(`{"text":"a","thoughtSignature":"not base64!"}`), "contents[0].parts[0].thought_signature"},
		{"executable code string", part(`{"executableCode":"print(1)"}`), "contents[0].parts[0].executable_code"},
		// systemInstruction
		{"system string", `{` + c + `,"systemInstruction":"be brief"}`, "system_instruction"},
		{"system part", `{` + c + `,"system_instruction":{"parts":[{"text":1}]}}`, "system_instruction.parts[0].text"},
		{"system role number", `{` + c + `,"systemInstruction":{"role":1,"parts":[{"text":"x"}]}}`, "system_instruction.role"},
		// generationConfig
		{"config array", `{` + c + `,"generationConfig":[]}`, "generation_config"},
		{"config field twice", gen(`"maxOutputTokens":5,"max_output_tokens":6`), "generation_config.max_output_tokens"},
		{"max tokens zero", gen(`"maxOutputTokens":0`), "generation_config.max_output_tokens"},
		{"max tokens float", gen(`"maxOutputTokens":1.5`), "generation_config.max_output_tokens"},
		{"max tokens word", gen(`"max_output_tokens":"many"`), "generation_config.max_output_tokens"},
		{"max tokens bool", gen(`"maxOutputTokens":true`), "generation_config.max_output_tokens"},
		{"temperature high", gen(`"temperature":2.5`), "generation_config.temperature"},
		{"temperature low", gen(`"temperature":-0.1`), "generation_config.temperature"},
		{"temperature string", gen(`"temperature":"hot"`), "generation_config.temperature"},
		{"top_p high", gen(`"topP":1.5`), "generation_config.top_p"},
		{"top_k negative", gen(`"topK":-1`), "generation_config.top_k"},
		{"top_k float", gen(`"top_k":1.5`), "generation_config.top_k"},
		{"candidates zero", gen(`"candidateCount":0`), "generation_config.candidate_count"},
		{"candidates nine", gen(`"candidate_count":9`), "generation_config.candidate_count"},
		{"seed too big", gen(`"seed":1099511627776`), "generation_config.seed"},
		{"presence high", gen(`"presencePenalty":3`), "generation_config.presence_penalty"},
		{"frequency low", gen(`"frequency_penalty":-2.5`), "generation_config.frequency_penalty"},
		{"stop string", gen(`"stopSequences":"x"`), "generation_config.stop_sequences"},
		{"stop element", gen(`"stopSequences":["a",1]`), "generation_config.stop_sequences[1]"},
		{"stop six", gen(`"stop_sequences":["a","b","c","d","e","f"]`), "generation_config.stop_sequences"},
		{"logprobs range", gen(`"responseLogprobs":true,"logprobs":21`), "generation_config.logprobs"},
		{"response logprobs string", gen(`"responseLogprobs":"yes"`), "generation_config.response_logprobs"},
		{"mime type", gen(`"responseMimeType":"text/html"`), "generation_config.response_mime_type"},
		{"mime number", gen(`"responseMimeType":1`), "generation_config.response_mime_type"},
		{"schema string", gen(`"responseSchema":"object"`), "generation_config.response_schema"},
		{"schema type", gen(`"responseSchema":{"type":"MAP"}`), "generation_config.response_schema.type"},
		{"schema nested type", gen(`"responseSchema":{"type":"OBJECT","properties":{"city":{"type":"TEXT"}}}`), "generation_config.response_schema.properties[city].type"},
		{"schema items", gen(`"response_schema":{"type":"ARRAY","items":[]}`), "generation_config.response_schema.items"},
		{"schema anyOf", gen(`"responseSchema":{"anyOf":[{"type":"X"}]}`), "generation_config.response_schema.any_of[0].type"},
		{"both schemas", gen(`"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"},"responseJsonSchema":{"type":"object"}`), "generation_config.response_json_schema"},
		{"json schema string", gen(`"responseJsonSchema":"x"`), "generation_config.response_json_schema"},
		{"modality", gen(`"responseModalities":["VIDEO"]`), "generation_config.response_modalities[0]"},
		{"modalities string", gen(`"responseModalities":"TEXT"`), "generation_config.response_modalities"},
		{"thinking array", gen(`"thinkingConfig":[]`), "generation_config.thinking_config"},
		{"thinking budget", gen(`"thinkingConfig":{"thinkingBudget":-2}`), "generation_config.thinking_config.thinking_budget"},
		{"thinking level", gen(`"thinking_config":{"thinking_level":"extreme"}`), "generation_config.thinking_config.thinking_level"},
		{"include thoughts", gen(`"thinkingConfig":{"includeThoughts":"yes"}`), "generation_config.thinking_config.include_thoughts"},
		// tools
		{"tools object", `{` + c + `,"tools":{}}`, "tools"},
		{"tool not object", `{` + c + `,"tools":[1]}`, "tools[0]"},
		{"declarations object", `{` + c + `,"tools":[{"functionDeclarations":{}}]}`, "tools[0].function_declarations"},
		{"declaration not object", decl(`1`), "tools[0].function_declarations[0]"},
		{"name missing", decl(`{"description":"d"}`), "tools[0].function_declarations[0].name"},
		{"name space", decl(`{"name":"get weather"}`), "tools[0].function_declarations[0].name"},
		{"name digit", decl(`{"name":"1tool"}`), "tools[0].function_declarations[0].name"},
		{"name too long", decl(`{"name":"` + strings.Repeat("a", 129) + `"}`), "tools[0].function_declarations[0].name"},
		{"description number", decl(`{"name":"f","description":1}`), "tools[0].function_declarations[0].description"},
		{"parameters string", decl(`{"name":"f","parameters":"{}"}`), "tools[0].function_declarations[0].parameters"},
		{"parameters type", decl(`{"name":"f","parameters":{"type":"DICT"}}`), "tools[0].function_declarations[0].parameters.type"},
		{"both parameters", decl(`{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{"type":"object"}}`), "tools[0].function_declarations[0].parameters_json_schema"},
		{"json parameters string", decl(`{"name":"f","parameters_json_schema":"x"}`), "tools[0].function_declarations[0].parameters_json_schema"},
		{"behavior", decl(`{"name":"f","behavior":"LATER"}`), "tools[0].function_declarations[0].behavior"},
		{"second declaration", decl(`{"name":"f"},{"name":"g:h","parameters":{"type":1}}`), "tools[0].function_declarations[1].parameters.type"},
		{"too many declarations", decl(strings.TrimSuffix(strings.Repeat(`{"name":"f"},`, 513), ",")), "tools[0].function_declarations[512]"},
		{"builtin string", `{` + c + `,"tools":[{"googleSearch":"on"}]}`, "tools[0].google_search"},
		// toolConfig
		{"tool config string", `{` + c + `,"toolConfig":"auto"}`, "tool_config"},
		{"calling config array", `{` + c + `,"toolConfig":{"functionCallingConfig":[]}}`, "tool_config.function_calling_config"},
		{"mode", `{` + c + `,"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, "tool_config.function_calling_config.mode"},
		{"mode number", `{` + c + `,"tool_config":{"function_calling_config":{"mode":2}}}`, "tool_config.function_calling_config.mode"},
		{"allowed string", `{` + c + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":"f"}}}`, "tool_config.function_calling_config.allowed_function_names"},
		{"allowed element", `{` + c + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":[1]}}}`, "tool_config.function_calling_config.allowed_function_names[0]"},
		// safetySettings, cachedContent
		{"safety object", `{` + c + `,"safetySettings":{}}`, "safety_settings"},
		{"safety element", `{` + c + `,"safetySettings":[1]}`, "safety_settings[0]"},
		{"safety category", `{` + c + `,"safetySettings":[{"category":"VIOLENCE","threshold":"BLOCK_NONE"}]}`, "safety_settings[0].category"},
		{"safety threshold", `{` + c + `,"safety_settings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_ALL"}]}`, "safety_settings[0].threshold"},
		{"cached number", `{` + c + `,"cachedContent":1}`, "cached_content"},
		{"service tier", `{` + c + `,"serviceTier":{}}`, "service_tier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseGenerateRequest([]byte(tc.body), "gemini-2.5-flash", false)
			if err == nil {
				t.Fatalf("accepted: %+v", req)
			}
			if err.Status() != 400 || err.Kind != formats.KindInvalidRequest || Status(err) != 400 {
				t.Fatalf("status %d", err.Status())
			}
			if err.Param != tc.param {
				t.Fatalf("param %q, want %q (%s)", err.Param, tc.param, err.Message)
			}
			if err.Message == "" || (tc.param != "" && !strings.Contains(err.Message, tc.param)) {
				t.Fatalf("message %q does not name %q", err.Message, tc.param)
			}
		})
	}
}

func TestParseGenerateRequestMessages(t *testing.T) {
	// a few exact messages, Google's wording
	for body, want := range map[string]string{
		`{}`: "* GenerateContentRequest.contents: contents is not specified",
		`{"contents":[{"role":"user","parts":[]}]}`:                 "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.",
		`{"contents":[{"role":"bot","parts":[{"text":"x"}]}]}`:      "* GenerateContentRequest.contents[0].role: Please use a valid role: user, model.",
		gen(`"temperature":"hot"`):                                  `Invalid value at 'generation_config.temperature' (TYPE_FLOAT), "hot"`,
		gen(`"temperature":3`):                                      "* GenerateContentRequest.generation_config.temperature: temperature must be between 0 and 2, got 3.",
		gen(`"maxOutputTokens":0`):                                  "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must be positive, got 0.",
		part(`{}`):                                                  "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have one initialized field",
		part(`{"inlineData":{"mimeType":"image/png","data":"A*"}}`): `Invalid value at 'contents[0].parts[0].inline_data.data' (TYPE_BYTES), Base64 decoding failed for "A*"`,
		`{"contents":[{"parts":[{"text":"x"}]}],"toolConfig":{"functionCallingConfig":{"mode":"MAYBE"}}}`: `Invalid value at 'tool_config.function_calling_config.mode' (TYPE_ENUM), "MAYBE". Valid values: MODE_UNSPECIFIED, AUTO, ANY, NONE, VALIDATED.`,
	} {
		_, err := ParseGenerateRequest([]byte(body), "m", false)
		if err == nil || err.Message != want {
			t.Errorf("%s:\n got %v\nwant %s", body, err, want)
		}
	}
}

func TestParseGenerateRequestValid(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		max        int
		maxOK      bool
		choices    int
	}{
		{"minimal", `{` + c + `}`, 0, false, 1},
		{"no role, single content and part", `{"contents":{"parts":{"text":"hi"}}}`, 0, false, 1},
		{"function role", `{"contents":[{"role":"function","parts":[{"functionResponse":{"name":"f","response":{"output":1}}}]}]}`, 0, false, 1},
		{"nulls are absent", `{` + c + `,"generationConfig":{"temperature":null,"maxOutputTokens":null,"stopSequences":null},"tools":null,"toolConfig":null,"systemInstruction":null,"safetySettings":null}`, 0, false, 1},
		{"camelCase", `{` + c + `,"generationConfig":{"maxOutputTokens":100,"candidateCount":2,"topK":40,"topP":0.9,"temperature":1.5,"stopSequences":["x"],"responseMimeType":"application/json","responseJsonSchema":{"type":"object"},"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}}}`, 100, true, 2},
		{"snake_case", `{"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"image/png","data":"iVBORw0KGgo="}},{"text":"what?"}]}],"system_instruction":{"parts":[{"text":"sys"}]},"generation_config":{"max_output_tokens":"64","candidate_count":1,"top_k":3,"top_p":"0.5","stop_sequences":["a"],"response_mime_type":"application/json","response_schema":{"type":"OBJECT"},"thinking_config":{"include_thoughts":false,"thinking_budget":0,"thinking_level":"low"},"presence_penalty":0.5,"frequency_penalty":-0.5,"response_logprobs":true,"logprobs":3,"response_modalities":["TEXT"]},"tools":[{"function_declarations":[{"name":"f","parameters_json_schema":{"type":"object"}}]},{"google_search":{}}],"tool_config":{"function_calling_config":{"mode":"ANY","allowed_function_names":["f"]}},"safety_settings":[{"category":"HARM_CATEGORY_HATE_SPEECH","threshold":"BLOCK_NONE"}],"cached_content":"cachedContents/abc"}`, 64, true, 1},
		{"enums in any case", `{` + c + `,"generationConfig":{"responseMimeType":"Application/JSON","responseSchema":{"type":"object","properties":{"a":{"type":"string","nullable":true}}},"responseModalities":["text"],"thinkingConfig":{"thinkingLevel":"high"}},"toolConfig":{"functionCallingConfig":{"mode":"any"}},"safetySettings":[{"category":"harm_category_dangerous_content","threshold":"block_only_high"}]}`, 0, false, 1},
		{"url-safe base64 without padding", part(`{"inlineData":{"mimeType":"image/png","data":"_-8"}},{"text":"a","thoughtSignature":"Cg-_"}`), 0, false, 1},
		{"escaped slash in base64", part(`{"inlineData":{"mimeType":"image/png","data":"ab\/c"}}`), 0, false, 1},
		{"unknown fields", `{` + c + `,"labels":{"a":"b"},"generationConfig":{"speechConfig":{},"mediaResolution":"MEDIA_RESOLUTION_LOW"},"tools":[{"futureTool":{}}]}`, 0, false, 1},
		{"unknown part kind", part(`{"toolCall":{"id":"x"}}`), 0, false, 1},
		{"every part", `{"contents":[{"role":"user","parts":[{"text":"a"},{"fileData":{"mimeType":"video/mp4","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}]},{"role":"model","parts":[{"text":"t","thought":true,"thoughtSignature":"AAAA"},{"functionCall":{"id":"c1","name":"mcp.files:read","args":{"p":1}},"thoughtSignature":"AAAA"},{"executableCode":{"language":"PYTHON","code":"print(1)"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1"}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"mcp.files:read","response":{"output":"x"},"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}},{"text":"go on"}]}]}`, 0, false, 1},
		{"escaped names", `{"c\u006fntents":[{"r\u006fle":"user","parts":[{"t\u0065xt":"hi"}]}]}`, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseGenerateRequest([]byte(tc.body), "gemini-2.5-flash", true)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if req.Model != "gemini-2.5-flash" || !req.Stream || req.Choices() != tc.choices {
				t.Fatalf("got %+v", req)
			}
			if n, ok := req.MaxTokens(); n != tc.max || ok != tc.maxOK {
				t.Fatalf("MaxTokens = %d %v", n, ok)
			}
			if req.InputBound() < int64(formats.BaseTokens) || req.InputEstimate() <= 0 {
				t.Fatalf("bound %d estimate %d", req.InputBound(), req.InputEstimate())
			}
			if string(req.Body()) != tc.body {
				t.Fatal("body not kept")
			}
		})
	}
}

// cliRequest is shaped like what Gemini CLI sends to
// :streamGenerateContent?alt=sse.
const cliRequest = `{"contents":[{"role":"user","parts":[{"text":"This is the Gemini CLI. We are setting up the context for our chat."}]},{"role":"model","parts":[{"text":"Got it. Thanks for the context!"}]},{"role":"user","parts":[{"text":"list the files here"}]}],"systemInstruction":{"role":"user","parts":[{"text":"You are an interactive CLI agent specializing in software engineering tasks."}]},"generationConfig":{"temperature":0,"topP":1,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}},"tools":[{"functionDeclarations":[{"name":"list_directory","description":"Lists the names of files and subdirectories directly within a specified directory path.","parametersJsonSchema":{"type":"object","properties":{"path":{"type":"string","description":"The absolute path to the directory to list"},"ignore":{"type":"array","items":{"type":"string"}}},"required":["path"]}},{"name":"read_file","description":"Reads and returns the content of a specified file.","parametersJsonSchema":{"type":"object","properties":{"absolute_path":{"type":"string"}},"required":["absolute_path"],"additionalProperties":false}}]}]}`

func TestGeminiCLIRequest(t *testing.T) {
	req, err := ParseGenerateRequest([]byte(cliRequest), "gemini-2.5-pro", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := req.MaxTokens(); ok || req.Choices() != 1 || !req.Stream {
		t.Fatalf("got %+v", req)
	}
	ir, err := req.ToIR()
	if err != nil {
		t.Fatal(err)
	}
	if len(ir.System) != 1 || len(ir.Messages) != 3 || ir.Messages[1].Role != formats.RoleAssistant {
		t.Fatalf("ir %+v", ir)
	}
	if ir.TopK == nil || *ir.TopK != 64 || ir.Reasoning == nil || !ir.Reasoning.IncludeThoughts || ir.Reasoning.Budget != -1 {
		t.Fatalf("sampling %+v %+v", ir.TopK, ir.Reasoning)
	}
	if len(ir.Tools) != 2 || !strings.Contains(string(ir.Tools[1].Parameters), `"additionalProperties":false`) {
		t.Fatalf("tools %+v", ir.Tools)
	}
	if s := req.InputSize(); s.Tools != 2 || s.Messages != 4 || s.TextBytes < int64(len("list the files here")) {
		t.Fatalf("size %+v", s)
	}
}

func TestParseCountTokensRequest(t *testing.T) {
	for _, tc := range []struct {
		body, param string
		ok          bool
	}{
		{`{` + c + `}`, "", true},
		{`{"generateContentRequest":{"model":"models/gemini-2.5-flash",` + c + `,"systemInstruction":{"parts":[{"text":"s"}]},"tools":[{"functionDeclarations":[{"name":"f"}]}]}}`, "", true},
		{`{"generate_content_request":{` + c + `}}`, "", true},
		{`{}`, "contents", false},
		{`{"contents":[]}`, "contents", false},
		{`{"generateContentRequest":{}}`, "generate_content_request.contents", false},
		{`{"generateContentRequest":{` + c + `,"generationConfig":{"topK":-1}}}`, "generate_content_request.generation_config.top_k", false},
		{`{"generateContentRequest":[]}`, "generate_content_request", false},
		{`{` + c + `,"generateContentRequest":{` + c + `}}`, "generate_content_request", false},
	} {
		req, err := ParseCountTokensRequest([]byte(tc.body), "gemini-2.5-flash")
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if err != nil {
			if err.Param != tc.param || !strings.Contains(err.Message, "CountTokensRequest") && !strings.Contains(err.Message, "Invalid") {
				t.Errorf("%s: param %q (%s)", tc.body, err.Param, err.Message)
			}
			continue
		}
		if _, ok := req.MaxTokens(); ok || req.Choices() != 1 || req.Stream {
			t.Errorf("%s: %+v", tc.body, req)
		}
		ir, ferr := req.ToIR()
		if ferr != nil || len(ir.Messages) != 1 {
			t.Errorf("%s: ToIR %v %+v", tc.body, ferr, ir)
		}
	}
}

func TestInputBound(t *testing.T) {
	text := strings.Repeat("héllo wörld ", 100)
	body := `{"contents":[{"role":"user","parts":[{"text":"` + text + `"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}},{"inlineData":{"mimeType":"application/pdf","data":"` + strings.Repeat("A", 4000) + `"}}]}],"systemInstruction":{"parts":[{"text":"be brief"}]},"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]}]}`
	req, err := ParseGenerateRequest([]byte(body), "m", false)
	if err != nil {
		t.Fatal(err)
	}
	s := req.InputSize()
	if s.Messages != 2 || s.Images != 1 || s.Files != 1 || s.Tools != 1 || s.MediaBytes != 4000 || s.TextBytes < int64(len(text)+len("be brief")) {
		t.Fatalf("size %+v", s)
	}
	min := int64(len(text)+len("be brief")) + formats.ImageTokens + formats.FileTokens + 4000
	if b := req.InputBound(); b < min {
		t.Fatalf("bound %d < %d", b, min)
	}
	// a file reference or a cache may hold a whole input window; a
	// built-in tool feeds results back
	for _, extra := range []string{
		`,"cachedContent":"cachedContents/x"`,
		`,"tools":[{"googleSearch":{}}]`,
	} {
		r2, err := ParseGenerateRequest([]byte(`{`+c+extra+`}`), "m", false)
		if err != nil {
			t.Fatal(err)
		}
		if r2.InputBound() < builtinToolTokens {
			t.Fatalf("%s: bound %d", extra, r2.InputBound())
		}
	}
	ref, _ := ParseGenerateRequest([]byte(part(`{"fileData":{"mimeType":"video/mp4","fileUri":"https://www.youtube.com/watch?v=x"}}`)), "m", false)
	if ref.InputBound() < refTokens {
		t.Fatalf("file reference bound %d", ref.InputBound())
	}
}

func TestToIR(t *testing.T) {
	body := `{"contents":[
		{"role":"user","parts":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"_-8"}},{"inlineData":{"mimeType":"text/plain","data":"aGVsbG8="}}]},
		{"role":"model","parts":[{"text":"hmm","thought":true},{"text":"calling"},{"functionCall":{"name":"mcp.files:read","args":{"p":1}},"thoughtSignature":"c2ln"},{"functionCall":{"id":"c2","name":"f","args":{}}}]},
		{"role":"user","parts":[{"functionResponse":{"name":"mcp.files:read","response":{"output":"data"}}},{"functionResponse":{"id":"c2","name":"f","response":{"error":"boom"}}},{"text":"and?"}]}
	],
	"generationConfig":{"maxOutputTokens":10,"candidateCount":2,"seed":7,"stopSequences":["", "x"],"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"a":{"type":"STRING","nullable":true}},"propertyOrdering":["a"],"min_properties":"1"},"thinkingConfig":{"thinkingBudget":0},"speechConfig":{}},
	"tools":[{"functionDeclarations":[{"name":"mcp.files:read","parameters":{"type":"OBJECT","properties":{"p":{"type":"INTEGER"}}}},{"name":"f"}]},{"googleSearch":{}},{"codeExecution":{}}],
	"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f","mcp.files:read"]},"retrievalConfig":{}},
	"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"OFF"}],"serviceTier":"flex","labels":{}}`
	req, ferr := ParseGenerateRequest([]byte(body), "m", false)
	if ferr != nil {
		t.Fatal(ferr)
	}
	ir, ferr := req.ToIR()
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(ir.Messages) != 4 {
		t.Fatalf("messages %+v", ir.Messages)
	}
	user := ir.Messages[0].Parts
	if len(user) != 3 || user[1].Media.Data != "/+8=" || user[2].Type != formats.PartFile || user[2].Media.Text != "hello" {
		t.Fatalf("user %+v %+v", user[1].Media, user[2].Media)
	}
	model := ir.Messages[1].Parts
	if len(model) != 3 || model[1].ToolCall.Name != "_mg_mcp-dfiles-cread" || model[1].ToolCall.Signature != "c2ln" || model[1].ToolCall.Arguments != `{"p":1}` || model[2].ToolCall.ID != "c2" {
		t.Fatalf("model %+v %+v", model[1].ToolCall, model[2].ToolCall)
	}
	tool := ir.Messages[2]
	if tool.Role != formats.RoleTool || len(tool.Parts) != 2 || tool.Parts[1].ToolResult.CallID != "c2" || !tool.Parts[1].ToolResult.IsError || tool.Parts[1].ToolResult.Parts[0].Text != "boom" || tool.Parts[0].ToolResult.Parts[0].Text != "data" {
		t.Fatalf("tool %+v", tool)
	}
	if ir.Messages[3].Role != formats.RoleUser {
		t.Fatal("trailing user text")
	}
	if ir.N != 2 || *ir.Seed != 7 || len(ir.Stop) != 1 || ir.MaxTokens != 10 || !ir.Reasoning.Disabled {
		t.Fatalf("config %+v", ir)
	}
	if ir.ResponseFormat.Type != formats.FormatJSONSchema || string(ir.ResponseFormat.Schema) != `{"type":"object","properties":{"a":{"type":["string","null"]}},"minProperties":1}` {
		t.Fatalf("schema %s", ir.ResponseFormat.Schema)
	}
	if len(ir.Tools) != 2 || ir.Tools[0].Name != "_mg_mcp-dfiles-cread" || string(ir.Tools[0].Parameters) != `{"type":"object","properties":{"p":{"type":"integer"}}}` {
		t.Fatalf("tools %+v", ir.Tools)
	}
	if tc := ir.ToolChoice; tc.Mode != formats.ToolChoiceRequired || len(tc.Allowed) != 2 || tc.Allowed[1] != "_mg_mcp-dfiles-cread" {
		t.Fatalf("tool choice %+v", tc)
	}
	if got := ir.DroppedHeader(); got != "tools.googleSearch,tools.codeExecution,labels,generationConfig.speechConfig,toolConfig.retrievalConfig,safetySettings,serviceTier" {
		t.Fatalf("dropped %s", got)
	}
	// the call without id gets one and its result pairs by name
	ir.FillToolIDs("call_")
	if id := ir.Messages[1].Parts[1].ToolCall.ID; id == "" || ir.Messages[2].Parts[0].ToolResult.CallID != id {
		t.Fatalf("pairing %q %q", id, ir.Messages[2].Parts[0].ToolResult.CallID)
	}
}

func TestToIRRejects(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{` + c + `,"cachedContent":"cachedContents/x"}`, "cached_content"},
		{part(`{"fileData":{"mimeType":"application/pdf","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/x"}}`), "contents[0].parts[0].file_data"},
		{part(`{"inlineData":{"mimeType":"video/mp4","data":"AAAA"}}`), "contents[0].parts[0].inline_data.mime_type"},
		{gen(`"responseModalities":["TEXT","IMAGE"]`), "generation_config.response_modalities[1]"},
		{gen(`"responseMimeType":"text/x.enum","responseSchema":{"type":"STRING","enum":["a"]}`), "generation_config.response_mime_type"},
		{`{"contents":[{"role":"model","parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`, "contents[0].parts[0].function_response"},
		{`{"contents":[{"role":"user","parts":[{"functionCall":{"name":"f"}}]}]}`, "contents[0].parts[0].function_call"},
		{`{` + c + `,"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}}`, "system_instruction.parts[0]"},
		{decl(`{"name":"` + strings.Repeat("a.", 40) + `"}`), "tools[0].function_declarations[0].name"},
	} {
		req, ferr := ParseGenerateRequest([]byte(tc.body), "m", false)
		if ferr != nil {
			t.Fatalf("%s: %v", tc.body, ferr)
		}
		_, ferr = req.ToIR()
		if ferr == nil || ferr.Param != tc.param || ferr.Kind != formats.KindInvalidRequest {
			t.Errorf("%s: %v, want param %s", tc.body, ferr, tc.param)
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ in, gem, safe string }{
		{"get_weather", "get_weather", "get_weather"},
		{"1tool", "_mg_1tool", "1tool"},
		{"-x", "_mg_--x", "-x"},
		{"mcp.files:read", "mcp.files:read", "_mg_mcp-dfiles-cread"},
		{"_mg_x", "_mg__mg_x", "_mg__mg_x"},
		{"a b/é", "_mg_a-x20b-x2F-xC3-xA9", "_mg_a-x20b-x2F-xC3-xA9"},
	} {
		g, ok := toGemini(tc.in)
		if !ok || g != tc.gem || !geminiName(g) || unescapeName(g) != tc.in {
			t.Errorf("toGemini(%q) = %q %v", tc.in, g, ok)
		}
		s, ok := toSafe(tc.in)
		if !ok || s != tc.safe || !safeName(s) || unescapeName(s) != tc.in {
			t.Errorf("toSafe(%q) = %q %v", tc.in, s, ok)
		}
	}
	if _, ok := toSafe(strings.Repeat("a", 65)); ok {
		t.Error("65 characters fit")
	}
}
