//go:build race

package crashtest

// raceEnabled: the test binary runs under the race detector, so the
// gateway binary it builds does too.
const raceEnabled = true
