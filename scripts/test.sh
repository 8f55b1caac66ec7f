#!/usr/bin/env bash
# The project's test command: vet, the generated-docs check, and every test,
# unit and end-to-end (the e2e tests drive the real claude CLI that
# `npm ci` installs under node_modules/).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -count=1 -timeout 15m "$@" ./...
