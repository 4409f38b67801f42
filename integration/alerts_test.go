package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer/smtptest"
	"github.com/modelgate/modelgate/mockupstream"
)

// Alerts: crossings of an account's thresholds under load on three
// instances, re-arming, the month's spend and key caps, webhook retries,
// and the refusal of private webhook addresses. Mail goes to a real SMTP
// server on loopback; webhooks to a test receiver that checks their
// signatures with the documented scheme, written out here.

// hook is one webhook POST the receiver took.
type hook struct {
	id, signature, contentType, userAgent string
	body                                  []byte
	at                                    time.Time // the signature's t
	verr                                  error     // why its signature did not verify
	event                                 struct {
		ID, Type, Account string
		Created           time.Time
		Data              json.RawMessage
	}
}

// receiver is a webhook endpoint: it verifies each POST's signature under
// the account's secret and answers the statuses of answers in turn, then
// 204.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	secret  string
	answers []int
	hooks   []hook
	arrived chan struct{}
}

// newReceiver starts a receiver on loopback.
func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers, arrived: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h := hook{id: req.Header.Get("Modelgate-Webhook-Id"), signature: req.Header.Get("Modelgate-Signature"),
		contentType: req.Header.Get("Content-Type"), userAgent: req.Header.Get("User-Agent"), body: body}
	r.mu.Lock()
	defer r.mu.Unlock()
	h.at, h.verr = verifySignature(r.secret, h.signature, body, time.Now())
	if err := json.Unmarshal(body, &h.event); err != nil && h.verr == nil {
		h.verr = err
	}
	r.hooks = append(r.hooks, h)
	status := http.StatusNoContent
	if len(r.answers) > 0 {
		status, r.answers = r.answers[0], r.answers[1:]
	}
	w.WriteHeader(status)
	r.arrived <- struct{}{}
}

// setSecret is the secret the receiver verifies with.
func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	r.secret = s
	r.mu.Unlock()
}

// got is what arrived so far.
func (r *receiver) got() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.hooks...)
}

// wait waits until n hooks arrived in all.
func (r *receiver) wait(t *testing.T, n int, within time.Duration) []hook {
	t.Helper()
	deadline := time.After(within)
	for len(r.got()) < n {
		select {
		case <-r.arrived:
		case <-deadline:
			t.Fatalf("%d webhooks arrived within %s, want %d: %+v", len(r.got()), within, n, r.got())
		}
	}
	return r.got()
}

// verifySignature checks a Modelgate-Signature header as the docs tell a
// receiver to: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>",
// with t within 5 minutes of now. It returns t.
func verifySignature(secret, header string, body []byte, now time.Time) (time.Time, error) {
	var ts, v1 string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || v1 == "" {
		return time.Time{}, fmt.Errorf("malformed signature header %q", header)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	if want := hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(v1), []byte(want)) {
		return time.Time{}, fmt.Errorf("signature %s does not match the body under the secret", v1)
	}
	at := time.Unix(n, 0)
	if d := now.Sub(at); d > 5*time.Minute || d < -5*time.Minute {
		return time.Time{}, fmt.Errorf("signature time %s is %s from now", at, d)
	}
	return at, nil
}

