package payments

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v85"
)

// stripeMock is the stripe-mock binary: $MODELGATE_STRIPE_MOCK, or the
// tool of the tools/stripemock module, built by the go command (which
// needs the module proxy the first time). The test skips when there is
// none.
func stripeMock(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("MODELGATE_STRIPE_MOCK"); bin != "" {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", "stripe-mock")
	cmd.Dir = "../tools/stripemock"
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("stripe-mock cannot be built (cd tools/stripemock && go tool -n stripe-mock: %v; no module proxy?), "+
			"nor is MODELGATE_STRIPE_MOCK set: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// startStripeMock starts stripe-mock on a port of the loopback interface
// that the system chooses (-http-addr 127.0.0.1:0, and the same for the
// HTTPS listener it would otherwise open on every interface), and returns
// its base URL; it stops with the test.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMock(t)
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "Listening for HTTP at address: "); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, out) // its log, to the end
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(time.Minute):
		t.Fatalf("stripe-mock did not listen within a minute")
	}
	return ""
}

// TestStripeMockRequestShapes runs every call the gateway makes to Stripe
// against stripe-mock, which refuses a request whose path, parameters or
// their types Stripe's OpenAPI specification does not have. Its answers
// are fixtures, not the outcome of the calls (a fixed SetupIntent's
// status, a fixed PaymentIntent's), so the test asserts only that no
// request was refused (no *stripe.Error) and that the calls that create
// something return its id.
func TestStripeMockRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts stripe-mock")
	}
	base := startStripeMock(t)
	s := newTestStripe(t, "usd", base)
	ctx := context.Background()
	refused := func(call string, err error) {
		t.Helper()
		var se *stripe.Error
		if errors.As(err, &se) {
			t.Errorf("%s: stripe-mock refused the request: %v", call, err)
		}
	}
	co, err := s.StartCheckout(ctx, CheckoutOptions{AccountID: "acct_a", Email: "a@example.com", Amount: 10_000_000_000,
		SuccessURL: "https://gw/console/topup?done=1", CancelURL: "https://gw/console/topup"})
	refused("StartCheckout", err)
	if err != nil || co.ID == "" {
		t.Errorf("StartCheckout: %+v %v", co, err)
	}
	for _, customer := range []string{"", "cus_existing"} {
		co, err := s.StartCardSetup(ctx, SetupOptions{AccountID: "acct_a", Email: "a@example.com", Customer: customer,
			SuccessURL: "https://gw/console/billing?card=1", CancelURL: "https://gw/console/billing"})
		refused("StartCardSetup", err)
		if err != nil || co.ID == "" || co.Customer == "" {
			t.Errorf("StartCardSetup (customer %q): %+v %v", customer, co, err)
		}
	}
	card, err := s.CardFromSetup(ctx, "seti_123")
	refused("CardFromSetup", err)
	t.Logf("against stripe-mock's fixtures: card %+v, %v", card, err)
	c, err := s.ChargeSaved(ctx, ChargeOptions{AccountID: "acct_a", Card: Card{Customer: "cus_123", PaymentMethod: "pm_123"},
		Amount: 10_000_000_000, IdempotencyKey: "auto_shapes"})
	refused("ChargeSaved", err)
	if c.ID == "" {
		t.Errorf("ChargeSaved: %+v %v", c, err)
	}
	t.Logf("against stripe-mock's fixtures: charge %+v, %v", c, err)
}
