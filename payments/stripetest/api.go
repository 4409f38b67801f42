package stripetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Outcome is what charging a card does: empty (OutcomeSucceed) succeeds;
// any other value is the code of Stripe's card error (HTTP 402) that
// declines it.
type Outcome string

// Outcomes of a charge.
const (
	OutcomeSucceed Outcome = ""
	// OutcomeDeclined leaves the PaymentIntent in requires_payment_method.
	OutcomeDeclined Outcome = "card_declined"
	// OutcomeAuthenticationRequired is the bank asking for 3-D Secure,
	// which a customer who is away cannot do: the PaymentIntent is left
	// in requires_action.
	OutcomeAuthenticationRequired Outcome = "authentication_required"
	// OutcomeExpiredCard leaves the PaymentIntent in
	// requires_payment_method.
	OutcomeExpiredCard Outcome = "expired_card"
)

// declineMessages are Stripe's messages of its card errors.
var declineMessages = map[Outcome]string{
	OutcomeDeclined:               "Your card was declined.",
	OutcomeAuthenticationRequired: "Your card was declined. This transaction requires authentication.",
	OutcomeExpiredCard:            "Your card has expired.",
}

// Card is a card a customer saves on a setup session's page.
type Card struct {
	Brand    string // "visa", …
	Last4    string
	ExpMonth int
	ExpYear  int
	// Outcome is what charging it does.
	Outcome Outcome
}

// API is an in-process double of the Stripe API, for StripeConfig.APIBase:
// it serves the calls the gateway makes (POST /v1/customers, POST
// /v1/checkout/sessions in payment and setup modes, GET
// /v1/setup_intents/{id} with expand, POST /v1/payment_intents) and holds
// what they create, and refuses, as Stripe does, a request without the
// secret key, without a field its call requires, or that reuses a
// PaymentIntent's Idempotency-Key with other parameters. A repeated key
// with the same parameters is answered with the first answer and creates
// nothing. Charges succeed or fail as their card's Outcome says.
//
// Its helpers finish a setup session as the customer would (CompleteSetup)
// and make the signed events Stripe would send (Event). It is safe for
// concurrent use; call the helpers that take a test's failure (CompleteSetup,
// Event) from the test's goroutine.
type API struct {
	*httptest.Server
	t             testing.TB
	secretKey     string
	webhookSecret string

	mu             sync.Mutex
	seq            int
	customers      map[string]map[string]string // metadata by id
	sessions       map[string]*session
	setupIntents   map[string]*setupIntent
	paymentMethods map[string]*paymentMethod
	intents        map[string]*PaymentIntent
	order          []string                // PaymentIntent ids, in order of creation
	idempotent     map[string]*idempotency // by Idempotency-Key of PaymentIntents
	fail           int                     // requests still to answer 500
	refused        []string
}

// session is a Checkout Session.
type session struct {
	SetupSession
	mode string
	// setupMetadata is its setup_intent_data[metadata].
	setupMetadata map[string]string
}

// setupIntent is a SetupIntent of a completed setup session.
type setupIntent struct {
	id, customer, paymentMethod string
	metadata                    map[string]string
}

// paymentMethod is a saved card.
type paymentMethod struct {
	id, customer string
	card         Card
}

// idempotency is what a PaymentIntent's Idempotency-Key was first used
// with, and its answer.
type idempotency struct {
	params   string // the form, encoded in key order
	status   int
	body     []byte
	requests int
	created  int // PaymentIntents created with the key: 0 or 1
}

