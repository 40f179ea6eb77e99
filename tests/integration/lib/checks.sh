# checks.sh — sourced by the integration tests that start no daemon through lib/daemon.sh:
# counted checks and one verdict at the end.
#
#   source "$(dirname "$0")/lib/checks.sh" bench_page
#   check "label" command args...     # counts a pass, or prints "[bench_page] FAIL: label"
#   ok / fail "message"               # the same by hand
#   checks_done                       # prints the tally; exit status 0 only if nothing failed
#   tg_require openssl ...            # stops the test at once when a tool it needs is missing
#
# Used by bench_page, bench_quick, bench_peerbench, keys_openssl and receipt_interop.
# Also sets py (the system python3: a version-manager shim can take seconds per start) and
# tmp (a temporary directory, removed at exit).
set -uo pipefail
: "${TG_SRC:?TG_SRC must name the repository root}"
TG_CHECKS_NAME=$1
if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
export PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-$TG_CHECKS_NAME.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0 checks=0
ok() { checks=$((checks + 1)); }
fail() { fails=$((fails + 1)); echo "[$TG_CHECKS_NAME] FAIL: $*" >&2; }
check() { local label=$1; shift; if "$@"; then ok; else fail "$label"; fi; }
checks_done() {
    if [ "$fails" -ne 0 ]; then
        echo "[$TG_CHECKS_NAME] FAILED: $fails of $((checks + fails)) checks failed" >&2
        exit 1
    fi
    # tests that only call fail (keys_openssl, receipt_interop) count no passes
    if [ "$checks" -gt 0 ]; then
        echo "[$TG_CHECKS_NAME] PASSED: $checks checks"
    else
        echo "[$TG_CHECKS_NAME] PASSED"
    fi
    exit 0
}
tg_require() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || {
            echo "[$TG_CHECKS_NAME] FAIL: $tool is required for this test (scripts/test installs it)" >&2
            exit 1
        }
    done
}
