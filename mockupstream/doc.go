// Package mockupstream is a fake LLM provider for tests and for the offline
// example configuration. It speaks the real OpenAI wire format (field names,
// chunk framing, "data: [DONE]", error envelopes; see wire/openai.md), is
// fully deterministic with exact, predictable token counts, and can inject
// latency and failures, either per upstream key from the [Config] (faults) or
// per request from words in the prompt (directives).
//
// It is plain net/http: [Server] is an [http.Handler]. It never logs.
//
// # Routes
//
//	POST /v1/chat/completions   chat completions, streaming and not (wire/openai.md §2)
//	GET  /v1/models             {"object":"list","data":[...]} from Config.Models or a default list
//	GET  /v1/models/{id}        one model object; unknown id → 404 model_not_found
//
// These routes need "Authorization: Bearer K" where K is one of Config.Keys
// (any non-empty key when Keys is empty); otherwise 401 invalid_api_key with
// the key masked as OpenAI does ("sk-ab***yz"); the key is never echoed whole.
// Any other path is a 404 "Invalid URL (...)", a wrong method a 405. Errors
// are always {"error":{"message","type","param","code"}} with all four keys.
// Responses carry x-request-id, openai-version, openai-processing-ms,
// openai-organization ("org-mock") and openai-project ("proj_mock") headers,
// so that a gateway's header filtering can be tested. A stream is sent as
// "Content-Type: text/event-stream; charset=utf-8", as OpenAI does, with
// every event flushed as it is written.
//
// Request validation follows OpenAI: a body that is not JSON, a missing
// model, missing or empty messages, a bad role or content, stream_options
// without "stream": true, max_tokens or max_completion_tokens below 1 are
// 400 invalid_request_error with OpenAI's param and code. Unknown fields are
// ignored. n > 1 is refused (400): the mock answers one choice. The mock never
// calls tools.
//
// # Token rules
//
// Input (prompt) tokens, see [InputTokens] and [ChatPromptTokens]:
//
//	prompt_tokens = 3 + Σ over messages (4 + words(message))
//
// where words counts the whitespace-separated words ([strings.Fields]) of the
// message's text: a string content, or the "text" of every part of type
// "text" of an array content, plus the "arguments" of every tool call of an
// assistant message. A tool message's content is a content like any other.
// Names, roles, images and other parts count nothing. Directive words (below)
// are words like any other. Example: one user message "Hello there" →
// 3 + 4 + 2 = 9.
//
// Reply: N visible tokens, N = Config.ReplyTokens (default 12) unless the
// directive tokens=N says otherwise. Token i is word i (mod len) of a fixed
// word list ("Lorem ipsum dolor sit amet ..."; see [ReplyText]); the reply
// text is the N tokens joined by single spaces, so it has exactly N words.
// Stream content chunk i carries token i, with a leading space when i > 0, so
// the concatenated deltas equal the non-stream content.
//
// Reasoning tokens R (directive reasoning=R, default 0) are not visible and
// are included in completion_tokens:
//
//	completion_tokens = N + R
//	total_tokens      = prompt_tokens + completion_tokens
//	prompt_tokens_details.cached_tokens        = C (directive cached=C, C ≤ prompt_tokens)
//	completion_tokens_details.reasoning_tokens = R
//	every audio and prediction count           = 0
//
// Output cap: if the request has max_completion_tokens (preferred when both
// are present) or max_tokens, with value M, and N + R > M, then R = min(R, M),
// N = M − R and finish_reason is "length"; otherwise finish_reason is "stop".
// With R = 0 this is simply N = min(N, M). The directive finish=... overrides
// the finish reason in every case.
//
// # Directives
//
// Whitespace-separated words of the form mock:NAME or mock:NAME=VALUE anywhere
// in the text of the last message whose role is "user" control that one
// request. A gateway passes them through unchanged. An unknown directive or a
// bad value is a 400 invalid_request_error (param "messages") whose message
// starts with "mockupstream:", so that typos in tests do not go unnoticed.
//
//	mock:tokens=N          reply length N (0 ≤ N ≤ 100000)
//	mock:reasoning=N       reasoning tokens, included in completion_tokens
//	mock:cached=N          prompt_tokens_details.cached_tokens (must be ≤ prompt tokens)
//	mock:finish=REASON     finish_reason: stop, length or content_filter
//	mock:echo_model=NAME   answer with model NAME instead of the request's model
//	mock:no_usage          report no usage at all (no usage member, no usage chunk)
//	mock:latency=DURATION  wait before the response headers (Go duration: 250ms, 2s)
//	mock:delay=DURATION    wait before each streamed content chunk
//	mock:status=CODE       fail with that status (400–599) and its envelope
//	mock:retry_after=S     Retry-After header, seconds (or a Go duration, rounded up);
//	                       a 429 without it gets Retry-After: 1
//	mock:hang              never answer, until the client goes away
//	mock:close             close the TCP connection without any response
//	mock:cut=K             stream: send the role chunk and K (at most N) content chunks, then
//	                       close the connection (no finish chunk, usage or [DONE]);
//	                       non-stream: send the headers with the full Content-Length
//	                       and half of the body, then close the connection
//	mock:error_after=K     stream: after K content chunks, send
//	                       data: {"error":{"message":...,"type":"server_error","param":null,"code":null}}
//	                       and end the stream without [DONE]; non-stream: 500 server_error
//
// When several failure directives are given, the first of status, hang,
// close, cut, error_after wins.
//
// # Faults
//
// Config.Faults (replaced at run time by [Server.SetFaults]) inject failures
// by upstream key, before directives: the first fault whose Key matches
// ("" matches every key) and that has uses left applies to the request, and
// then overrides any failure directive. Times counts the requests a fault has
// applied to (0 = unlimited). Modes: "status", "hang", "close", "cut" (as the
// directives; After is K), "error" (as error_after, After is K) and "slow"
// (no failure: only Fault.Latency). Fault.Latency, in any mode, is waited
// before the fault acts. Faults are checked after the key (a rejected key gets
// its 401 and uses no fault) on every route, the model list included; the
// modes status, hang and close act before the request body is validated.
//
// # Timing
//
// Before the response headers the server waits Latency (Config.Latency, or the
// latency directive), plus Fault.Latency when a fault applies. A non-stream
// answer also waits N × TokenDelay before its headers, as a real model
// generates the whole reply first; a stream waits TokenDelay (or the delay
// directive) before each content chunk. Every wait ends early when the client
// goes away or [Server.Close] is called.
//
// # Counters
//
// [Server.Stats] and [Server.KeyStats] count, per Bearer key ("" for requests
// without one): requests, streams ("stream": true, counted even when the
// request then fails), requests being served, and how each request ended:
// completed (answered fully), failed (an injected failure or any error
// status), or canceled (the client went away before the answer was
// complete). ByStatus counts the statuses sent. [Server.Requests] returns the
// last 100 requests as received. The package never logs, and never prints a
// key.
package mockupstream
