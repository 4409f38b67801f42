//go:build race

package modelgate

// raceEnabled: the tests run under the race detector, so the gateway
// binaries they build do too.
const raceEnabled = true