// NewAPI starts the double, for the secret key and signing its events
// with the webhook secret; it stops with the test.
func NewAPI(t testing.TB, secretKey, webhookSecret string) *API {
	t.Helper()
	a := &API{t: t, secretKey: secretKey, webhookSecret: webhookSecret,
		customers: map[string]map[string]string{}, sessions: map[string]*session{}, setupIntents: map[string]*setupIntent{},
		paymentMethods: map[string]*paymentMethod{}, intents: map[string]*PaymentIntent{}, idempotent: map[string]*idempotency{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

// FailNext makes the API answer the next n requests with a 500 api_error,
// and create nothing, as Stripe does when it fails.
func (a *API) FailNext(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = n
}

// SetOutcome changes what charging the saved card (its payment method id,
// "pm_…") does.
func (a *API) SetOutcome(paymentMethod string, o Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pm := a.paymentMethods[paymentMethod]; pm != nil {
		pm.card.Outcome = o
	}
}

// Charges is the number of PaymentIntents created (charges attempted,
// whatever their outcome); a request answered from its Idempotency-Key
// creates none.
func (a *API) Charges() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.intents)
}

// ChargesFor is the number of PaymentIntents created with the
// Idempotency-Key: 0 or 1.
func (a *API) ChargesFor(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := a.idempotent[key]; k != nil {
		return k.created
	}
	return 0
}

// RequestsFor is the number of PaymentIntent creations requested with the
// Idempotency-Key, the repeated ones included (not those answered 500).
func (a *API) RequestsFor(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := a.idempotent[key]; k != nil {
		return k.requests
	}
	return 0
}

// PaymentIntents are the PaymentIntents created, in order.
func (a *API) PaymentIntents() []PaymentIntent {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]PaymentIntent, 0, len(a.order))
	for _, id := range a.order {
		pi := *a.intents[id]
		pi.Metadata = maps.Clone(pi.Metadata)
		out = append(out, pi)
	}
	return out
}

// Refused describes the requests the API refused (4xx but card errors):
// a test that expects none asserts that it is empty.
func (a *API) Refused() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.refused)
}

// Customers is the number of customers created.
func (a *API) Customers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.customers)
}

// CompleteSetup does what the customer does on the setup session's page:
// saves the card (a payment method attached to the session's customer,
// with a SetupIntent that succeeded) and completes the session. It returns
// the card's payment method id and the signed checkout.session.completed
// event Stripe then sends, with the metadata the session was created with.
func (a *API) CompleteSetup(sessionID string, card Card) (string, Delivery) {
	a.t.Helper()
	a.mu.Lock()
	cs := a.sessions[sessionID]
	if cs == nil || cs.mode != "setup" || cs.Status != "open" {
		a.mu.Unlock()
		a.t.Fatalf("stripetest: no open setup session %q", sessionID)
		return "", Delivery{}
	}
	pm := &paymentMethod{id: a.newID("pm"), customer: cs.Customer, card: card}
	a.paymentMethods[pm.id] = pm
	si := &setupIntent{id: a.newID("seti"), customer: cs.Customer, paymentMethod: pm.id, metadata: cs.setupMetadata}
	a.setupIntents[si.id] = si
	cs.Status, cs.SetupIntent = "complete", si.id
	payload := SetupSessionEvent(a.newID("evt"), "checkout.session.completed", cs.SetupSession)
	a.mu.Unlock()
	return pm.id, Delivery{Payload: payload, Header: Signed(payload, a.webhookSecret, time.Now())}
}

// Event is the signed event of type typ about the PaymentIntent, as
// Stripe sends it: "payment_intent.succeeded" shows it succeeded (as after
// the customer authenticated it), "payment_intent.payment_failed" failed
// with its card's error (card_declined if none), and
// "payment_intent.requires_action" waiting for the customer.
func (a *API) Event(typ, paymentIntent string) Delivery {
	a.t.Helper()
	a.mu.Lock()
	p := a.intents[paymentIntent]
	if p == nil {
		a.mu.Unlock()
		a.t.Fatalf("stripetest: no payment intent %q", paymentIntent)
		return Delivery{}
	}
	pi := *p
	id := a.newID("evt")
	a.mu.Unlock()
	switch typ {
	case "payment_intent.succeeded":
		pi.Status, pi.ErrorCode, pi.DeclineCode, pi.ErrorMessage = "succeeded", "", "", ""
	case "payment_intent.payment_failed":
		pi.Status = "requires_payment_method"
		if pi.ErrorCode == "" {
			pi.ErrorCode, pi.DeclineCode, pi.ErrorMessage = string(OutcomeDeclined), "generic_decline", declineMessages[OutcomeDeclined]
		}
	case "payment_intent.requires_action":
		pi.Status = "requires_action"
	}
	payload := PaymentIntentEvent(id, typ, pi)
	return Delivery{Payload: payload, Header: Signed(payload, a.webhookSecret, time.Now())}
}

