package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/guard"
)

// trustLocalProxy makes the test Caddy take the client address from
// X-Forwarded-For, as behind a proxy, so that tests can come from many
// addresses.
const trustLocalProxy = "\tservers {\n\t\ttrusted_proxies static 127.0.0.0/8 ::1/128\n\t}\n"

// formPoster posts a console form (sign-in, sign-up) with the form token
// of one visitor, from any goroutine.
type formPoster struct {
	t     *testing.T
	path  string
	token string
}

// newFormPoster gets the form at path once and keeps its token.
func newFormPoster(t *testing.T, path string) *formPoster {
	c := newConsoleClient(t)
	page := c.get(path)
	return &formPoster{t: t, path: path, token: csrfOf(t, page.body)}
}

// post sends the form with fields, from the address from ("" for the
// connection's own).
func (p *formPoster) post(from string, fields url.Values) response {
	fields.Set("csrf", p.token)
	req, err := http.NewRequest("POST", gatewayAddr+p.path, strings.NewReader(fields.Encode()))
	if err != nil {
		p.t.Error(err)
		return response{}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: formCookie, Value: p.token})
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		p.t.Error(err)
		return response{}
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b.String()}
}

// noRedirects is a client that returns redirects as they are.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       2 * time.Minute,
}

// parallel runs n calls of f at once and counts the statuses they return.
func parallel(n int, f func(i int) response) map[int]int {
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := f(i)
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return statuses
}

// TestSignInLimitHoldsUnderConcurrency: 100 wrong passwords at once from
// one address: no more than the limit are verified (401), the others are
// refused (429) without a hash; then the right password is refused too,
// also after a config reload.
func TestSignInLimitHoldsUnderConcurrency(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	newConsoleClient(t).signUp(g, "target@example.com")
	p := newFormPoster(t, "/console/signin")
	statuses := parallel(100, func(i int) response {
		return p.post("", url.Values{"email": {"target@example.com"}, "password": {fmt.Sprintf("wrong guess %03d", i)}})
	})
	if statuses[http.StatusUnauthorized] > guard.SignInFailures || statuses[http.StatusUnauthorized] == 0 ||
		statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != 100 {
		t.Fatalf("100 wrong passwords at once: %v; want at most %d verified (401), the rest 429", statuses, guard.SignInFailures)
	}
	// most of the burst was refused for being too many at once: the rest
	// of the budget, one by one, then nothing, not even after a reload
	for i := statuses[http.StatusUnauthorized]; i < guard.SignInFailures; i++ {
		if r := p.post("", url.Values{"email": {"target@example.com"}, "password": {"one by one"}}); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d, alone: %d", i+1, r.status)
		}
	}
	g.reload()
	if r := p.post("", url.Values{"email": {"target@example.com"}, "password": {testPassword}}); r.status != http.StatusTooManyRequests {
		t.Fatalf("the right password after the failures and a reload: %d", r.status)
	}
}

// TestSignUpLimitHoldsUnderConcurrency: 40 sign-ups at once from one
// address create no more accounts than the limit.
func TestSignUpLimitHoldsUnderConcurrency(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	p := newFormPoster(t, "/console/signup")
	statuses := parallel(40, func(i int) response {
		return p.post("", url.Values{"email": {fmt.Sprintf("user%02d@example.com", i)}, "password": {testPassword}})
	})
	created := 0
	for i := range 40 {
		if _, _, err := g.store.Login(context.Background(), fmt.Sprintf("user%02d@example.com", i)); err == nil {
			created++
		}
	}
	if created > guard.SignUps || created == 0 || created != statuses[http.StatusSeeOther] ||
		created+statuses[http.StatusTooManyRequests] != 40 {
		t.Fatalf("40 sign-ups at once: %d accounts, answers %v; want at most %d accounts, the rest 429", created, statuses, guard.SignUps)
	}
}

