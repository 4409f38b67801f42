package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// serve answers every request with status and body (an SSE stream when
// stream is set), as the gateway would.
func serve(t *testing.T, status int, body []byte, stream bool) sdk.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			t.Errorf("path %s", r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.Header().Set("Request-Id", "req_test")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return sdk.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("mg-test"), option.WithMaxRetries(0))
}

var sdkParams = sdk.MessageNewParams{
	Model:     "svc-model",
	MaxTokens: 1024,
	Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))},
}

// accumulate reads a stream with the SDK's decoder and Message.Accumulate.
func accumulate(t *testing.T, body []byte) (sdk.Message, error) {
	t.Helper()
	client := serve(t, 200, body, true)
	stream := client.Messages.NewStreaming(context.Background(), sdkParams)
	defer stream.Close()
	var msg sdk.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	return msg, stream.Err()
}

// TestSDKStream: what NewStreamEncoder writes (an OpenAI upstream's stream
// for an Anthropic client) is accepted by the official SDK.
func TestSDKStream(t *testing.T) {
	tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc-model"))
	msg, err := accumulate(t, feedStream(t, tr, read(t, "stream/oai_tools.sse")))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "svc-model" || msg.StopReason != sdk.StopReasonToolUse || len(msg.Content) != 3 {
		t.Fatalf("message %+v", msg)
	}
	if msg.Content[0].Text != "Checking." || msg.Content[1].Name != "get_weather" || string(msg.Content[1].Input) != `{"city":"Paris"}` ||
		msg.Content[2].Name != "get_time" || string(msg.Content[2].Input) != `{"tz":"CET"}` {
		t.Fatalf("content %+v", msg.Content)
	}
	u := msg.Usage
	if u.InputTokens != 56 || u.CacheReadInputTokens != 64 || u.CacheCreationInputTokens != 0 || u.OutputTokens != 80 {
		t.Fatalf("usage %+v", u)
	}

	// an error mid-stream reaches the SDK as an error
	tr = formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc-model"))
	msg, err = accumulate(t, feedStream(t, tr, read(t, "stream/oai_error.sse")))
	if err == nil || len(msg.Content) != 1 {
		t.Fatalf("error stream: %v %+v", err, msg)
	}

	// and the pass-through of a real Anthropic stream
	for _, file := range []string{"text", "tools", "thinking"} {
		msg, err = accumulate(t, feedStream(t, NewPassThroughStream("svc-model"), read(t, "stream/"+file+".sse")))
		if err != nil || msg.Model != "svc-model" || len(msg.Content) == 0 {
			t.Fatalf("%s: %v %+v", file, err, msg)
		}
	}
	if msg.Content[0].Signature == "" || msg.StopSequence != "END" {
		t.Fatalf("thinking: %+v", msg)
	}
}

// TestSDKResponse: RenderMessagesResponse is a Message to the SDK.
func TestSDKResponse(t *testing.T) {
	resp, ferr := openai.DecodeChatResponse(read(t, "response/oai_tools.json"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	client := serve(t, 200, RenderMessagesResponse(nil, resp, "svc-model"), false)
	msg, err := client.Messages.New(context.Background(), sdkParams)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "svc-model" || msg.StopReason != sdk.StopReasonToolUse || len(msg.Content) != 3 ||
		msg.Content[1].ID != "call_9Xk2" || msg.Usage.InputTokens != 56 || msg.Usage.CacheReadInputTokens != 64 {
		t.Fatalf("message %+v", msg)
	}
}

// TestSDKErrors: AppendError and Status give the SDK an *Error with the
// right status and type.
func TestSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		err  *formats.Error
		typ  string
		code int
	}{
		{invalid("max_tokens", "Field required"), "invalid_request_error", 400},
		{formats.NewError(formats.KindAuthentication, ""), "authentication_error", 401},
		{formats.NewError(formats.KindInsufficientQuota, "balance"), "billing_error", 403},
		{formats.NewError(formats.KindNotFound, "model: x"), "not_found_error", 404},
		{formats.NewError(formats.KindRateLimited, ""), "rate_limit_error", 429},
		{formats.NewError(formats.KindUpstream, ""), "api_error", 502},
		{formats.NewError(formats.KindOverloaded, ""), "overloaded_error", 529},
		{formats.NewError(formats.KindTimeout, ""), "timeout_error", 504},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			client := serve(t, Status(tc.err), AppendError(nil, tc.err), false)
			_, err := client.Messages.New(context.Background(), sdkParams)
			var apiErr *sdk.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v", err)
			}
			if apiErr.StatusCode != tc.code || string(apiErr.Type()) != tc.typ {
				t.Fatalf("status %d type %q", apiErr.StatusCode, apiErr.Type())
			}
		})
	}
}