// postgresSchemaDSN makes a schema of its own on the test PostgreSQL
// server, dropped when t ends (after the cleanups registered later, such
// as closing a store on it), and returns a DSN that uses it; without a
// server the test skips (fails in CI).
func postgresSchemaDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("MODELGATE_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" || os.Getenv("MODELGATE_REQUIRE_POSTGRES") == "1" {
			t.Fatal("set MODELGATE_TEST_POSTGRES to a PostgreSQL server's DSN")
		}
		t.Skip("no PostgreSQL server: set MODELGATE_TEST_POSTGRES=postgres://user:password@127.0.0.1:5432/db")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	schema := "t_schema_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// alertsPublicURL is the public_url of the gateways that send alerts.
const alertsPublicURL = "https://alerts.example.test"

// alertsInstanceConfig is one instance's Caddyfile: a PostgreSQL ledger
// (its DSN from the environment), mail through srv, alerts looked at
// every 100ms, webhooks allowed to loopback (the receiver is there), one
// model at 1 per 1M tokens.
func alertsInstanceConfig(port int, srv *smtptest.Server, mockURL string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 1s
	modelgate {
		ledger postgres {env.MG_TEST_ALERTS_DSN} {
			poll_interval 200ms
		}
		min_output 1
		public_url %s
		smtp {
			host %s
			port %d
			from "Acme AI <no-reply@example.com>"
			tls none
		}
		alerts {
			interval 100ms
			retry_base 200ms
			allow_private_webhooks
		}
		provider up {
			format openai
			base_url %s
			keys %s
			health_check off
		}
		model m {
			route up up-model
			price input 1 output 1
			max_output 200
		}
	}
}

http://127.0.0.1:%d {
	modelgate_api
}
`, alertsPublicURL, srv.Host(), srv.Port(), mockURL, upstreamKey, port)
}

// TestAlertsThreeInstances: three gateway processes on one PostgreSQL
// ledger, under concurrent requests on one account, cross its low-balance
// threshold: exactly one mail reaches the SMTP server and exactly one
// webhook the receiver, whose signature verifies; the mail states the
// balance and when it runs out at the last day's rate, and shares its
// event with the webhook. A credit back above the threshold re-arms the
// alert: the next crossing sends one more mail and one more webhook.
func TestAlertsThreeInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three gateway processes")
	}
	dsn := postgresSchemaDSN(t)
	t.Setenv("MG_TEST_ALERTS_DSN", dsn)
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledger.Options{Postgres: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := s.CreateAccount(ctx, "owner@alerts.example", "")
	if err != nil {
		t.Fatal(err)
	}
	const threshold = ledger.Money(5_000_000) // 0.005
	credit := func(amount ledger.Money, ref string) {
		t.Helper()
		if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: amount, Reference: ref, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	credit(10_000_000, "start")
	key, _, err := s.CreateKey(ctx, a.ID, "load")
	if err != nil {
		t.Fatal(err)
	}
	recv := newReceiver(t)
	if err := s.SetAlerts(ctx, a.ID, ledger.Alerts{LowBalance: threshold, Mail: true, WebhookURL: recv.srv.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	secret, err := s.RotateWebhookSecret(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	recv.setSecret(secret)

	mail := smtptest.Start(t, smtptest.Options{})
	mock := httptest.NewServer(mockConfigServer())
	t.Cleanup(mock.Close)
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	var bases []string
	for i := range 3 {
		idir := filepath.Join(dir, fmt.Sprintf("gw%d", i))
		if err := os.MkdirAll(idir, 0o700); err != nil {
			t.Fatal(err)
		}
		port := freeTCPPort(t)
		cfg := filepath.Join(idir, "Caddyfile")
		if err := os.WriteFile(cfg, []byte(alertsInstanceConfig(port, mail, mock.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		gw := runGateway(t, bin, cfg, idir, base)
		if !gw.serving(30 * time.Second) {
			t.Fatalf("instance %d did not start:\n%s", i, gw.output())
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("instance %d's output:\n%s", i, gw.output())
			}
		})
		bases = append(bases, base)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// load sends batches of 30 concurrent requests, spread over the
	// instances, until the balance is below the threshold
	load := func() {
		t.Helper()
		for batch := 0; ; batch++ {
			acc, err := s.GetAccount(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if acc.Balance < threshold {
				return
			}
			if batch == 20 {
				t.Fatalf("the balance is still %s after 20 batches", acc.Balance)
			}
			var wg sync.WaitGroup
			for i := range 30 {
				wg.Go(func() {
					body := `{"model":"m","max_tokens":200,"messages":[{"role":"user","content":"spend mock:tokens=100"}]}`
					req, _ := http.NewRequest("POST", bases[i%3]+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 && resp.StatusCode != 403 {
						t.Errorf("%d %s", resp.StatusCode, out)
					}
				})
			}
			wg.Wait()
		}
	}

	// checkCrossing waits for the n-th mail and webhook, then a while for
	// any duplicate, and checks the last ones
	checkCrossing := func(n int) {
		t.Helper()
		mails := mail.Wait(t, n, 20*time.Second)
		hooks := recv.wait(t, n, 20*time.Second)
		time.Sleep(time.Second) // ten of the instances' looks: any duplicate would be here
		if m, h := len(mail.Mails()), len(recv.got()); m != n || h != n {
			t.Fatalf("after crossing %d: %d mails and %d webhooks, want %d of each", n, m, h, n)
		}
		m, h := mails[n-1], hooks[n-1]
		if h.verr != nil {
			t.Fatalf("webhook %d: %v", n, h.verr)
		}
		if h.event.Type != "balance.low" || h.event.Account != a.ID || !strings.HasPrefix(h.event.ID, "evt_") ||
			h.contentType != "application/json" || h.userAgent != "modelgate-webhooks/1" || !strings.HasPrefix(h.id, "dlv_") {
			t.Errorf("webhook %d: %+v", n, h)
		}
		var data struct {
			Balance, Threshold, Currency string
			Spent24h                     string `json:"spent_24h"`
			RunsOut                      *int64 `json:"runs_out_in_seconds"`
		}
		if err := json.Unmarshal(h.event.Data, &data); err != nil {
			t.Fatal(err)
		}
		balance, err := ledger.ParseMoney(data.Balance)
		if err != nil || balance >= threshold || data.Threshold != threshold.String() || data.Currency != "usd" ||
			data.Spent24h == "0.000000000" || data.RunsOut == nil || *data.RunsOut <= 0 {
			t.Errorf("webhook %d's data: %s", n, h.event.Data)
		}
		if len(m.To) != 1 || m.To[0] != "owner@alerts.example" || m.Subject() != "alerts.example.test: your balance is below 0.005000 USD" {
			t.Errorf("mail %d to %v: %q", n, m.To, m.Subject())
		}
		text := m.Text()
		for _, want := range []string{
			"The balance of your account at alerts.example.test is " + balance.Display() + " USD, below the 0.005000 USD",
			"At the last 24 hours' rate, the balance runs out in about ",
			"(Event " + h.event.ID + ", account " + a.ID + ".)",
			alertsPublicURL + "/console/",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("mail %d lacks %q:\n%s", n, want, text)
			}
		}
		ds, err := s.Deliveries(ctx, a.ID, ledger.ChannelWebhook, 10)
		if err != nil || len(ds) != n || ds[0].ID != h.id || ds[0].Status != ledger.DeliveryDone || ds[0].Result != "HTTP 204" {
			t.Errorf("webhook deliveries: %+v, %v", ds, err)
		}
	}

	load()
	checkCrossing(1)

	// back above the threshold: the next request an instance settles
	// re-arms the alert
	credit(5_000_000, "back")
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("POST", bases[0]+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"mock:tokens=1"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		fired, err := s.FiredAlerts(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(fired) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("above the threshold, the alert is still fired: %+v", fired)
		}
		time.Sleep(100 * time.Millisecond)
	}
	load()
	checkCrossing(2)
}

// mockConfigServer is the mock upstream of the instances.
func mockConfigServer() http.Handler {
	return mockupstream.New(mockConfig{Keys: []string{upstreamKey}})
}

// startAlertingGateway starts the in-process gateway with mail through a
// real SMTP server and an alerts block of the given lines.
func startAlertingGateway(t *testing.T, alertLines string) (*testGateway, *smtptest.Server) {
	t.Helper()
	srv := smtptest.Start(t, smtptest.Options{})
	g := startGateway(t, gatewayOptions{extra: fmt.Sprintf(`		min_output 1
		public_url %s
		smtp {
			host %s
			port %d
			from "Acme AI <no-reply@example.com>"
			tls none
		}
		alerts {
%s		}
`, alertsPublicURL, srv.Host(), srv.Port(), alertLines)})
	return g, srv
}

// alertAccount makes an account with an email and a balance.
func (g *testGateway) alertAccount(email string, balance ledger.Money) string {
	g.t.Helper()
	ctx := context.Background()
	a, err := g.store.CreateAccount(ctx, email, "developer")
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: balance, Reference: "start:" + a.ID, Reason: "test"}); err != nil {
		g.t.Fatal(err)
	}
	return a.ID
}

// TestAlertsMonthSpendAndKeyCaps: an account warned at a month's spend
// and at its keys' caps gets, while a capped key spends up to its cap and
// is then refused, one mail for the month's spend and one for each of the
// key's 80 % and 100 %, however many requests follow; the fired alerts
// are named for their month and the key's period.
func TestAlertsMonthSpendAndKeyCaps(t *testing.T) {
	g, mail := startAlertingGateway(t, "\t\t\tinterval 50ms\n")
	ctx := context.Background()
	acct := g.alertAccount("caps@alerts.example", 1_000_000_000)
	const capAmount = ledger.Money(2_000_000) // 0.002: some ten requests
	secret, key, err := g.store.CreateKeyWithLimits(ctx, acct, "nightly job", ledger.KeyLimits{Cap: capAmount, Period: ledger.PeriodDay})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.store.SetAlerts(ctx, acct, ledger.Alerts{MonthSpend: 1_000_000, KeyCaps: true, Mail: true}); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := 0; refused < 3; i++ {
		if i == 100 {
			t.Fatal("the capped key was never refused")
		}
		r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "spend mock:tokens=100", `"max_tokens":300`),
			"Authorization", "Bearer "+secret)
		switch r.status {
		case 200:
		case 403:
			refused++
		default:
			t.Fatalf("%d %s", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond) // let the watcher look between requests
	}
	mails := mail.Wait(t, 3, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if n := len(mail.Mails()); n != 3 {
		t.Fatalf("%d mails, want 3 (month spend, key cap 80%%, key cap 100%%)", n)
	}
	subjects := map[string]string{}
	for _, m := range mails {
		subjects[m.Subject()] = m.Text()
	}
	month := time.Now().UTC().Format("2006-01")
	for subject, want := range map[string]string{
		"alerts.example.test: this month's spend reached 0.001000 USD":                          "in " + month + " (UTC), reaching the 0.001000 USD",
		`alerts.example.test: key "nightly job" (` + key.Prefix + `…) has spent 80% of its cap`: "of its spend cap of 0.002000 USD per day: 80% or more",
		`alerts.example.test: key "nightly job" (` + key.Prefix + `…) reached its spend cap`:    "has reached its spend cap of 0.002000 USD per day",
	} {
		text, ok := subjects[subject]
		if !ok {
			t.Errorf("no mail %q among %v", subject, subjects)
			continue
		}
		if !strings.Contains(text, want) {
			t.Errorf("mail %q lacks %q:\n%s", subject, want, text)
		}
	}
	fired, err := g.store.FiredAlerts(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	start := strconv.FormatInt(ledger.PeriodDay.Start(time.Now()), 10)
	var names []string
	for _, f := range fired {
		names = append(names, f.Alert)
	}
	for _, want := range []string{"month_spend:" + month, "key_cap_80:" + key.ID + ":" + start, "key_cap_100:" + key.ID + ":" + start} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("fired %v, want %s among them", names, want)
		}
	}
}

// TestAlertsWebhookRetries: a receiver that answers 500 twice, then 204,
// gets three attempts of one delivery, with the same Modelgate-Webhook-Id
// and a fresh, valid signature each time; the delivery ends done, after
// three attempts, as Deliveries shows. It runs after a config reload: the
// new config's watcher hears of the settings change (the old one's Stop
// must not unhook it).
func TestAlertsWebhookRetries(t *testing.T) {
	g, _ := startAlertingGateway(t, "\t\t\tinterval 50ms\n\t\t\tretry_base 1s\n\t\t\tallow_private_webhooks\n")
	g.reload()
	ctx := context.Background()
	acct := g.alertAccount("", 1_000_000_000)
	recv := newReceiver(t, 500, 500)
	secret, err := g.store.RotateWebhookSecret(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	recv.setSecret(secret)
	// a threshold above the balance: the change itself is seen
	if err := g.store.SetAlerts(ctx, acct, ledger.Alerts{LowBalance: 5_000_000_000, Mail: true, WebhookURL: recv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	hooks := recv.wait(t, 3, 15*time.Second)
	time.Sleep(300 * time.Millisecond)
	if n := len(recv.got()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	for i, h := range hooks {
		if h.verr != nil {
			t.Errorf("attempt %d: %v", i+1, h.verr)
		}
		if h.id != hooks[0].id || h.event.ID != hooks[0].event.ID || string(h.body) != string(hooks[0].body) {
			t.Errorf("attempt %d: id %s, event %s; the first's %s, %s", i+1, h.id, h.event.ID, hooks[0].id, hooks[0].event.ID)
		}
		if i > 0 && (!h.at.After(hooks[i-1].at) || h.signature == hooks[i-1].signature) {
			t.Errorf("attempt %d was signed at %s with %s, the one before at %s with %s", i+1, h.at, h.signature, hooks[i-1].at, hooks[i-1].signature)
		}
	}
	var d []ledger.Delivery
	for range 50 { // the worker finishes after the receiver answered
		if d, err = g.store.Deliveries(ctx, acct, "", 10); err != nil {
			t.Fatal(err)
		}
		if len(d) == 1 && d[0].Status != ledger.DeliveryPending {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(d) != 1 || d[0].ID != hooks[0].id || d[0].Channel != ledger.ChannelWebhook || d[0].Status != ledger.DeliveryDone ||
		d[0].Attempts != 3 || d[0].Result != "HTTP 204" || !strings.Contains(d[0].LastError, "HTTP 500") {
		t.Fatalf("deliveries (no mail: the account has no address): %+v", d)
	}
	resp, err := http.Get(adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`modelgate_alert_deliveries_total{channel="webhook",outcome="retry"} 2`,
		`modelgate_alert_deliveries_total{channel="webhook",outcome="done"} 1`} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestAlertsWebhookPrivateRefused: without allow_private_webhooks, a
// webhook whose URL reaches a loopback address is refused when it
// connects: the receiver gets nothing, and the delivery failed for good,
// saying why.
func TestAlertsWebhookPrivateRefused(t *testing.T) {
	g, _ := startAlertingGateway(t, "\t\t\tinterval 50ms\n\t\t\tretry_base 100ms\n")
	ctx := context.Background()
	acct := g.alertAccount("", 1_000_000_000)
	recv := newReceiver(t)
	if _, err := g.store.RotateWebhookSecret(ctx, acct); err != nil {
		t.Fatal(err)
	}
	// by name, resolved to loopback: the address connected to is checked
	hookURL := strings.Replace(recv.srv.URL, "127.0.0.1", "localhost", 1)
	if err := g.store.SetAlerts(ctx, acct, ledger.Alerts{LowBalance: 5_000_000_000, WebhookURL: hookURL}); err != nil {
		t.Fatal(err)
	}
	var d []ledger.Delivery
	for range 200 {
		var err error
		if d, err = g.store.Deliveries(ctx, acct, ledger.ChannelWebhook, 10); err != nil {
			t.Fatal(err)
		}
		if len(d) == 1 && d[0].Status != ledger.DeliveryPending {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if len(d) != 1 || d[0].Status != ledger.DeliveryFailed || d[0].Attempts != 1 ||
		!strings.Contains(d[0].LastError, "loopback, private, link-local") || !strings.Contains(d[0].LastError, "allow_private_webhooks") ||
		strings.Contains(d[0].LastError, hookURL) {
		t.Fatalf("deliveries: %+v", d)
	}
	if n := len(recv.got()); n != 0 {
		t.Fatalf("the receiver on loopback got %d webhooks", n)
	}
	if !regexp.MustCompile(`127\.0\.0\.1|::1`).MatchString(d[0].LastError) {
		t.Errorf("the error does not name the address: %s", d[0].LastError)
	}
}

// TestCaddyfileAlerts: the alerts block's bad forms are clear errors, and
// a gateway without the block provisions (alerts work with defaults).
func TestCaddyfileAlerts(t *testing.T) {
	const head = "{\n\tmodelgate {\n"
	tail := "\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"
	for name, tc := range map[string]struct{ body, want string }{
		"unknown option":    {"\t\talerts {\n\t\t\tinterval 1s\n\t\t\tsms on\n\t\t}\n", `alerts: unrecognized option "sms"`},
		"twice an option":   {"\t\talerts {\n\t\t\tinterval 1s\n\t\t\tinterval 2s\n\t\t}\n", "alerts: interval already specified"},
		"bad duration":      {"\t\talerts {\n\t\t\tretry_base soon\n\t\t}\n", `retry_base "soon": want a positive duration`},
		"zero duration":     {"\t\talerts {\n\t\t\tinterval 0s\n\t\t}\n", `interval "0s": want a positive duration`},
		"no duration":       {"\t\talerts {\n\t\t\treload_interval\n\t\t}\n", "wrong argument count"},
		"a flag's argument": {"\t\talerts {\n\t\t\tallow_private_webhooks yes\n\t\t}\n", "wrong argument count"},
		"an argument":       {"\t\talerts on {\n\t\t}\n", "usage: alerts {"},
		"two alerts blocks": {"\t\talerts {\n\t\t}\n\t\talerts {\n\t\t}\n", "alerts already specified"},
	} {
		t.Run(name, func(t *testing.T) {
			err := adaptErr(t, head+tc.body+tail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	if err := provisionCaddyfile(t, ""); err != nil {
		t.Fatalf("no alerts block: %v", err)
	}
	if err := provisionCaddyfile(t, "\t\talerts {\n\t\t\tinterval 2s\n\t\t}\n"); err != nil {
		t.Fatalf("an alerts block: %v", err)
	}
}
