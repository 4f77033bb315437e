#!/usr/bin/env bash
# Run the official MCP client conformance suite on the scenarios mcp_sync covers,
# each at the wire revision it is listed for, and fail when any of them fails.
#
#   bash tests/conformance/run.sh [RUNNER]
#
# RUNNER is the suite's run-client.sh (default: $MCP_CONFORMANCE_RUNNER, else
# ../shared/conformance/run-client.sh beside this checkout). The client under
# test is tests/conformance/client.py run by $PYTHON (default .venv/bin/python).
set -uo pipefail
cd "$(dirname "$0")/../.."
RUNNER=${1:-${MCP_CONFORMANCE_RUNNER:-../shared/conformance/run-client.sh}}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/mcp-sync-conformance.XXXXXX")

# revision:scenario, as the issues that built each capability list them.
SCENARIOS=(
  2025-11-25:initialize 2025-11-25:tools_call 2025-11-25:sse-retry
  2026-07-28:tools_call 2026-07-28:request-metadata 2026-07-28:http-standard-headers
  2026-07-28:http-custom-headers 2026-07-28:http-invalid-tool-headers
  2026-07-28:json-schema-ref-no-deref 2026-07-28:json-schema-2020-12-preservation
  2025-06-18:initialize 2025-06-18:tools_call
  2026-07-28:sep-2322-client-request-state 2025-11-25:elicitation-sep1034-client-defaults
)

[[ -f $RUNNER ]] || { echo "conformance runner not found: $RUNNER" >&2; exit 2; }
bash "$RUNNER" --install-only >/dev/null || { echo "could not install the conformance suite" >&2; exit 2; }

failed=0
for entry in "${SCENARIOS[@]}"; do
  revision=${entry%%:*} scenario=${entry#*:}
  if ! bash "$RUNNER" --command "$PYTHON tests/conformance/client.py" \
      --scenario "$scenario" --spec-version "$revision" -o "$OUT" >"$OUT/$revision-$scenario.out" 2>&1; then
    failed=$((failed + 1))
    grep -E "FAIL|harness exit" "$OUT/$revision-$scenario.out" >&2
  fi
done
grep -h "^conformance client" "$OUT"/*.out
echo "conformance: $((${#SCENARIOS[@]} - failed)) of ${#SCENARIOS[@]} scenarios passed (results in $OUT)"
[[ $failed -eq 0 ]]