// newID is a new id with the prefix; a.mu is held.
func (a *API) newID(prefix string) string {
	a.seq++
	return fmt.Sprintf("%s_test_%06d", prefix, a.seq)
}

// apiError is Stripe's error answer.
type apiError struct {
	status int
	typ    string
	code   string
	param  string
	msg    string
}

// serve routes a request, holding a.mu: the double answers one at a time.
func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	status, body := a.answer(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", a.newID("req"))
	if r.Header.Get("Idempotency-Key") != "" && r.Method == http.MethodPost {
		w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // G705: the body goes out as application/json (set above), which browsers do not render as HTML
}

// answer is the status and body of a request's answer; a.mu is held.
func (a *API) answer(r *http.Request) (int, []byte) {
	if r.Header.Get("Authorization") != "Bearer "+a.secretKey {
		return a.refuse(r, apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
			msg: "Invalid API Key provided (the double's secret key was not sent)"})
	}
	if a.fail > 0 {
		a.fail--
		return errorBody(apiError{status: http.StatusInternalServerError, typ: "api_error", msg: "An unknown error occurred"})
	}
	if err := r.ParseForm(); err != nil {
		return a.refuse(r, apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: "Invalid request body: " + err.Error()})
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/customers":
		return a.createCustomer(r.PostForm)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/checkout/sessions":
		return a.createSession(r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/setup_intents/"):
		return a.retrieveSetupIntent(r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents":
		return a.createPaymentIntent(r)
	}
	return a.refuse(r, apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		msg: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ") in the double"})
}

// refuse records and answers a refused request.
func (a *API) refuse(r *http.Request, e apiError) (int, []byte) {
	a.refused = append(a.refused, r.Method+" "+r.URL.Path+": "+strconv.Itoa(e.status)+" "+cmp.Or(e.code, e.typ)+": "+e.msg)
	return errorBody(e)
}

// errorBody is an error's answer.
func errorBody(e apiError) (int, []byte) {
	body := map[string]any{"type": e.typ, "message": e.msg}
	if e.code != "" {
		body["code"] = e.code
	}
	if e.param != "" {
		body["param"] = e.param
	}
	b, err := json.Marshal(map[string]any{"error": body})
	if err != nil {
		panic(err)
	}
	return e.status, b
}

// missing refuses the first of the fields the form lacks.
func (a *API) missing(r *http.Request, form url.Values, fields ...string) (int, []byte, bool) {
	for _, f := range fields {
		if form.Get(f) == "" {
			status, body := a.refuse(r, apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
				code: "parameter_missing", param: f, msg: "Missing required param: " + f + "."})
			return status, body, true
		}
	}
	return 0, nil, false
}

// noSuch refuses a request naming an object that does not exist.
func (a *API) noSuch(r *http.Request, param, what, id string) (int, []byte) {
	return a.refuse(r, apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "resource_missing",
		param: param, msg: "No such " + what + ": '" + id + "'"})
}

// invalid refuses a request with a bad value.
func (a *API) invalid(r *http.Request, param, msg string) (int, []byte) {
	return a.refuse(r, apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "parameter_invalid", param: param, msg: msg})
}

// metadataOf reads the form's prefix[metadata-key] fields.
func metadataOf(form url.Values, prefix string) map[string]string {
	m := map[string]string{}
	for k, v := range form {
		if strings.HasPrefix(k, prefix+"[") && strings.HasSuffix(k, "]") {
			m[strings.TrimSuffix(strings.TrimPrefix(k, prefix+"["), "]")] = v[0]
		}
	}
	return m
}

