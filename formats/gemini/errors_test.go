package gemini

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
)

func TestAppendError(t *testing.T) {
	var out []byte
	for _, e := range []*formats.Error{
		formats.InvalidRequest("generation_config.temperature", `Invalid value at 'generation_config.temperature' (TYPE_FLOAT), "hot"`),
		formats.NewError(formats.KindAuthentication, ""),
		formats.NewError(formats.KindAccountSuspended, "This account is suspended."),
		formats.NewError(formats.KindInsufficientQuota, ""),
		formats.NewError(formats.KindPermissionDenied, ""),
		formats.NewError(formats.KindNotFound, "models/nope is not found."),
		formats.NewError(formats.KindMethodNotAllowed, ""),
		formats.NewError(formats.KindRequestTooLarge, ""),
		{Kind: formats.KindRateLimited, Message: "Too many requests.", RetryAfter: 12},
		formats.NewError(formats.KindInternal, ""),
		formats.NewError(formats.KindUpstream, "The upstream provider failed (HTTP 502)."),
		formats.NewError(formats.KindOverloaded, ""),
		formats.NewError(formats.KindTimeout, ""),
	} {
		b := AppendError(nil, e)
		if !jsontext.Value(b).IsValid() {
			t.Fatalf("invalid %s", b)
		}
		out = append(append(out, b...), '\n')
	}
	golden(t, "errors.golden", out)
}

func TestStatus(t *testing.T) {
	for kind, want := range map[formats.ErrorKind]int{
		formats.KindInvalidRequest:    400,
		formats.KindRequestTooLarge:   400, // Gemini has no 413
		formats.KindAuthentication:    401,
		formats.KindInsufficientQuota: 403,
		formats.KindNotFound:          404,
		formats.KindRateLimited:       429,
		formats.KindInternal:          500,
		formats.KindUpstream:          500, // nor 502
		formats.KindOverloaded:        503,
		formats.KindTimeout:           504,
	} {
		if got := Status(formats.NewError(kind, "")); got != want {
			t.Errorf("kind %d: %d, want %d", kind, got, want)
		}
	}
}

func TestParseUpstreamError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   formats.ErrorKind
		param  string
		retry  int
		msg    string // a substring of the message
	}{
		{400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"contents","description":"x"}]}]}}`, formats.KindInvalidRequest, "contents", 0, "contents is not specified"},
		{400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, formats.KindInvalidRequest, "", 0, "exceeds the maximum"},
		{400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, formats.KindUpstream, "", 0, "credentials"},
		{400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`, formats.KindUpstream, "", 0, "FAILED_PRECONDITION"},
		{400, `{"error":{"code":400,"message":"Request for project 123456789012 key AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI failed","status":"INVALID_ARGUMENT"}}`, formats.KindInvalidRequest, "", 0, "[redacted]"},
		{401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, formats.KindUpstream, "", 0, "HTTP 401"},
		{403, `{"error":{"code":403,"message":"Permission denied on project.","status":"PERMISSION_DENIED"}}`, formats.KindUpstream, "", 0, "HTTP 403"},
		{404, `{"error":{"code":404,"message":"models/gemini-9 is not found","status":"NOT_FOUND"}}`, formats.KindUpstream, "", 0, "HTTP 404"},
		{408, ``, formats.KindTimeout, "", 0, "timed out"},
		{413, `{"error":{"code":413,"message":"Request payload size exceeds the limit: 20971520 bytes.","status":"INVALID_ARGUMENT"}}`, formats.KindRequestTooLarge, "", 0, "payload size"},
		{429, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37.2s"}]}}`, formats.KindOverloaded, "", 38, "overloaded"},
		{500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, formats.KindUpstream, "", 0, "HTTP 500"},
		{503, `[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`, formats.KindOverloaded, "", 0, "overloaded"},
		{504, `{"error":{"code":504,"message":"Deadline exceeded","status":"DEADLINE_EXCEEDED"}}`, formats.KindTimeout, "", 0, "timed out"},
		{502, `<html>Bad Gateway</html>`, formats.KindUpstream, "", 0, "HTTP 502"},
		{418, `{}`, formats.KindUpstream, "", 0, "HTTP 418"},
	} {
		e := ParseUpstreamError(tc.status, []byte(tc.body))
		if e.Kind != tc.kind || e.Param != tc.param || e.RetryAfter != tc.retry || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%d %s:\n got %+v", tc.status, tc.body, e)
		}
		if strings.Contains(e.Message, "AIza") || strings.Contains(e.Message, "123456789012") {
			t.Errorf("secret kept: %s", e.Message)
		}
	}
}

