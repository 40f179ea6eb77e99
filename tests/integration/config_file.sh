#!/usr/bin/env bash
# config_file.sh — where serve's options come from (config.h): a flag beats the environment,
# which beats --config FILE, which beats the default; a source is not read for an option a
# source above it set (PORT=8080x cannot break a start that passes --port); TRIGGUARD_<FLAG>
# names with today's names as aliases; the --config format (the one --print-config writes);
# and a daemon started from a config file alone answers a signed PERMIT.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
run_serve() { # run_serve LABEL WANT_RC [VAR=value ...] -- args...   ($OUT: stdout+stderr)
    local label=$1 want=$2
    shift 2
    local -a envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    OUT=$(timeout 30 env -u PORT -u TRIGGUARD_PORT "${envs[@]}" "$TG_BIN" serve "$@" 2>&1)
    local rc=$?
    tg_eq "$rc" "$want" "$label: exit status ($(head -c 300 <<<"$OUT"))"
}
has() { grep -qE "$1" <<<"$OUT"; }

# ---- precedence and the environment's names ------------------------------------------------
run_serve "a malformed PORT beside --port" 0 PORT=8080x -- --print-config --port 1234
tg_check "--port wins, PORT=8080x is never parsed" has '^port = 1234$'
run_serve "a malformed PORT alone" 2 PORT=8080x -- --print-config
tg_check "the error names the variable" has 'environment PORT for port: "8080x" is not an integer'
run_serve "TRIGGUARD_PORT" 0 TRIGGUARD_PORT=2345 -- --print-config
tg_check "TRIGGUARD_PORT sets the port" has '^port = 2345$'
run_serve "TRIGGUARD_PORT and PORT agree" 0 TRIGGUARD_PORT=2345 PORT=2345 -- --print-config
run_serve "TRIGGUARD_PORT and PORT disagree" 2 TRIGGUARD_PORT=2345 PORT=2346 -- --print-config
tg_check "the conflict names both" has 'TRIGGUARD_PORT and PORT are both set'
run_serve "an alias of another prefix" 0 RATE_LIMIT_PER_TENANT=33 -- --print-config
tg_check "RATE_LIMIT_PER_TENANT still works" has '^rate-limit-per-tenant = 33$'
run_serve "its new name" 0 TRIGGUARD_RATE_LIMIT_PER_TENANT=34 -- --print-config
tg_check "TRIGGUARD_RATE_LIMIT_PER_TENANT" has '^rate-limit-per-tenant = 34$'
run_serve "--help" 0 -- --help
tg_check "--help shows both names" has 'env TRIGGUARD_PORT \(or PORT\)'
tg_check "--help shows --config" grep -qF -- '--config FILE' <<<"$OUT"

# ---- --config FILE ---------------------------------------------------------------------------
CONF=$TG_TMP/trigguard.conf
cat >"$CONF" <<CONF
# trigguard.conf for config_file.sh
port = 3456
  max-body=4096
receipt-ttl = "120"
log-level = debug
oidc = gh=https://token.actions.githubusercontent.com
oidc = other=https://issuer.example
CONF
run_serve "--config" 0 -- --print-config --config "$CONF"
tg_check "file: port" has '^port = 3456$'
tg_check "file: indented, no blanks around =" has '^max-body = 4096$'
tg_check "file: a quoted value" has '^receipt-ttl = 120$'
tg_check "file: a list option repeats" bash -c "grep -c '^oidc = ' <<<\"\$0\" | grep -qx 2" "$OUT"
tg_check "print-config names the file" has "^# with --config $CONF\$"
run_serve "the environment beats the file" 0 TRIGGUARD_PORT=4567 -- --print-config --config="$CONF"
tg_check "env over file" has '^port = 4567$'
run_serve "a flag beats both" 0 TRIGGUARD_PORT=4567 -- --print-config --config "$CONF" --port 5678
tg_check "flag over env over file" has '^port = 5678$'
printf 'port = 80x\n' >"$TG_TMP/bad-port.conf"
run_serve "a bad file value under a flag" 0 -- --print-config --config "$TG_TMP/bad-port.conf" --port 1
run_serve "a bad file value" 2 -- --print-config --config "$TG_TMP/bad-port.conf"
tg_check "the error names file and line" has "bad-port.conf:1: port: \"80x\" is not an integer"
printf '# x\nprot = 80\n' >"$TG_TMP/typo.conf"
run_serve "an unknown name" 2 -- --print-config --config "$TG_TMP/typo.conf" --port 1
tg_check "a typo is an error even when a flag sets the option" has 'typo.conf:2: unknown option "prot"'
printf 'port = 1\nport = 2\n' >"$TG_TMP/twice.conf"
run_serve "a name twice" 2 -- --print-config --config "$TG_TMP/twice.conf"
tg_check "given twice" has 'twice.conf:2: port is given twice'
printf 'port 80\n' >"$TG_TMP/noeq.conf"
run_serve "no =" 2 -- --print-config --config "$TG_TMP/noeq.conf"
tg_check "expected name = value" has 'noeq.conf:1: expected "name = value"'
run_serve "a missing file" 2 -- --print-config --config "$TG_TMP/nope.conf"
tg_check "cannot open" has 'nope.conf: cannot open'
run_serve "a directory" 2 -- --print-config --config "$TG_TMP"
head -c 70000 /dev/zero | tr '\0' '#' >"$TG_TMP/big.conf"
run_serve "a file over 64 KiB" 2 -- --print-config --config "$TG_TMP/big.conf"
tg_check "too large" has 'larger than 65536 bytes'
run_serve "--config twice" 2 -- --print-config --config "$CONF" --config "$CONF"

# --print-config's output is a --config file that gives the same configuration.
run_serve "print" 0 -- --print-config --config "$CONF" --policy "$TG_POLICY" --key "$TG_KEY"
grep -v '^# with' <<<"$OUT" >"$TG_TMP/printed.conf"
run_serve "print, read back" 0 -- --print-config --config "$TG_TMP/printed.conf"
tg_eq "$(grep -v '^# with' <<<"$OUT")" "$(cat "$TG_TMP/printed.conf")" "--print-config round-trips through --config"

# ---- a daemon from a config file alone: a signed PERMIT ------------------------------------
printf 'policy = %s\nkey = %s\nledger = %s\nlog-level = info\n' "$TG_SRC/examples/policy.json" \
    "$TG_KEY" "$TG_TMP/ledger-conf" >"$TG_TMP/serve.conf"
tg_start conf -- --config "$TG_TMP/serve.conf"
tg_post /v1/evaluate '{"surface":"example","action":"echo","actor":"me"}'
tg_expect_status 200 "evaluate on the daemon configured by file"
tg_eq "$(tg_body | jq -r .decision)" PERMIT "a PERMIT from the file-configured daemon"
tg_eq "$(jq -r ".receipt.authoritySignature | length > 0" "$TG_BODY_FILE")" true "the receipt is signed"
tg_stop conf
tg_done