// createCustomer creates a customer.
func (a *API) createCustomer(form url.Values) (int, []byte) {
	id := a.newID("cus")
	a.customers[id] = metadataOf(form, "metadata")
	return http.StatusOK, fmt.Appendf(nil, `{"id":%q,"object":"customer","email":%s,"livemode":false,"metadata":%s}`,
		id, nullable(form.Get("email")), metadataJSON(a.customers[id]))
}

// createSession creates a Checkout Session: one-off payment of a line
// item's price data, or a setup of a card for an existing customer.
func (a *API) createSession(r *http.Request) (int, []byte) {
	form := r.PostForm
	if status, body, bad := a.missing(r, form, "mode", "success_url"); bad {
		return status, body
	}
	cs := &session{mode: form.Get("mode"), SetupSession: SetupSession{ID: a.newID("cs"), ClientReference: form.Get("client_reference_id"),
		Customer: form.Get("customer"), Currency: form.Get("currency"), Status: "open", Metadata: metadataOf(form, "metadata")}}
	if cs.Customer != "" && a.customers[cs.Customer] == nil {
		return a.noSuch(r, "customer", "customer", cs.Customer)
	}
	if cs.Customer != "" && form.Get("customer_email") != "" {
		return a.invalid(r, "customer_email", "You may only specify one of these parameters: customer, customer_email.")
	}
	switch cs.mode {
	case "payment":
		const item = "line_items[0]"
		if status, body, bad := a.missing(r, form, item+"[quantity]", item+"[price_data][currency]", item+"[price_data][unit_amount]",
			item+"[price_data][product_data][name]"); bad {
			return status, body
		}
		unit, err1 := strconv.ParseInt(form.Get(item+"[price_data][unit_amount]"), 10, 64)
		qty, err2 := strconv.ParseInt(form.Get(item+"[quantity]"), 10, 64)
		if err1 != nil || err2 != nil || unit <= 0 || qty <= 0 {
			return a.invalid(r, item, "Invalid integer")
		}
		a.sessions[cs.ID] = cs
		return http.StatusOK, fmt.Appendf(nil, `{"id":%q,"object":"checkout.session","mode":"payment","amount_total":%d,"currency":%q,`+
			`"client_reference_id":%s,"status":"open","payment_status":"unpaid","url":"https://checkout.stripe.com/c/pay/%s","metadata":%s}`,
			cs.ID, unit*qty, form.Get(item+"[price_data][currency]"), nullable(cs.ClientReference), cs.ID, metadataJSON(cs.Metadata))
	case "setup":
		if status, body, bad := a.missing(r, form, "customer", "currency"); bad {
			return status, body
		}
		if form.Get("payment_method_types[0]") != "" && form.Get("payment_method_types[0]") != "card" {
			return a.invalid(r, "payment_method_types", "The double saves cards only.")
		}
		cs.setupMetadata = metadataOf(form, "setup_intent_data[metadata]")
		a.sessions[cs.ID] = cs
		return http.StatusOK, cs.json()
	}
	return a.invalid(r, "mode", "Invalid mode: must be one of payment, setup or subscription")
}

// retrieveSetupIntent answers a SetupIntent, with its payment method when
// the request expands it.
func (a *API) retrieveSetupIntent(r *http.Request) (int, []byte) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/setup_intents/")
	si := a.setupIntents[id]
	if si == nil {
		return a.noSuch(r, "intent", "setupintent", id)
	}
	pm := strconv.Quote(si.paymentMethod)
	for k, v := range r.Form {
		if (k == "expand[]" || strings.HasPrefix(k, "expand[")) && slices.Contains(v, "payment_method") {
			p := a.paymentMethods[si.paymentMethod]
			pm = string(fmt.Appendf(nil, `{"id":%q,"object":"payment_method","type":"card","customer":%q,`+
				`"card":{"brand":%q,"last4":%q,"exp_month":%d,"exp_year":%d,"funding":"credit","country":"US"}}`,
				p.id, p.customer, p.card.Brand, p.card.Last4, p.card.ExpMonth, p.card.ExpYear))
		}
	}
	return http.StatusOK, fmt.Appendf(nil, `{"id":%q,"object":"setup_intent","status":"succeeded","usage":"off_session",`+
		`"customer":%q,"payment_method":%s,"payment_method_types":["card"],"livemode":false,"metadata":%s}`,
		si.id, si.customer, pm, metadataJSON(si.metadata))
}

