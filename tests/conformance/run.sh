#!/usr/bin/env bash
# Run the official MCP client conformance suite: the complete requirement set
# of each protocol revision mcp_sync speaks (its not-scored entries, the
# authorization extensions among them, run and print too), plus the
# 2025-06-18 scenarios and the Skills extension scenarios. Fails when any
# scored scenario, any of the authorization extension scenarios or any of the
# Skills extension scenarios fails.
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
CLIENT="$PYTHON tests/conformance/client.py"

# The extension scenarios the authorization issue made ours: not scored by
# the suite, but a failure here is a failure of mcp_sync.
AUTH_EXTENSIONS=(auth/client-credentials-basic auth/client-credentials-jwt
  auth/enterprise-managed-authorization auth/wif-jwt-bearer auth/dpop auth/dpop-nonce)
# The Skills extension (SEP-2640) scenarios: run one by name each, at the
# suite's default wire; a failure of any is a failure of mcp_sync.
SKILLS_EXTENSIONS=(sep-2640-client-no-prefetch sep-2640-client-verify-digest
  sep-2640-client-verify-size sep-2640-client-verify-frontmatter)

[[ -f $RUNNER ]] || { echo "conformance runner not found: $RUNNER" >&2; exit 2; }
bash "$RUNNER" --install-only >/dev/null || { echo "could not install the conformance suite" >&2; exit 2; }

failed=0
run() {  # label, then run-client.sh arguments
  local label=$1; shift
  if ! bash "$RUNNER" --command "$CLIENT" -o "$OUT/$label" "$@" >"$OUT/$label.out" 2>&1; then
    failed=$((failed + 1))
    grep -E "FAIL|harness exit|error" "$OUT/$label.out" >&2
  fi
  grep -h "^conformance client" "$OUT/$label.out"
}

run requirements-2025-11-25 --requirements 2025-11-25
run requirements-2026-07-28 --requirements 2026-07-28
for scenario in initialize tools_call; do
  run "2025-06-18-$scenario" --scenario "$scenario" --spec-version 2025-06-18
done
for scenario in "${SKILLS_EXTENSIONS[@]}"; do
  run "$scenario" --scenario "$scenario"
done

# The verdicts file of each requirements run lists the not-scored scenarios
# it ran and the failures: every auth extension must have run and passed.
for revision in 2025-11-25 2026-07-28; do
  "$PYTHON" - "$OUT/requirements-$revision/$revision.json" "${AUTH_EXTENSIONS[@]}" <<'PY' || failed=$((failed + 1))
import json, sys
verdicts = json.load(open(sys.argv[1]))
bad = [name for name in sys.argv[2:] if name not in verdicts["not_scored"] or name in verdicts["failures"]]
print(f"authorization extensions at {verdicts['label']}: {len(sys.argv) - 2 - len(bad)} of {len(sys.argv) - 2} passed"
      + (f"; failed or missing: {', '.join(bad)}" if bad else ""))
sys.exit(1 if bad else 0)
PY
done

echo "conformance: $failed failing run(s) (results in $OUT)"
[[ $failed -eq 0 ]]
