//go:build !race

package modelgate

const raceEnabled = false
