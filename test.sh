#!/usr/bin/env bash
# The whole test suite: every package's tests under the race detector, then
# each fuzz target for a bounded time (FUZZTIME, default 10s), so that the
# decoders of client requests and upstream streams meet fresh inputs on
# every run. A fuzz failure writes its input under the package's
# testdata/fuzz/; commit it with the fix.
set -euo pipefail
cd "$(dirname "$0")"
# the browser tests keep their screenshots here
export MODELGATE_SCREENSHOTS="${MODELGATE_SCREENSHOTS:-$PWD/screenshots}"

go test -race -count=1 -timeout 30m ./...

fuzztime="${FUZZTIME:-10s}"
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