func TestCountTokens(t *testing.T) {
	for body, want := range map[string]int64{
		`{"totalTokens":31,"promptTokensDetails":[{"modality":"TEXT","tokenCount":31}]}`: 31,
		`{}`:                   0,
		`{"totalTokens":"12"}`: 12,
	} {
		n, err := ParseCountTokensResponse([]byte(body))
		if err != nil || n != want {
			t.Errorf("%s: %d %v", body, n, err)
		}
	}
	for body, kind := range map[string]formats.ErrorKind{
		`nope`: formats.KindUpstream,
		`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`: formats.KindOverloaded,
	} {
		if _, err := ParseCountTokensResponse([]byte(body)); err == nil || err.Kind != kind {
			t.Errorf("%s: %v", body, err)
		}
	}
	if got := string(AppendCountTokensResponse(nil, 31)); got != `{"totalTokens":31}` {
		t.Fatal(got)
	}
}

func TestPassThroughCandidates(t *testing.T) {
	// two candidates: the stream ends when both have finished
	tr := NewPassThroughStream("svc", true)
	for i, el := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}},{"index":1,"content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"c"}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"index":1,"content":{"parts":[{"text":"d"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}`,
	} {
		out, done, err := tr.Feed(nil, nil, []byte(el))
		if err != nil || done != (i == 2) || (i < 2) != (len(out) > 0) {
			t.Fatalf("element %d: done %v err %v out %s", i, done, err, out)
		}
	}
	if u, _ := tr.Usage(); u.Input != 3 || u.Output != 4 || tr.OutputBytes() != 4 {
		t.Fatalf("usage %+v bytes %d", u, tr.OutputBytes())
	}
	if out := string(tr.Finish(nil)); !strings.HasPrefix(out, `data: {"candidates":[{"index":1,`) || !strings.Contains(out, `"modelVersion":"svc"}`) {
		t.Fatalf("finish %q", out)
	}
	// an array stream that fails before any element is still one array
	tr = NewPassThroughStream("svc", false)
	if out := string(tr.Fail(nil, formats.NewError(formats.KindTimeout, ""))); out != `[{"error":{"code":504,"message":"The upstream provider timed out.","status":"DEADLINE_EXCEEDED"}}]` {
		t.Fatalf("fail %s", out)
	}
	// a malformed element
	if _, _, err := NewPassThroughStream("svc", true).Feed(nil, nil, []byte(`{"candidates":[`)); err == nil || err.Kind != formats.KindUpstream {
		t.Fatalf("malformed: %v", err)
	}
}

func TestStreamEncoderEdges(t *testing.T) {
	// array mode: "[" at start; an error before any element; calls the
	// upstream never ended are flushed at the end; reasoning dropped
	e := NewStreamEncoder("svc", false)
	out := e.Encode(nil, &formats.Event{Type: formats.EventStart})
	if string(out) != "[" {
		t.Fatalf("start %q", out)
	}
	out = e.Encode(out, &formats.Event{Type: formats.EventError, Err: formats.NewError(formats.KindOverloaded, "")})
	if !jsontext.Value(out).IsValid() || !strings.HasSuffix(string(out), `"status":"UNAVAILABLE"}}]`) {
		t.Fatalf("error %s", out)
	}
	if more := e.Encode(nil, &formats.Event{Type: formats.EventText, Delta: []byte("x")}); len(more) != 0 {
		t.Fatalf("after the end: %s", more)
	}
	e = NewStreamEncoder("svc", false)
	out = nil
	for _, ev := range []formats.Event{
		{Type: formats.EventReasoning, Delta: []byte("hmm")},
		{Type: formats.EventToolStart, Index: 0, ID: "toolu_1", Name: "_mg_a-db"},
		{Type: formats.EventToolArgs, Index: 0, Delta: []byte(`{"x":`)},
		{Type: formats.EventToolArgs, Index: 0, Delta: []byte(`1}`)},
		{Type: formats.EventToolStart, Index: 1, Name: "g"},
		{Type: formats.EventToolArgs, Index: 1, Delta: []byte(`not json`)},
		{Type: formats.EventFinish, Stop: formats.StopEnd},
		{Type: formats.EventEnd},
	} {
		out = e.Encode(out, &ev)
	}
	s := string(out)
	if !jsontext.Value(out).IsValid() || strings.Contains(s, "hmm") ||
		!strings.Contains(s, `{"functionCall":{"id":"toolu_1","name":"a.b","args":{"x":1}}}`) ||
		!strings.Contains(s, `{"functionCall":{"name":"g","args":{"_raw_arguments":"not json"}}}`) ||
		!strings.Contains(s, `"finishReason":"STOP"`) {
		t.Fatalf("stream %s", s)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
		"Generative Language API has not been used in project 123456789012 before":                "Generative Language API has not been used in project [redacted] before",
		"Permission denied on resource projects/my-project-42/locations/us":                       "Permission denied on resource projects/[redacted]/locations/us",
		"bad key AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI":                                         "bad key [redacted]",
	} {
		if got := redact(in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}
