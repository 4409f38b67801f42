//go:build race

package integration

// raceEnabled: the tests run under the race detector, so the gateway
// binaries they build do too.
const raceEnabled = true