// TestLookupLimitHoldsUnderConcurrency: 100 wrong keys at once from one
// address on the lookup page: no more than the limit are looked up.
func TestLookupLimitHoldsUnderConcurrency(t *testing.T) {
	resetConsoleLimits(t)
	startGateway(t, gatewayOptions{site: "\tmodelgate_lookup /usage*\n"})
	statuses := parallel(100, func(i int) response {
		return postLookup(t, fmt.Sprintf("mg-%040d", i))
	})
	if statuses[http.StatusNotFound] > guard.LookupFailures || statuses[http.StatusNotFound] == 0 ||
		statuses[http.StatusNotFound]+statuses[http.StatusTooManyRequests] != 100 {
		t.Fatalf("100 wrong keys at once: %v; want at most %d looked up (404), the rest 429", statuses, guard.LookupFailures)
	}
}

// TestSignInStrangerCannotLockOut: someone guessing at an email from many
// addresses locks it for addresses it never signed in from, but not for
// the account's own address, from which the right password still works.
func TestSignInStrangerCannotLockOut(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, global: trustLocalProxy})
	newConsoleClient(t).signUp(g, "owner@example.com")
	p := newFormPoster(t, "/console/signin")
	const home = "198.51.100.7"
	right := url.Values{"email": {"owner@example.com"}, "password": {testPassword}}
	if r := p.post(home, right); r.status != http.StatusSeeOther {
		t.Fatalf("the owner signs in: %d", r.status)
	}
	// a guesser, one try from each of many addresses
	for i := range guard.SignInFailures {
		if r := p.post(fmt.Sprintf("203.0.113.%d", i+1), url.Values{"email": {"OWNER@example.com"}, "password": {"guess " + fmt.Sprint(i)}}); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, r.status)
		}
	}
	if r := p.post("203.0.113.200", url.Values{"email": {"owner@example.com"}, "password": {"one more guess"}}); r.status != http.StatusTooManyRequests {
		t.Fatalf("a guess past the email's limit: %d", r.status)
	}
	if r := p.post("192.0.2.44", right); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("the right password from an address the account never used, while locked: %d", r.status)
	}
	for range 3 {
		if r := p.post(home, right); r.status != http.StatusSeeOther {
			t.Fatalf("the owner, from home, while a stranger guesses: %d %s", r.status, r.body)
		}
	}
	// home is still limited as an address
	for i := range guard.SignInFailures {
		if r := p.post(home, url.Values{"email": {"owner@example.com"}, "password": {"typo " + fmt.Sprint(i)}}); r.status != http.StatusUnauthorized {
			t.Fatalf("typo %d from home: %d", i, r.status)
		}
	}
	if r := p.post(home, right); r.status != http.StatusTooManyRequests {
		t.Fatalf("home after %d wrong passwords: %d", guard.SignInFailures, r.status)
	}
}

// TestHashQueueBounded: a burst of sign-ins from many addresses, each
// within its own limits, does not queue without end for the password
// hash: past the queue's bound the console answers 429 at once.
func TestHashQueueBounded(t *testing.T) {
	resetConsoleLimits(t)
	startGateway(t, gatewayOptions{site: consoleSite, global: trustLocalProxy})
	// the queue's bound is a few hashes per core: make it what it is on
	// two cores, whatever this machine has
	g, err := guard.Load()
	if err != nil {
		t.Fatal(err)
	}
	old := g.Hashes.SetBound(2 * (1 + guard.HashQueuePerSlot))
	t.Cleanup(func() { g.Hashes.SetBound(old); _ = guard.Release() })
	p := newFormPoster(t, "/console/signin")
	var mu sync.Mutex
	busy := 0
	statuses := parallel(100, func(i int) response {
		r := p.post(fmt.Sprintf("198.18.%d.%d", i/200, i%200+1), url.Values{"email": {fmt.Sprintf("nobody%03d@example.com", i)}, "password": {"a wrong password"}})
		if r.status == http.StatusTooManyRequests && strings.Contains(r.body, "busy") {
			mu.Lock()
			busy++
			mu.Unlock()
		}
		return r
	})
	if busy == 0 || statuses[http.StatusUnauthorized] == 0 || busy != statuses[http.StatusTooManyRequests] ||
		statuses[http.StatusUnauthorized]+busy != 100 {
		t.Fatalf("100 sign-ins at once from 100 addresses: %v, %d busy; want some verified (401) and some refused as busy (429)", statuses, busy)
	}
}
