// Package crashtest holds the end-to-end crash-safety test: it builds the
// gateway's Caddy binary, drives it with traffic in every client format,
// kills it with SIGKILL at random moments, restarts it, and checks the
// ledger. It has no code of its own outside its tests.
package crashtest
