//go:build !race

package crashtest

const raceEnabled = false
