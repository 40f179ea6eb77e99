#!/usr/bin/env bash
# canon_cli.sh — `trigguard canon` against the JCS vectors, --sha256, and bad-input behaviour.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_SRC:?TG_SRC must point at the repository root}"

jcs="$TG_SRC/tests/vectors/jcs" # RFC 8785 vectors kept in the repository (its README)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

count=0
for input in "$jcs"/input/*.json "$TG_SRC"/tests/unit/vectors/canon/accept/*.json; do
    case "$input" in
    "$jcs"/*) expected="$jcs/output/$(basename "$input")" ;;
    *) expected="${input%.json}.out" ;;
    esac
    name=$(basename "$input")
    rc=0
    "$TG_BIN" canon <"$input" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name: exit $rc ($(cat "$tmp/err"))"
        continue
    fi
    cmp -s "$tmp/out" "$expected" || fail "$name: output differs from $expected"
    [ -s "$tmp/err" ] && fail "$name: unexpected stderr: $(cat "$tmp/err")"

    # --sha256: hex digest of exactly the canonical bytes, then one newline.
    want="$(sha256sum <"$expected" | cut -d' ' -f1)"
    "$TG_BIN" canon --sha256 <"$input" >"$tmp/hash" || fail "$name: --sha256 exit $?"
    printf '%s\n' "$want" | cmp -s - "$tmp/hash" || fail "$name: --sha256 $(cat "$tmp/hash") != $want"

    count=$((count + 1))
done
[ "$count" -ge 6 ] || fail "only $count vectors found"

# A FILE argument reads the same as stdin.
"$TG_BIN" canon "$jcs/input/weird.json" | cmp -s - "$jcs/output/weird.json" ||
    fail "FILE argument output differs"

# Canonical output is a fixed point.
for expected in "$jcs"/output/*.json; do
    "$TG_BIN" canon <"$expected" | cmp -s - "$expected" || fail "$(basename "$expected"): not a fixed point"
done

# Bad input: exit 2, empty stdout, a message on stderr saying what and where.
bad() {
    local label=$1 want_msg=$2
    local rc=0
    "$TG_BIN" canon <"$tmp/bad" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 2 ] || fail "$label: exit $rc, want 2"
    [ -s "$tmp/out" ] && fail "$label: stdout not empty: $(head -c 100 "$tmp/out")"
    grep -q -- "$want_msg" "$tmp/err" || fail "$label: stderr lacks '$want_msg': $(cat "$tmp/err")"
    return 0
}
printf '{"a":1,\n "a":2}' >"$tmp/bad";        bad duplicate "duplicate member name at line 2"
printf '{"a":[1,2,' >"$tmp/bad";              bad truncated "invalid JSON"
printf '["\xc3\x28"]' >"$tmp/bad";            bad utf8 "invalid UTF-8"
printf '"\\ud800"' >"$tmp/bad";               bad surrogate "lone surrogate"
printf '[NaN]' >"$tmp/bad";                   bad nan "invalid JSON"
printf '[1e999]' >"$tmp/bad";                 bad overflow "NaN or infinite"
printf '' >"$tmp/bad";                        bad empty "invalid JSON"
printf '{}\0{}' >"$tmp/bad";                  bad nul "NUL byte"
head -c 65 /dev/zero | tr '\0' '[' >"$tmp/bad"; head -c 65 /dev/zero | tr '\0' ']' >>"$tmp/bad"
bad too-deep "nesting depth"
printf '{"a":1,"a":2}' >"$tmp/bad"
rc=0
"$TG_BIN" canon --sha256 <"$tmp/bad" >"$tmp/out" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "bad input with --sha256: exit $rc, want 2"
[ -s "$tmp/out" ] && fail "bad input with --sha256: stdout not empty"

# Large input within the limits works; beyond the 16 MiB input cap is refused.
{ printf '['; for i in $(seq 1 2000); do printf '{"k%d":%d.5,"b":"x"},' "$i" "$i"; done; printf '0]'; } >"$tmp/big"
"$TG_BIN" canon <"$tmp/big" >"$tmp/out" || fail "big document: exit $?"
[ "$(head -c 17 "$tmp/out")" = '[{"b":"x","k1":1.' ] || fail "big document: $(head -c 40 "$tmp/out")"
head -c $((16 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$tmp/bad"
rc=0
"$TG_BIN" canon <"$tmp/bad" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || fail "oversized input: exit $rc"
[ -s "$tmp/out" ] && fail "oversized input: stdout not empty"

# Usage errors and help.
rc=0; "$TG_BIN" canon --bogus </dev/null >"$tmp/out" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "--bogus: exit $rc, want 2"
"$TG_BIN" canon --help | grep -q -- "--sha256" || fail "--help does not mention --sha256"
rc=0; "$TG_BIN" canon /nonexistent/file.json >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "missing file: exit $rc, want 2"

if [ "$fails" -ne 0 ]; then
    echo "canon_cli: $fails failure(s)" >&2
    exit 1
fi
echo "canon_cli: $count vectors, all checks passed"
