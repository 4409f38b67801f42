// Package mockupstream is a fake LLM provider for tests and for the offline
// example configuration. It speaks the real wire formats of the three
// vendors, as their public API references define them: OpenAI
// chat completions, Anthropic Messages and Gemini generateContent, with
// their field names, stream framings, validation and error envelopes. It is
// fully deterministic, with exact, predictable token counts that are the
// same for one conversation in every format, and can inject latency and
// failures, either per upstream key from the [Config] (faults) or per
// request from words in the prompt (directives).
//
// It is plain net/http: [Server] is an [http.Handler]. It never logs.
//
// # Routes
//
// OpenAI:
//
//	POST /v1/chat/completions   chat completions, streaming and not
//	POST /v1/responses          Responses, streaming and not
//	POST /v1/images/generations images: b64_json for gpt-image-* models, with usage
//	                            (prompt words as text tokens, [ImageOutputTokens] per image);
//	                            dall-e-* answer URLs (or b64_json) and no usage
//	POST /v1/images/edits       the same, from a multipart form read as it arrives (file parts are
//	                            hashed and counted, [Server.UploadedBytes]; each input image counts
//	                            [ImageInputTokens], [ImageInputTokensHigh] with input_fidelity high);
//	                            recorded with a JSON summary of the form and of what was made as its body
//	GET  /v1/models             {"object":"list","data":[...]}
//	GET  /v1/models/{id}        one model object; unknown id → 404 model_not_found
//
// Anthropic, recognised by the path, and on /v1/models
// by the anthropic-version header:
//
//	POST /v1/messages               messages, streaming and not
//	POST /v1/messages/count_tokens  {"input_tokens": N}
//	GET  /v1/models                 {"data":[...],"has_more","first_id","last_id"}; limit, after_id, before_id
//	GET  /v1/models/{id}            one model; unknown → 404 not_found_error "model: ID"
//
// Gemini, everything under /v1beta/, and under /v1/ (the
// SDKs' API version "v1") a path with a ":method", or the model list with a
// Gemini key and no Authorization header. A doubled "models/models/" is
// accepted:
//
//	POST /v1beta/models/{m}:generateContent        one answer
//	POST /v1beta/models/{m}:streamGenerateContent  ?alt=sse: "data: " events, each ending in a blank CRLF
//	                                               line (\r\n\r\n), no end marker; without alt: one JSON
//	                                               array written element by element ("[", ",\r\n", "]")
//	POST /v1beta/models/{m}:countTokens            {"totalTokens": N, "promptTokensDetails": [...]}; the body is
//	                                               {"contents"} or {"generateContentRequest"} (the latter counts
//	                                               its systemInstruction)
//	GET  /v1beta/models                            {"models":[...],"nextPageToken"}; pageSize (default 50), pageToken
//	GET  /v1beta/models/{m}                        one model; unknown → 404 NOT_FOUND
//
// Any other path is the vendor's 404, a wrong method OpenAI's and
// Anthropic's 405 or Google's 404.
//
// # Keys
//
// The key must be one of Config.Keys (any non-empty key when Keys is empty),
// sent as the vendor's SDKs send it; it is never echoed whole:
//
//   - OpenAI: "Authorization: Bearer K"; otherwise 401 invalid_api_key, the
//     key masked as OpenAI does ("sk-ab***yz").
//   - Anthropic: "x-api-key: K" or "Authorization: Bearer K"; otherwise 401
//     authentication_error ("x-api-key header is required", "invalid
//     x-api-key"). A request with a good key and no anthropic-version header
//     is a 400 invalid_request_error. anthropic-beta headers are not checked;
//     [Server.Requests] shows what arrived.
//   - Gemini: "x-goog-api-key: K" or "?key=K". As Google does, a missing key
//     is a 403 PERMISSION_DENIED ("Method doesn't allow unregistered
//     callers ..."), a wrong key a 400 INVALID_ARGUMENT "API key not valid.
//     Please pass a valid API key." with an ErrorInfo detail of reason
//     API_KEY_INVALID, and a Bearer token without a Gemini key a 401
//     UNAUTHENTICATED (Google expects an OAuth token there).
//
// Counters and faults are by that key ("" for a request without one).
//
// # Errors and headers
//
// Errors are always in the vendor's envelope:
//
//	OpenAI     {"error":{"message","type","param","code"}}, all four keys
//	Anthropic  {"type":"error","error":{"type","message"},"request_id"}, request_id = the request-id header
//	Gemini     {"error":{"code","message","status"[,"details"]}}, status the canonical name
//	           (INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, RESOURCE_EXHAUSTED,
//	           INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED, ...); 400s carry a BadRequest detail
//
// An injected status gets the vendor's canonical error for it: for
// Anthropic 401 authentication_error, 402 billing_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 500 api_error, 504 timeout_error, 529 overloaded_error
// ("Overloaded"), other 4xx invalid_request_error, other 5xx api_error; for
// Gemini a 429 also carries a RetryInfo detail with the retry delay.
//
// OpenAI responses carry x-request-id, openai-version, openai-processing-ms,
// openai-organization ("org-mock") and openai-project ("proj_mock");
// Anthropic responses request-id, anthropic-organization-id and
// anthropic-ratelimit-requests-*; Gemini responses Google's vary,
// server-timing and x-* security headers; so that a gateway's header
// filtering can be tested. Streams are "text/event-stream; charset=utf-8"
// (OpenAI, Anthropic), "text/event-stream" (Gemini SSE) or
// "application/json" (Gemini array), every event flushed as it is written.
//
// # Validation
//
// Requests are validated as the real APIs do, so that a gateway's
// translations are checked against what each vendor accepts.
//
// OpenAI: a body that is not JSON, a missing model, missing or empty
// messages, a bad role or content, stream_options without "stream": true,
// max_tokens or max_completion_tokens below 1, a tool call without id or
// function name, a tool message without tool_call_id, a tool message that
// answers no call of the assistant message before it, or an assistant
// message whose tool calls are not all answered by the tool messages right
// after it, are 400 invalid_request_error with OpenAI's param and code.
// Unknown fields are ignored. n > 1 is refused (400): the mock answers one
// choice.
//
// Anthropic: unknown top-level fields are "NAME: Extra inputs are not
// permitted" (count_tokens also refuses max_tokens, stream, temperature,
// top_p, top_k, stop_sequences, metadata, service_tier); so are unknown
// fields of messages, content blocks, custom tools and metadata. model,
// max_tokens (≥ 1) and a non-empty messages list are required; roles are
// user and assistant only (a "system" role gets Anthropic's own message);
// text blocks must be non-empty and not only whitespace, contents non-empty
// (except a final assistant prefill, which must not end in whitespace);
// tool_use ids must match ^[a-zA-Z0-9_-]+$ and tool_use input be an object;
// every tool_use needs its tool_result in the next message, tool_result
// blocks first, and every tool_result a tool_use in the message before;
// temperature and top_p are 0–1; custom tools need a name
// (^[a-zA-Z0-9_-]{1,128}$, unique) and an input_schema of type "object";
// thinking "enabled" needs 1024 ≤ budget_tokens < max_tokens, and thinking
// (enabled or adaptive) refuses a temperature other than 1, top_k, top_p
// below 0.95, and a tool_choice of "any" or "tool".
//
// Gemini: unknown field names are 400 `Invalid JSON payload received.
// Unknown name "x" at 'path': Cannot find field.`, at every level the mock
// knows (the request, contents and parts, generationConfig and
// thinkingConfig, tools and function declarations, Google's Schema in
// parameters and responseSchema, where additionalProperties, $ref and
// friends are unknown, toolConfig, safetySettings); parametersJsonSchema,
// args, response and other free-form JSON are not checked. lowerCamelCase
// and snake_case names are both accepted, enums case-insensitively.
// contents is required; roles are user and model ("function" and no role
// are user); a part needs exactly one data field and parts must not be
// empty; functionCall args and functionResponse response must be objects
// and their name non-empty; a turn of function responses must follow a turn
// of function calls and answer every call; a thoughtSignature
// (thought_signature) must be base64. For a model whose name contains
// "gemini-3", as Gemini 3 does, the first functionCall part of each model
// turn since the last user text needs a thoughtSignature (any base64, such
// as "skip_thought_signature_validator"). candidateCount > 1 is refused.
//
// # Token rules
//
// Input tokens are counted the same way in every format, so that one
// conversation costs the same in each (see [InputTokens],
// [ChatPromptTokens], [MessagesInputTokens], [GeminiPromptTokens]):
//
//	input = 3 + Σ over turns (4 + words(turn))
//
// where words counts the whitespace-separated words ([strings.Fields]) of
// the turn's texts. The turns and their texts:
//
//   - OpenAI: each message is a turn. Its texts: a string content, or the
//     "text" of every part of type "text" of an array content, plus the
//     "arguments" of every tool call (as sent). A tool message is a turn
//     like any other.
//   - Anthropic: the top-level system, when present, is one turn (its string
//     or text blocks). An assistant message is one turn: its text blocks
//     plus the compact JSON of every tool_use input. A user message is one
//     turn per tool_result block (its string content or text blocks), plus
//     one turn for its other blocks, if it has any (their text blocks), as
//     OpenAI sends each tool result as a message of its own.
//   - Gemini: systemInstruction, when present, is one turn (its text parts).
//     A model content is one turn: its text parts plus the compact JSON of
//     every functionCall args. A user content is one turn per
//     functionResponse part (the compact JSON of its response) plus one for
//     its other parts, if it has any (their text parts).
//
// Images, documents, thinking blocks and thought parts, names, roles and
// tool definitions count nothing. Directive words (below) are words like any
// other. Example: one user message "Hello there" → 3 + 4 + 2 = 9; with the
// system prompt "Be brief." → 3 + (4 + 2) + (4 + 2) = 15, in all three
// formats. A compact JSON object has as many words as the strings in it
// have spaces, plus one: {"output":"18°C and cloudy"} has 3, as has
// "18°C and cloudy", and arguments sent as compact JSON count alike in the
// three formats.
//
// Reply: N visible tokens, N = Config.ReplyTokens (default 12) unless the
// directive tokens=N says otherwise (0 when the answer is a tool call, see
// below). Token i is word i (mod len) of a fixed word list ("Lorem ipsum
// dolor sit amet ..."; see [ReplyText]); the reply text is the N tokens
// joined by single spaces, so it has exactly N words. Stream text chunk i
// carries token i, with a leading space when i > 0, so the concatenated
// deltas equal the non-stream text.
//
// Thinking tokens R (directive thinking=R, or its synonym reasoning=R,
// default 0) come first; K tool calls (directives tool and tools) come
// after the text and cost [ToolCallTokens] (10) output tokens each. Output:
//
//	output = R + N + 10·K
//
// and per vendor:
//
//	OpenAI     prompt_tokens = input; completion_tokens = output; total_tokens = input + output
//	           prompt_tokens_details.cached_tokens = C; completion_tokens_details.reasoning_tokens = R;
//	           every audio and prediction count = 0
//	Anthropic  input_tokens = input − C − W; cache_read_input_tokens = C;
//	           cache_creation_input_tokens = W (also cache_creation.ephemeral_5m_input_tokens);
//	           output_tokens = output; service_tier "standard"
//	Gemini     promptTokenCount = input; cachedContentTokenCount = C; thoughtsTokenCount = R;
//	           candidatesTokenCount = output − R; totalTokenCount = input + output
//	           (counts that are 0 are omitted, as Google does); promptTokensDetails [{TEXT, input}]
//
// with C the directive cached=C and W the directive cache_write=W
// (C + W ≤ input; W is Anthropic's only: the others have no such field).
// Count endpoints answer the input; they ignore directives.
//
// Output cap: if the request has a cap M (OpenAI max_completion_tokens, else
// max_tokens; Anthropic max_tokens; Gemini generationConfig.maxOutputTokens)
// and output > M, the cap cuts in the order of generation: R = min(R, M),
// N = min(N, M − R), then only the tool calls that fit whole are made; the
// output billed is then M, and the finish is OpenAI "length", Anthropic
// "max_tokens", Gemini "MAX_TOKENS". Otherwise it is OpenAI "stop" (or
// "tool_calls"), Anthropic "end_turn" (or "tool_use", "stop_sequence"),
// Gemini "STOP" (function calls included). The directive finish=...
// overrides the finish in every case (stop, length, content_filter; for
// Anthropic end_turn, max_tokens, refusal; for Gemini STOP, MAX_TOKENS,
// SAFETY).
//
// # The answer in each format
//
// OpenAI: message.content is the text (null when the answer is only tool
// calls); thinking is not shown (reasoning_tokens only); tool calls are
// message.tool_calls with ids call_mock_<n> (n counts the server's tool
// calls). A stream sends a role chunk ({"role":"assistant","content":""}, or
// {"role":"assistant","content":null,"tool_calls":[first call's header]}
// when the answer opens with a call), one chunk per text token, then each
// call's header (index, id, type, name, arguments ""), then the arguments
// in 4 fragments per call, interleaved across parallel calls (call 0's
// first fragment, call 1's first fragment, ...), the finish chunk, the
// usage chunk when stream_options.include_usage is true, and data: [DONE].
//
// Anthropic: content is a thinking block when R > 0 (thinking =
// [ThinkingText](R), signature [ThinkingSignature]), a text block when
// N > 0, and a tool_use block per call (ids toolu_mock_<n>, input
// [ToolArguments]). Thinking blocks are written whether or not the request
// enables thinking. A stream is message_start (content [], stop_reason null,
// the usage with output_tokens at most 1), per block content_block_start,
// its deltas (thinking_delta per thinking token then one signature_delta;
// text_delta per token; input_json_delta "" then 4 fragments) and
// content_block_stop, a ping right after the first content_block_start (or
// after message_start when there is no block), then message_delta with
// stop_reason, stop_sequence and the cumulative usage (input_tokens, both
// cache fields, the final output_tokens), and message_stop. Every event is
// "event: NAME" and "data: JSON" with the same type, then a blank line.
//
// Gemini: candidates[0].content (role "model") has a thought part
// ({"text": ThinkingText(R), "thought": true}) first only when
// generationConfig.thinkingConfig.includeThoughts is true, a text part when
// N > 0, and a functionCall part per call ({"name", "args"}, no id); the
// first functionCall part carries thoughtSignature
// [GeminiThoughtSignature] when R > 0 or the model name contains
// "gemini-3". modelVersion is the requested model, responseId is set. A
// stream sends one element per thought token (when shown) and per text
// token, then, when there are calls, one element with all of them; the last
// element carries finishReason and the final usage (an element with an
// empty text part when there is nothing else); every element carries the
// usage so far (promptTokenCount, thoughtsTokenCount, candidatesTokenCount
// so far, totalTokenCount), modelVersion and responseId.
//
// # Directives
//
// Whitespace-separated words of the form mock:NAME or mock:NAME=VALUE
// anywhere in the texts of the last user message (OpenAI role "user";
// Anthropic role "user", text blocks and tool_result contents; Gemini role
// "user" or none, text parts and functionResponse JSON) control that
// request. A gateway passes them through unchanged. An unknown directive or
// a bad value is the vendor's 400 (OpenAI param "messages") whose message
// starts with "mockupstream:", so that typos in tests do not go unnoticed.
// Directives win over the request's own settings (tool_choice "none",
// thinking disabled ...); only the cap applies to them.
//
//	mock:tokens=N          reply length N (0 ≤ N ≤ 100000)
//	mock:thinking=N        N thinking tokens, first: OpenAI reasoning_tokens; Anthropic a thinking
//	                       block; Gemini thoughtsTokenCount (and a thought part with includeThoughts)
//	mock:reasoning=N       the same as thinking=N
//	mock:tool=NAME         answer with one call to NAME (1–64 of A-Z a-z 0-9 _ - . :) with arguments
//	                       ToolArguments, after the text when tokens=N is given, else without text;
//	                       finish tool_calls / tool_use / STOP
//	mock:tools=K           K parallel calls (1–64), named NAME, NAME_2, ... NAME_K, with NAME from
//	                       mock:tool, else the request's first tool, else DefaultToolName
//	mock:cached=N          input tokens read from the cache (C above)
//	mock:cache_write=N     input tokens written to the cache (W above; Anthropic only)
//	mock:stop_sequence     Anthropic: stop_reason "stop_sequence", stop_sequence = the request's first
//	                       stop sequence, no tool calls (a 400 without stop_sequences); others stop normally
//	mock:finish=REASON     finish reason: stop, length or content_filter (mapped per vendor)
//	mock:echo_model=NAME   answer with model NAME instead of the request's model
//	mock:no_usage          report no usage at all (no usage, usageMetadata, or OpenAI usage chunk)
//	mock:latency=DURATION  wait before the response headers (Go duration: 250ms, 2s)
//	mock:delay=DURATION    wait before each streamed chunk that carries output tokens (see Timing)
//	mock:status=CODE       fail with that status (400–599) and the vendor's envelope
//	mock:retry_after=S     Retry-After header, seconds (or a Go duration, rounded up);
//	                       a 429 or 529 without it gets Retry-After: 1
//	mock:hang              never answer, until the client goes away
//	mock:close             close the TCP connection without any response
//	mock:cut=K             stream: send the opening events and K (at most N) text chunks, then close
//	                       the connection (no finish, usage, or end marker); thinking comes whole
//	                       before, tool calls are not sent; non-stream: send the headers with the full
//	                       Content-Length and half of the body, then close the connection
//	mock:web_search=N      N web searches (0 ≤ N ≤ 100) when the request offers a web search tool (see
//	                       Hosted tools); without the directive a tool that tool_choice forces is used once
//	mock:web_fetch=N       N page fetches, the same way (Anthropic web_fetch, Gemini urlContext)
//	mock:image_generation=N N images from the Responses image_generation tool, the same way
//	mock:error_after=K     stream: after K text chunks, send the vendor's mid-stream error and end
//	                       the stream: OpenAI data: {"error":{...,"type":"server_error"}} without
//	                       [DONE]; Anthropic event: error with api_error "Internal server error";
//	                       Gemini an {"error":{"code":500,...,"status":"INTERNAL"}} element (in array
//	                       mode followed by "]"); non-stream: the vendor's 500
//
// When several failure directives are given, the first of status, hang,
// close, cut, error_after wins.
//
// # Hosted tools and background responses
//
// The mock plays the hosted tools that cost a fee per use, so that a
// gateway's billing of them can be tested. A tool is used only
// when the request offers it: N times with the directive (web_search=N,
// web_fetch=N, image_generation=N), once when tool_choice forces it, else
// not at all. Token counts do not change. Where each vendor shows the uses:
//
//	Anthropic  tools of type web_search_* (name web_search) and web_fetch_* (name web_fetch), forced by
//	           tool_choice {"type":"tool","name":…}: per use a server_tool_use block (id srvtoolu_mock_…)
//	           and its web_search_tool_result / web_fetch_tool_result, after any thinking and before the
//	           text; usage.server_tool_use {"web_search_requests","web_fetch_requests"} (in message_delta
//	           when streaming, not in message_start). Streamed, each server_tool_use is
//	           content_block_start, one input_json_delta and content_block_stop, its result a
//	           content_block_start and content_block_stop, so that a cut stream shows the uses made.
//	Responses  tools of type web_search* and image_generation, forced by a tool_choice of that type:
//	           per use a web_search_call (ws_mock…) or image_generation_call (ig_mock…) output item
//	           before the message; streamed, output_item.added, response.<type>.in_progress,
//	           response.<type>.completed, output_item.done each.
//	Chat       web_search_options: one search per request (a search model always searches), shown as
//	           a url_citation annotation of the message (streamed, in a delta before the finish chunk).
//	Gemini     tools googleSearch / googleSearchRetrieval and urlContext (Gemini cannot force them):
//	           the last element's candidate carries groundingMetadata with one webSearchQueries entry
//	           per search, and urlContextMetadata with one urlMetadata entry per fetch.
//
// A Responses request with "background": true is answered as OpenAI does:
// the response object with status "queued", no output and usage null
// (streamed: response.created and response.queued, then the stream ends).
// The real API then generates the answer at the account's cost.
//
// # Faults
//
// Config.Faults (replaced at run time by [Server.SetFaults]) inject failures
// by upstream key, before directives, on every vendor's routes: the first
// fault whose Key matches ("" matches every key) and that has uses left
// applies to the request, and then overrides any failure directive. Times
// counts the requests a fault has applied to (0 = unlimited). Modes:
// "status", "hang", "close", "cut" (as the directives; After is K), "error"
// (as error_after, After is K) and "slow" (no failure: only Fault.Latency).
// Fault.Latency, in any mode, is waited before the fault acts. Faults are
// checked after the key (a rejected key gets its error and uses no fault)
// on every route, the model lists and count endpoints included; the modes
// status, hang and close act before the request body is validated.
//
// # Timing
//
// Before the response headers the server waits Latency (Config.Latency, or the
// latency directive), plus Fault.Latency when a fault applies. A stream waits
// TokenDelay (or the delay directive) before each chunk that carries output
// tokens: each text chunk, each thinking chunk where thinking is shown
// (Anthropic; Gemini with includeThoughts), each tool-argument fragment
// (OpenAI chat and Responses, Anthropic: 4 per call), and Gemini's one
// element of calls; hidden reasoning and the other chunks are sent without
// a wait. A non-stream answer waits TokenDelay for each such chunk its
// stream would have, before its headers, as a real model generates the
// whole reply first. Every wait ends early when the client goes away or
// [Server.Close] is called.
//
// A stream stops as soon as its connection is gone, as the real providers
// stop generating (and billing) when their client hangs up: when the
// request's context is done (net/http cancels it when it notices the
// closed connection, during a wait or between two chunks, with or without
// a delay) or a write or flush fails, the server writes and produces
// nothing more, and the request counts as canceled (or failed, when an
// injected failure had already counted it so).
//
// # Counters
//
// [Server.Stats] and [Server.KeyStats] count, per key ("" for requests
// without one): requests, streams ("stream": true or :streamGenerateContent,
// counted even when the request then fails), requests being served, and how
// each request ended: completed (answered fully), failed (an injected
// failure or any error status), or canceled (the client went away before
// the answer was complete). ByStatus counts the statuses sent.
// StreamedText counts the text chunks of streamed answers written to the
// connection, one reply token each: what a real provider charges for,
// whether or not its client read them.
//
// ProducedOutput counts the output tokens of streamed answers as the vendor
// bills them, up to where each stream stopped. A token counts when the
// server is about to write the chunk that carries it (after the chunk's
// wait, before the write: a chunk whose write failed counts, the provider
// generated it). Thinking counts one token per thinking chunk where it is
// shown, and all R tokens at once where it is hidden (OpenAI chat and
// Responses, Gemini without includeThoughts), at the point where the model
// reasons: after OpenAI's role chunk, after Responses' response.in_progress,
// before Gemini's first element. Text counts one token per text chunk. A
// tool call counts its ToolCallTokens (10) over its 4 argument fragments,
// 3, 3, 2 and 2 (OpenAI chat and Responses, Anthropic; the call's header
// counts none), and Gemini's element of calls counts 10 per call. The tokens
// of a call the cap cut off (output − R − N − 10·K, see Output cap) count
// after the last call. So a stream that completes has produced exactly the
// output of its usage (R + N + 10·K, or the cap), reported or not, and a
// stream that stops early (its client went away, mock:cut, mock:error_after)
// what it reached. Non-stream answers count nothing here.
// Stats.ProducedOutput is the sum over every key.
// [Server.Requests] returns the last 100 requests as received, headers
// (anthropic-beta ...) and body included, each with the ProducedOutput of
// its own answer, final once the record's Finished is true (the server is
// done with the request). [Server.WaitIdle] waits until no request of a key
// is being served, so that a test reads final counts once the server has
// seen its client go away. The package never logs, and never prints a key.
package mockupstream
