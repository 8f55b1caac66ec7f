#!/usr/bin/env bash
# The project's test command: install what the tests need when it is
# missing (scripts/setup-test.sh), then vet, the generated-docs check, and
# every test, unit and end-to-end (the e2e tests drive the real claude CLI,
# opencode, claude-agent-acp and gemini-cli against fake model servers on
# 127.0.0.1). Extra arguments go to go test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-test.sh
echo "== tests"
go vet ./...
# Everything under the race detector: the tests, and (KAIMON_E2E_RACE) the
# kaimon and kaimon-agentd binaries the end-to-end tests build and drive,
# whose logs and exit codes the tests check for reported races.
KAIMON_E2E_RACE=1 go test -race -count=1 -timeout 25m "$@" ./...
