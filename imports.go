// Package modelgate is an LLM API gateway for Caddy: one base URL and one API
// key serve many text-generation models from several upstream providers in
// the OpenAI (chat completions, Responses, images), Anthropic Messages and
// Gemini generateContent wire formats, billed per token against a prepaid
// balance, exactly and in real time.
//
// This package only registers the plugin's Caddy modules, so that
//
//	xcaddy build --with github.com/modelgate/modelgate
//
// builds a Caddy with all of them:
//
//	modelgate                        the app: providers, models, plans, the ledger (gateway)
//	http.handlers.modelgate_api      the API routes of every format (gateway)
//	admin.api.modelgate              the admin API on Caddy's admin endpoint (gateway)
//	caddy modelgate …                the command-line tool (gateway)
//	http.handlers.modelgate_console  the customer console (gateway/console)
//	http.handlers.modelgate_status   the public status page (gateway/status)
//	http.handlers.modelgate_lookup   the public usage lookup page (gateway/lookup)
//	http.handlers.modelgate_mock     a fake upstream provider for tests and demos (gateway/mock)
//
// A build that should not carry the mock provider imports the packages it
// wants instead of this one. The work is done by plain-Go packages: relay
// (one request's life and its bill), formats (the wire formats and their
// translation), ledger (money), upstream (providers, keys, health),
// ratelimit, payments, passwords and web. See docs/ for the reference.
package modelgate

import (
	_ "github.com/modelgate/modelgate/gateway"
	_ "github.com/modelgate/modelgate/gateway/console"
	_ "github.com/modelgate/modelgate/gateway/lookup"
	_ "github.com/modelgate/modelgate/gateway/mock"
	_ "github.com/modelgate/modelgate/gateway/status"
)
