#!/usr/bin/env bash
# The whole test suite: go vet and staticcheck, every package's tests under
# the race detector, then each fuzz target on a bounded number of inputs
# (FUZZTIME, default 100000x), so that the decoders of client requests and
# upstream streams meet fresh inputs on every run. A fuzz failure writes
# its input under the package's testdata/fuzz/; commit it with the fix.
set -euo pipefail
cd "$(dirname "$0")"
# the browser tests keep their screenshots here
export MODELGATE_SCREENSHOTS="${MODELGATE_SCREENSHOTS:-$PWD/screenshots}"

# Static checks first: go vet, and staticcheck (a tool in go.mod), which
# catches, among others, a value assigned and never used, such as an err
# shadowed in an inner block.
go vet ./...
go tool staticcheck ./...
# golangci-lint with .golangci.yml (errcheck, gosec, bodyclose, sqlclosecheck
# and others), built from its own module, tools/lint, so that its many
# dependencies stay out of the gateway's go.mod.
golangci_lint=$(cd tools/lint && go tool -n golangci-lint)
"$golangci_lint" run ./...
# Duplicated production code: clones of 100 tokens or more (some 15 lines) fail the run
# (dupl, a tool in go.mod); fold them into one place.
dups=$(go tool dupl -t 100 $(git ls-files '*.go' | grep -v '_test\.go$'))
if ! grep -q "Found total 0 clone groups" <<<"$dups"; then
	echo "$dups"
	echo "duplicated production code (go tool dupl -t 100): fold it into one place" >&2
	exit 1
fi

echo "go test -race ./...: the first run compiles Caddy and every dependency with the"
echo "race detector (about 10 minutes on 2 cores, quiet but for a note every 30 s);"
echo "later runs reuse the build cache. Skipped tests are listed at the end, failures"
echo "with their own output."
go test -race -count=1 -timeout 30m -json ./... | go run ./internal/testreport

# A count of inputs (N x), not a duration: Go's fuzz coordinator can fail
# a target with a bare "context deadline exceeded" when a -fuzztime
# duration ends while a worker is busy (minimizing a new input, or starved
# of CPU), with nothing found. A count has no deadline.
fuzztime="${FUZZTIME:-100000x}"
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg"
	done
done
