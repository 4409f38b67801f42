package integration

import "path/filepath"

// repoRoot is the repository's root as seen from this directory, where go
// test runs the tests.
const repoRoot = ".."

// exampleCaddyfile is the quick start's configuration (README.md), which
// several tests adapt, validate or run.
var exampleCaddyfile = filepath.Join(repoRoot, "Caddyfile.example")
