package mockupstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestFaultStatusTimesAndKeys(t *testing.T) {
	s, ts := start(t, Config{Faults: []Fault{
		{Key: testKey, Mode: FaultStatus, Status: 429, RetryAfter: 1500 * time.Millisecond, Times: 2},
		{Key: testKey, Mode: FaultStatus, Status: 503, Times: 1},
	}})
	want := []int{429, 429, 503, 200, 200}
	for i, w := range want {
		res, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("hi mock:status=400", ""))
		if err != nil {
			t.Fatal(err)
		}
		if w == 200 {
			w = 400 // the faults are spent: the directive acts
		}
		if res.StatusCode != w {
			t.Fatalf("request %d: status %d, want %d", i, res.StatusCode, w)
		}
		e := errorEnvelope(t, body)
		switch w {
		case 429:
			if res.Header.Get("Retry-After") != "2" || e["type"] != "requests" || e["code"] != "rate_limit_exceeded" {
				t.Errorf("429: Retry-After %q, %s", res.Header.Get("Retry-After"), body)
			}
		case 503:
			if e["type"] != "server_error" || !strings.HasPrefix(e["message"].(string), "The server is overloaded") {
				t.Errorf("503: %s", body)
			}
		}
	}
	// Another key is not affected by keyed faults.
	if res, _, _ := post(t, ts, otherKey, "/v1/chat/completions", chatBody("hi", "")); res.StatusCode != 200 {
		t.Errorf("other key: %d", res.StatusCode)
	}
	st := s.KeyStats(testKey)
	if st.Requests != 5 || st.Failed != 5 || st.ByStatus[429] != 2 || st.ByStatus[503] != 1 || st.ByStatus[400] != 2 {
		t.Errorf("stats %+v", st)
	}
	if o := s.KeyStats(otherKey); o.Requests != 1 || o.Completed != 1 || o.ByStatus[200] != 1 {
		t.Errorf("other stats %+v", o)
	}

	// SetFaults replaces them; a fault for every key ("") with Times 0 applies always.
	s.SetFaults([]Fault{{Mode: FaultStatus, Status: 401}})
	for _, k := range []string{testKey, otherKey, testKey} {
		_, err := sdk(ts, k).Chat.Completions.New(ctxT(t), userParams("hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" || strings.Contains(apiErr.RawJSON(), k) {
			t.Errorf("key %s: %v", maskKey(k), err)
		}
	}
	s.SetFaults(nil)
	if res, _, _ := post(t, ts, testKey, "/v1/chat/completions", chatBody("hi", "")); res.StatusCode != 200 {
		t.Errorf("after SetFaults(nil): %d", res.StatusCode)
	}
}

func TestFaultModes(t *testing.T) {
	s, ts := start(t, Config{})
	c := sdk(ts, testKey)

	s.SetFaults([]Fault{{Mode: FaultHang, Times: 1}})
	_, err := sdk(ts, testKey, option.WithRequestTimeout(200*time.Millisecond)).Chat.Completions.New(ctxT(t), userParams("hi"))
	if err == nil {
		t.Error("hang: no error")
	}

	s.SetFaults([]Fault{{Mode: FaultClose, Times: 1}})
	if _, err := c.Chat.Completions.New(ctxT(t), userParams("hi")); err == nil {
		t.Error("close: no error")
	}

	s.SetFaults([]Fault{{Mode: FaultCut, After: 2, Times: 1}})
	stream := c.Chat.Completions.NewStreaming(ctxT(t), userParams("hi mock:tokens=5 mock:status=500")) // the fault wins
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil || acc.Choices[0].Message.Content != ReplyText(2) {
		t.Errorf("cut: %v %q", stream.Err(), acc.Choices[0].Message.Content)
	}

	s.SetFaults([]Fault{{Mode: FaultError, After: 1, Times: 1}})
	stream = c.Chat.Completions.NewStreaming(ctxT(t), userParams("hi"))
	for stream.Next() {
	}
	var se interface{ Error() string }
	if se = stream.Err(); se == nil || !strings.Contains(se.Error(), "server_error") {
		t.Errorf("error: %v", se)
	}

	s.SetFaults([]Fault{{Mode: FaultSlow, Latency: 150 * time.Millisecond, Times: 1}})
	t0 := time.Now()
	if _, err := c.Chat.Completions.New(ctxT(t), userParams("hi")); err != nil || time.Since(t0) < 150*time.Millisecond {
		t.Errorf("slow: %v after %v", err, time.Since(t0))
	}

	s.SetFaults([]Fault{{Mode: "explode"}})
	_, err = c.Chat.Completions.New(ctxT(t), userParams("hi"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
		t.Errorf("invalid fault: %v", err)
	}

	waitFor(t, func() bool { return s.KeyStats(testKey).Active == 0 })
	st := s.KeyStats(testKey)
	if st.Requests != 6 || st.Failed != 5 || st.Completed != 1 || st.Streams != 2 || st.ByStatus[200] != 3 || st.ByStatus[500] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestFaultOnModels(t *testing.T) {
	s, ts := start(t, Config{Faults: []Fault{{Key: testKey, Mode: FaultStatus, Status: 503, Times: 1}}})
	c := sdk(ts, testKey)
	_, err := c.Models.List(ctxT(t))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Errorf("models with a fault: %v", err)
	}
	if _, err := c.Models.List(ctxT(t)); err != nil {
		t.Error(err)
	}
	s.SetFaults([]Fault{{Mode: FaultCut}})
	if _, err := c.Models.List(ctxT(t)); err == nil {
		t.Error("cut models: no error")
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Faults: []Fault{{Mode: FaultStatus, Status: 429}, {Mode: FaultHang}, {Mode: FaultSlow, Latency: time.Second}}}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Config{
		{Latency: -1},
		{Faults: []Fault{{Mode: "boom"}}},
		{Faults: []Fault{{Mode: FaultStatus, Status: 200}}},
		{Faults: []Fault{{Mode: FaultCut, After: -1}}},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}

func TestCanceledAndActive(t *testing.T) {
	s, ts := start(t, Config{})
	ctx, cancel := context.WithCancel(ctxT(t))
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(chatBody("x mock:tokens=50 mock:delay=20ms", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.KeyStats(testKey); st.Active != 1 || st.Streams != 1 {
		t.Errorf("during the stream: %+v", st)
	}
	buf := make([]byte, 512)
	_, _ = res.Body.Read(buf)
	cancel()
	res.Body.Close()
	waitFor(t, func() bool { return s.KeyStats(testKey).Active == 0 })
	if st := s.KeyStats(testKey); st.Canceled != 1 || st.Completed != 0 || st.Failed != 0 || st.ByStatus[200] != 1 {
		t.Errorf("after the cancel: %+v", st)
	}
}

func TestCloseReleasesHang(t *testing.T) {
	s := New(Config{})
	ts := newServer(t, s)
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:hang", ""))
		errc <- err
	}()
	waitFor(t, func() bool { return s.KeyStats(testKey).Active == 1 })
	s.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("released hang: want a transport error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hang")
	}
	// After Close, latency is not waited.
	s2 := New(Config{Latency: time.Hour})
	ts2 := newServer(t, s2)
	s2.Close()
	if res, _, err := post(t, ts2, testKey, "/v1/chat/completions", chatBody("x", "")); err != nil || res.StatusCode != 200 {
		t.Errorf("after Close: %v", err)
	}
}

func TestRequestsAndReset(t *testing.T) {
	s, ts := start(t, Config{})
	for i := range maxRecorded + 5 {
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", ts.URL+"/v1/chat/completions?n="+strconv.Itoa(i),
			strings.NewReader(chatBody("req "+strconv.Itoa(i), "")))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("X-Test", strconv.Itoa(i))
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	recs := s.Requests()
	if len(recs) != maxRecorded {
		t.Fatalf("%d recorded", len(recs))
	}
	first, last := recs[0], recs[len(recs)-1]
	if first.Header.Get("X-Test") != "5" || last.Header.Get("X-Test") != strconv.Itoa(maxRecorded+4) {
		t.Errorf("order: first %s last %s", first.Header.Get("X-Test"), last.Header.Get("X-Test"))
	}
	if last.Method != "POST" || last.Path != "/v1/chat/completions" || last.Query.Get("n") != strconv.Itoa(maxRecorded+4) ||
		last.RawQuery != "n="+strconv.Itoa(maxRecorded+4) || !strings.Contains(string(last.Body), "req "+strconv.Itoa(maxRecorded+4)) ||
		last.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("last: %s %s ? %s, %d body bytes", last.Method, last.Path, last.RawQuery, len(last.Body))
	}
	if st := s.Stats(); st.Requests != maxRecorded+5 || st.ByKey[testKey].Completed != maxRecorded+5 {
		t.Errorf("stats %+v", st.ByKey[testKey])
	}
	s.Reset()
	if st := s.Stats(); st.Requests != 0 || len(st.ByKey) != 0 || len(s.Requests()) != 0 {
		t.Errorf("after Reset: %+v", st)
	}
	if st := s.KeyStats("nobody"); st.Requests != 0 || st.ByStatus == nil {
		t.Errorf("unknown key: %+v", st)
	}
}

func TestConcurrency(t *testing.T) {
	s, ts := start(t, Config{Faults: []Fault{{Key: otherKey, Mode: FaultStatus, Status: 500, Times: 10}}})
	keys := []string{testKey, otherKey, "sk-third-key-000000000"}
	const perKey = 30
	var wg sync.WaitGroup
	errs := make(chan error, len(keys)*perKey)
	for _, k := range keys {
		c := sdk(ts, k)
		for i := range perKey {
			wg.Go(func() {
				p := userParams("hello " + strconv.Itoa(i) + " mock:tokens=4")
				if i%2 == 0 {
					p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
					stream := c.Chat.Completions.NewStreaming(ctxT(t), p)
					var acc openai.ChatCompletionAccumulator
					for stream.Next() {
						acc.AddChunk(stream.Current())
					}
					if err := stream.Err(); err != nil {
						errs <- err
						return
					}
					if acc.Choices[0].Message.Content != ReplyText(4) || acc.Usage.TotalTokens != 10+4 {
						errs <- errors.New("bad stream " + acc.Choices[0].Message.Content)
					}
					return
				}
				res, err := c.Chat.Completions.New(ctxT(t), p)
				if err != nil {
					errs <- err
					return
				}
				if res.Usage.PromptTokens != 10 || res.Choices[0].Message.Content != ReplyText(4) {
					errs <- errors.New("bad completion")
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	failures := 0
	for err := range errs {
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
			t.Error(err)
		}
		failures++
	}
	if failures != 10 {
		t.Errorf("%d failures, want the fault's 10", failures)
	}
	st := s.Stats()
	if st.Requests != int64(len(keys)*perKey) {
		t.Errorf("%d requests", st.Requests)
	}
	for _, k := range keys {
		ks := st.ByKey[k]
		wantFailed := int64(0)
		if k == otherKey {
			wantFailed = 10
		}
		if ks.Requests != perKey || ks.Streams != perKey/2 || ks.Failed != wantFailed || ks.Completed != perKey-wantFailed || ks.Active != 0 {
			t.Errorf("key %s: %+v", maskKey(k), ks)
		}
	}
}

func TestHTTP2Aborts(t *testing.T) {
	s := New(Config{})
	ts := httptest.NewUnstartedServer(s)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(func() { s.Close(); ts.Close() })
	for _, tc := range []struct{ text, extra string }{
		{"x mock:close", ""},
		{"x mock:cut=2", `"stream":true`},
		{"x mock:cut=2", ""},
	} {
		res, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody(tc.text, tc.extra))
		if err == nil {
			t.Errorf("%s %s: no error, %d %s", tc.text, tc.extra, res.StatusCode, body)
			continue
		}
		if res != nil && res.ProtoMajor != 2 {
			t.Errorf("not HTTP/2: %s", res.Proto)
		}
	}
	if st := s.KeyStats(testKey); st.Failed != 3 {
		t.Errorf("stats %+v", st)
	}
}
