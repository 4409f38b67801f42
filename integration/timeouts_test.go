package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyIsCut: with the server timeouts of Caddyfile.example (here
// read_body shortened to a second), a client that trickles its request
// body is cut off at the deadline, and the account's concurrency slot is
// free again; a stream that lasts longer than read_body is not cut.
func TestSlowBodyIsCut(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		global: "\tservers {\n\t\ttimeouts {\n\t\t\tread_header 10s\n\t\t\tread_body 1s\n\t\t\tidle 2m\n\t\t}\n\t}\n",
		extra:  "\t\tplan single {\n\t\t\tconcurrency 1\n\t\t}\n",
	})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "single"); err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", gatewayPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := chatBody(testModel, "a slow client", "")
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:%d\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", gatewayPort, key, len(body))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	// while it trickles, it holds the account's one slot
	time.Sleep(300 * time.Millisecond)
	if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "meanwhile", ""), "Authorization", "Bearer "+key); r.status != http.StatusTooManyRequests {
		t.Fatalf("a second request while the slow one holds the slot: %d", r.status)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("the trickled request was answered %d", resp.StatusCode)
		}
	}
	t.Logf("the trickled request was cut after %v", took)
	if took > 5*time.Second {
		t.Fatalf("the trickled body held the connection for %v (read_body 1s)", took)
	}
	// the slot is free again
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "after", ""), "Authorization", "Bearer "+key)
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the slow client was cut: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// a stream longer than read_body: whole
	r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "a long answer mock:tokens=15 mock:delay=150ms", `"stream":true`), "Authorization", "Bearer "+key)
	if r.status != 200 || !strings.Contains(r.body, "data: [DONE]") {
		t.Fatalf("a 2 s stream under read_body 1s: %d %.300s", r.status, r.body)
	}
}