// createPaymentIntent creates and confirms, off-session, a PaymentIntent
// on a saved card, once per Idempotency-Key.
func (a *API) createPaymentIntent(r *http.Request) (int, []byte) {
	form := r.PostForm
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return a.refuse(r, apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
			msg: "The double wants an Idempotency-Key on every PaymentIntent creation."})
	}
	params := form.Encode()
	if k := a.idempotent[key]; k != nil {
		k.requests++
		if k.params != params {
			return a.refuse(r, apiError{status: http.StatusBadRequest, typ: "idempotency_error",
				msg: "Keys for idempotent requests can only be used with the same parameters they were first used with. " +
					"Try using a key other than '" + key + "' if you meant to execute a different request."})
		}
		return k.status, k.body
	}
	k := &idempotency{params: params, requests: 1, created: 1}
	k.status, k.body = a.charge(r, form, key)
	if k.status == http.StatusOK || k.status == http.StatusPaymentRequired {
		// Stripe keeps the answer of a request it executed (a charge made
		// or declined), not of one it refused for its parameters
		a.idempotent[key] = k
	}
	return k.status, k.body
}

// charge checks a PaymentIntent's parameters and charges the card as its
// Outcome says.
func (a *API) charge(r *http.Request, form url.Values, key string) (int, []byte) {
	if status, body, bad := a.missing(r, form, "amount", "currency", "customer", "payment_method", "confirm", "off_session"); bad {
		return status, body
	}
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	switch {
	case err != nil || amount <= 0:
		return a.invalid(r, "amount", "Invalid positive integer")
	case len(form.Get("currency")) != 3 || strings.ToLower(form.Get("currency")) != form.Get("currency"):
		return a.invalid(r, "currency", "Invalid currency: "+form.Get("currency"))
	case form.Get("confirm") != "true" || form.Get("off_session") != "true":
		return a.invalid(r, "off_session", "The double charges saved cards with confirm=true and off_session=true only.")
	case a.customers[form.Get("customer")] == nil:
		return a.noSuch(r, "customer", "customer", form.Get("customer"))
	}
	pm := a.paymentMethods[form.Get("payment_method")]
	switch {
	case pm == nil:
		return a.noSuch(r, "payment_method", "PaymentMethod", form.Get("payment_method"))
	case pm.customer != form.Get("customer"):
		return a.invalid(r, "payment_method", "The provided PaymentMethod belongs to another customer.")
	}
	pi := &PaymentIntent{ID: a.newID("pi"), Amount: amount, Currency: form.Get("currency"), Customer: pm.customer, PaymentMethod: pm.id,
		Description: form.Get("description"), Status: "succeeded", Metadata: metadataOf(form, "metadata"), IdempotencyKey: key}
	a.intents[pi.ID] = pi
	a.order = append(a.order, pi.ID)
	o := pm.card.Outcome
	if o == OutcomeSucceed {
		return http.StatusOK, pi.json()
	}
	pi.Status, pi.ErrorCode, pi.DeclineCode = "requires_payment_method", string(o), string(o)
	switch o {
	case OutcomeAuthenticationRequired:
		pi.Status = "requires_action"
	case OutcomeDeclined:
		pi.DeclineCode = "generic_decline"
	}
	pi.ErrorMessage = cmp.Or(declineMessages[o], declineMessages[OutcomeDeclined])
	return http.StatusPaymentRequired, fmt.Appendf(nil, `{"error":{"type":"card_error","code":%q,"decline_code":%q,"message":%q,`+
		`"charge":%q,"payment_intent":%s}}`, pi.ErrorCode, pi.DeclineCode, pi.ErrorMessage, "ch_of_"+pi.ID, pi.json())
}
