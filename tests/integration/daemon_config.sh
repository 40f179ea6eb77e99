#!/usr/bin/env bash
# daemon_config.sh — configuration of `trigguard serve`: --help, --print-config (no
# secrets), --check-config, refusals to start, tokens file vs TRIGGUARD_API_KEYS digests,
# the unsafe local auth bypass (loopback only), key id/authority/ttl/rotation options.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
POLICY_ARGS=(--policy "$TG_POLICY")

# runs `trigguard serve ARGS` expecting it to exit by itself; $OUT holds stdout+stderr.
run_serve() { # run_serve LABEL WANT_RC [VAR=value ...] -- args...
    local label=$1 want=$2
    shift 2
    local -a envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    OUT=$(timeout 30 env "${envs[@]}" "$TG_BIN" serve "$@" 2>&1)
    local rc=$?
    tg_eq "$rc" "$want" "$label: exit status"
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' <<<"$OUT"; then
        tg_fail "$label: sanitizer report: $(head -c 2000 <<<"$OUT")"
    fi
}

# ---- --help ----------------------------------------------------------------------------

run_serve "serve --help" 0 -- --help
for want in --listen --port --policy --tokens --ledger --threads --tls-cert --tls-key \
    --log-level --log-format --key --receipt-ttl --max-body --print-config --check-config \
    PORT TG_DECIDE_PORT TRIGGUARD_SIGNING_KEY RATE_LIMIT_PER_TENANT RATE_LIMIT_GLOBAL RATE_LIMIT_VERIFY \
    BULKHEAD_TENANT_MAX_IN_FLIGHT BULKHEAD_GLOBAL_MAX_IN_FLIGHT TRIGGUARD_API_KEYS \
    TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS; do
    tg_check "--help mentions $want" grep -qe "$want" <<<"$OUT"
done
tg_check "--help shows the default port 8080 and listen address 127.0.0.1" \
    grep -q '"8080"' <<<"$OUT"
tg_check "--help shows the default listen address" grep -q '"127.0.0.1"' <<<"$OUT"

# ---- --print-config: effective values, secrets redacted, precedence flag > env > default --

SECRET_TOKEN=tok-very-secret-4711
run_serve "--print-config" 0 TRIGGUARD_API_KEYS="acme:$SECRET_TOKEN" PORT=1234 \
    RATE_LIMIT_PER_TENANT=77 -- --print-config --key "$(cat "$TG_KEY")" "${POLICY_ARGS[@]}"
tg_check "--print-config does not print the API token" bash -c "! grep -q '$SECRET_TOKEN' <<<\"\$0\"" "$OUT"
tg_check "--print-config does not print private key material" bash -c "! grep -q 'PRIVATE KEY' <<<\"\$0\"" "$OUT"
KEY_B64=$(sed -n '/BEGIN PRIVATE KEY/{n;p}' "$TG_KEY")
tg_check "--print-config does not print the key's base64" bash -c "! grep -qF '$KEY_B64' <<<\"\$0\"" "$OUT"
tg_check "--print-config: port from the environment (PORT=1234)" grep -qE '^port = 1234$' <<<"$OUT"
tg_check "--print-config: RATE_LIMIT_PER_TENANT from the environment" grep -qE '^rate-limit-per-tenant = 77$' <<<"$OUT"
tg_check "--print-config: defaults (listen 127.0.0.1, max-body 65536, durability fsync)" \
    bash -c "grep -qE '^listen = 127.0.0.1$' <<<\"\$0\" && grep -qE '^max-body = 65536$' <<<\"\$0\" && grep -qE '^durability = fsync$' <<<\"\$0\"" "$OUT"
# Key text pasted where a path (or a whole PEM) was expected: the base64 body alone is the
# private key, and it must not be echoed back by --print-config or by the startup error.
run_serve "--print-config, --key is bare base64" 0 -- --print-config --key "$KEY_B64" "${POLICY_ARGS[@]}"
tg_check "--print-config does not echo a bare base64 key" bash -c "! grep -qF '$KEY_B64' <<<\"\$0\"" "$OUT"
run_serve "TRIGGUARD_SIGNING_KEY is bare base64" 2 TRIGGUARD_SIGNING_KEY="$KEY_B64" -- "${POLICY_ARGS[@]}" --check-config
tg_check "the startup error does not echo a bare base64 key" bash -c "! grep -qF '$KEY_B64' <<<\"\$0\"" "$OUT"
tg_check "the startup error still says why" grep -q "cannot open key file (the 64-byte value" <<<"$OUT"
run_serve "--print-config, flag over env" 0 PORT=1234 -- --print-config --port 4321
tg_check "--port flag wins over PORT" grep -qE '^port = 4321$' <<<"$OUT"
run_serve "--print-config with the key as a path" 0 -- --print-config --key "$TG_KEY"
tg_check "a key path is shown (it is not a secret)" grep -qF "$TG_KEY" <<<"$OUT"

# ---- --check-config ----------------------------------------------------------------------

run_serve "--check-config, valid" 0 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-check" --port 0 --port-file "$TG_TMP/port-check"
tg_check "--check-config says OK: $OUT" grep -q "configuration OK" <<<"$OUT"
tg_check "--check-config does not listen (no port file)" test ! -e "$TG_TMP/port-check"
printf '{"version":"x","surfaces":{"s":{"tier":1,"rules":[{"id":"r","effect":"permit","when":[{"field":"actor","op":"gtx","value":1}]}]}}}' >"$TG_TMP/bad-policy.json"
run_serve "--check-config, invalid policy" 2 -- --check-config --policy "$TG_TMP/bad-policy.json" \
    --key "$TG_KEY" --ledger "$TG_TMP/ledger-check"
tg_check "invalid policy: the error names the JSON path: $OUT" grep -q 'when\[0\].op' <<<"$OUT"
printf '{"version": ' >"$TG_TMP/broken-policy.json"
run_serve "--check-config, policy not JSON" 2 -- --check-config --policy "$TG_TMP/broken-policy.json" --ledger "$TG_TMP/ledger-check"
run_serve "--check-config, no policy" 2 -- --check-config --key "$TG_KEY" --ledger "$TG_TMP/ledger-check"
tg_check "no policy: says --policy is required: $OUT" grep -q -- "--policy" <<<"$OUT"
run_serve "--check-config, missing policy file" 2 -- --check-config --policy "$TG_TMP/nope.json" --ledger "$TG_TMP/ledger-check"
cp "$TG_KEY" "$TG_TMP/key-0644.pem"
chmod 0644 "$TG_TMP/key-0644.pem"
run_serve "key readable by others" 2 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_TMP/key-0644.pem" --ledger "$TG_TMP/ledger-check"
tg_check "group/other-readable key refused with a reason: $OUT" grep -qi "mode\|permission\|chmod" <<<"$OUT"
printf 'not a key\n' >"$TG_TMP/notakey.pem"
chmod 600 "$TG_TMP/notakey.pem"
run_serve "key file that is not a PEM key" 2 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_TMP/notakey.pem" --ledger "$TG_TMP/ledger-check"
printf '[{"tenant":"acme"}]' >"$TG_TMP/bad-tokens.json"
run_serve "tokens file without digests" 2 -- --check-config "${POLICY_ARGS[@]}" --tokens "$TG_TMP/bad-tokens.json" --ledger "$TG_TMP/ledger-check"
tg_check "bad tokens file: the error names the member: $OUT" grep -q "token_sha256" <<<"$OUT"
run_serve "malformed TRIGGUARD_API_KEYS" 2 TRIGGUARD_API_KEYS="acme" -- --check-config "${POLICY_ARGS[@]}" --ledger "$TG_TMP/ledger-check"
run_serve "unknown option" 2 -- --check-config --no-such-option
tg_check "unknown option named: $OUT" grep -q "no-such-option" <<<"$OUT"
run_serve "port out of range" 2 -- --check-config --port 70000
run_serve "PORT not a number" 2 PORT=eighty -- --check-config
run_serve "bad --durability" 2 -- --check-config --durability sometimes
run_serve "bad --log-format" 2 -- --log-format xml "${POLICY_ARGS[@]}" --ledger "$TG_TMP/ledger-check" --port 0
run_serve "--tls-cert without --tls-key" 2 -- --check-config --tls-cert /dev/null
# A refused start never listens.
run_serve "serve with an invalid policy" 2 -- --policy "$TG_TMP/bad-policy.json" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-check" --port 0 --port-file "$TG_TMP/port-badstart"
tg_check "a refused start writes no port file" test ! -e "$TG_TMP/port-badstart"
tg_check "a refused start logs startup_failed" grep -q "startup_failed" <<<"$OUT"

# Files that are not regular files are refused at once. A FIFO with no writer used to
# block the open() with SIGTERM already blocked, so only SIGKILL ended the process
# (run_serve's `timeout 30` would report exit 124).
mkfifo "$TG_TMP/fifo"
run_serve "--key is a FIFO" 2 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_TMP/fifo" --ledger "$TG_TMP/ledger-check"
tg_check "FIFO key: refused as not a regular file: $OUT" grep -q "not a readable regular file" <<<"$OUT"
run_serve "--policy is a FIFO" 2 -- --check-config --policy "$TG_TMP/fifo" --key "$TG_KEY" --ledger "$TG_TMP/ledger-check"
tg_check "FIFO policy: refused as not a regular file: $OUT" grep -q "policy .*fifo is not a readable regular file" <<<"$OUT"
run_serve "--tokens is a FIFO" 2 -- --check-config "${POLICY_ARGS[@]}" --tokens "$TG_TMP/fifo" --ledger "$TG_TMP/ledger-check"
tg_check "FIFO tokens file: refused as not a regular file: $OUT" grep -q "tokens file .*fifo is not a readable regular file" <<<"$OUT"
run_serve "--verify-keys names a FIFO" 2 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_KEY" --verify-keys "$TG_TMP/fifo" --ledger "$TG_TMP/ledger-check"

# --check-config refuses what serve would refuse, and changes nothing on disk.
for addr in 300.0.0.1 localhost 127.0.0.1:80 ""; do
    run_serve "--check-config, --listen '$addr'" 2 -- --check-config "${POLICY_ARGS[@]}" --listen "$addr" --ledger "$TG_TMP/ledger-check"
    tg_check "--listen '$addr': the refusal names --listen: $OUT" grep -q -- '--listen' <<<"$OUT"
done
run_serve "--check-config with a new ledger directory" 0 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_KEY" --ledger "$TG_TMP/ledger-never-made"
tg_check "--check-config creates no ledger directory" test ! -e "$TG_TMP/ledger-never-made"
run_serve "--check-config, ledger parent missing" 2 -- --check-config "${POLICY_ARGS[@]}" --ledger "$TG_TMP/no-such-dir/ledger"
tg_check "ledger parent missing: explained: $OUT" grep -q "no-such-dir.*not a directory" <<<"$OUT"
run_serve "--check-config, ledger path is a file" 2 -- --check-config "${POLICY_ARGS[@]}" --ledger "$TG_TMP/bad-policy.json"
run_serve "--check-config without tenants" 0 TRIGGUARD_API_KEYS= -- --check-config "${POLICY_ARGS[@]}" --key "$TG_KEY" --ledger "$TG_TMP/ledger-check"
tg_check "no tenants: a warning says every request will get 401: $OUT" grep -q '"no_tenants".*401' <<<"$OUT"

# --verify-keys: an empty entry is refused, and a bad file is named.
for list in ",," "$TG_KEY," ",$TG_KEY"; do
    run_serve "--verify-keys '$list'" 2 -- --check-config "${POLICY_ARGS[@]}" --verify-keys "$list" --ledger "$TG_TMP/ledger-check"
    tg_check "--verify-keys '$list': empty entry named: $OUT" grep -q "empty entry" <<<"$OUT"
done
run_serve "--verify-keys with a non-key file" 2 -- --check-config "${POLICY_ARGS[@]}" --key "$TG_KEY" --verify-keys "$TG_TMP/notakey.pem" --ledger "$TG_TMP/ledger-check"
tg_check "a bad verify key: the error names its file: $OUT" grep -q "notakey.pem: " <<<"$OUT"

# Strict values: SPEC §10's true/false only for the UNSAFE switch, digits only for numbers.
for v in yes 1 TRUE on; do
    run_serve "TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS=$v" 2 TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS="$v" -- --check-config "${POLICY_ARGS[@]}" --ledger "$TG_TMP/ledger-check"
    tg_check "bypass '$v' refused as not true or false: $OUT" grep -q "is not true or false" <<<"$OUT"
done
for v in " 80" "+80" "-1" "80 " "0x50"; do
    run_serve "PORT='$v'" 2 PORT="$v" -- --check-config "${POLICY_ARGS[@]}" --ledger "$TG_TMP/ledger-check"
    tg_check "PORT='$v' refused as not an integer: $OUT" grep -q "is not an integer" <<<"$OUT"
done

# ---- tokens: --tokens file of SHA-256 digests, and TRIGGUARD_API_KEYS digests --------------

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$TG_TMP/tokens.json" <<EOF
[{"tenant": "acme", "token_sha256": "$(sha tok-file-acme)"},
 {"tenant": "beta", "token_sha256": "$(sha tok-file-beta)"}]
EOF
tg_std_args tok
tg_start tok TRIGGUARD_API_KEYS= -- "${TG_STD_ARGS[@]}" --tokens "$TG_TMP/tokens.json"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-file-acme" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'acme'" "--tokens: acme's token"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-file-beta" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta'" "--tokens: beta's token"
tg_req POST /v1/evaluate -H "Authorization: Bearer $(sha tok-file-acme)" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "--tokens: the digest itself is not a token"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "--tokens: a token that is not listed"
tg_stop tok
tg_check "no token or digest in the log" bash -c "! grep -qE 'tok-file|$(sha tok-file-acme)' '$(tg_logfile tok)'"

tg_std_args envsha
tg_start envsha TRIGGUARD_API_KEYS="gamma:sha256:$(sha tok-env-gamma),delta:tok-env-delta" -- \
    "${TG_STD_ARGS[@]}" --tokens "$TG_TMP/tokens.json"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-env-gamma" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'gamma'" "TRIGGUARD_API_KEYS tenant:sha256:<hex>"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-env-delta" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'delta'" "TRIGGUARD_API_KEYS tenant:token"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-file-beta" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta'" "--tokens and TRIGGUARD_API_KEYS together"
tg_req POST /v1/evaluate -H "Authorization: Bearer sha256:$(sha tok-env-gamma)" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "the configured digest is not itself a token"
tg_stop envsha

# ---- TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS ---------------------------------------------------

tg_std_args bypass
tg_start bypass TRIGGUARD_API_KEYS= TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS=true -- "${TG_STD_ARGS[@]}"
tg_req POST /v1/evaluate --json-body "$(tg_req_json permit ',"idempotency_key":"bp-1"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['tenantId'] == 'local'" \
    "bypass on 127.0.0.1: no token needed, tenant local"
tg_jget BP_EXEC 'j["execution_id"]'
tg_req GET "/v1/receipts/$BP_EXEC"
tg_expect_py "s == 200 and j['tenantId'] == 'local'" "bypass: receipts readable as tenant local"
tg_check "the startup log warns about the bypass" grep -qi "unsafe" "$(tg_logfile bypass)"
tg_stop bypass

# IPv6 loopback counts as loopback (when this host has ::1).
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    tg_std_args bypass6
    tg_start bypass6 TRIGGUARD_API_KEYS= TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS=true -- "${TG_STD_ARGS[@]}" --listen ::1
    tg_req POST /v1/evaluate --json-body "$(tg_req_json example)"
    tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'local'" "bypass on ::1 answers without a token"
    tg_check "the listening line puts the IPv6 address in brackets" \
        grep -q '"event":"listening".* on \[::1\]:[0-9]' "$(tg_logfile bypass6)"
    tg_stop bypass6
fi

# Refused on a non-loopback address, before listening.
for addr in 0.0.0.0 ::; do
    PORT_WILD=$(tg_free_port)
    run_serve "bypass with --listen $addr" 2 TRIGGUARD_API_KEYS= TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS=true -- \
        "${POLICY_ARGS[@]}" --key "$TG_KEY" --ledger "$TG_TMP/ledger-wild" --listen "$addr" \
        --port "$PORT_WILD" --port-file "$TG_TMP/port-wild"
    tg_check "bypass on $addr: the refusal names the bypass and loopback: $OUT" \
        bash -c "grep -q 'TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS' <<<\"\$0\" && grep -qi 'loopback' <<<\"\$0\"" "$OUT"
    tg_check "bypass on $addr: never listened (no port file, no listening event)" \
        bash -c "test ! -e '$TG_TMP/port-wild' && ! grep -q '\"listening\"' <<<\"\$0\"" "$OUT"
done
run_serve "--unsafe-local-auth-bypass flag with --listen 0.0.0.0" 2 TRIGGUARD_API_KEYS= -- \
    "${POLICY_ARGS[@]}" --key "$TG_KEY" --ledger "$TG_TMP/ledger-wild" --listen 0.0.0.0 \
    --port 0 --unsafe-local-auth-bypass
tg_check "flag form refused too" grep -q "loopback" <<<"$OUT"

# ---- key from the environment, key id, authority, receipt lifetime, rotation -------------

tg_keygen "$TG_TMP/key-old.pem" itest-key-old
tg_start old -- --policy "$TG_POLICY" --key "$TG_TMP/key-old.pem" --ledger "$TG_TMP/ledger-old" --threads 2
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['authorityKeyId'] == 'itest-key-old'" "receipt signed by the old key"
tg_save_receipt "$TG_TMP/receipt-old.json"
tg_stop old

tg_start rot TRIGGUARD_SIGNING_KEY="$(cat "$TG_KEY")" -- --policy "$TG_POLICY" \
    --verify-keys "$TG_TMP/key-old.pem" --ledger "$TG_TMP/ledger-rot" --authority-id itest-authority \
    --receipt-ttl 1 --threads 2
tg_req GET /.well-known/trigguard/keys.json
tg_expect_py "j['authority'] == 'itest-authority' and sorted((k['keyId'], k['status']) for k in j['keys']) == [('itest-key-1', 'active'), ('itest-key-old', 'verify-only')]" \
    "rotation: keys.json lists the active key and the verify-only key"
cp "$TG_BODY_FILE" "$TG_TMP/keys-rot.json"
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/receipt-old.json")"
tg_expect_py "s == 200 and j['valid'] is True" "rotation: a receipt of the old key still verifies"
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['authorityKeyId'] == 'itest-key-1' and j['receipt']['authorityId'] == 'itest-authority'" \
    "TRIGGUARD_SIGNING_KEY as PEM text signs; --authority-id in the receipt"
tg_expect_py "(iso(j['receipt']['expiresAt']) - iso(j['receipt']['timestamp'])).total_seconds() == 1" "--receipt-ttl 1"
tg_save_receipt "$TG_TMP/receipt-short.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys-rot.json" "$TG_TMP/receipt-old.json" 2>&1)
tg_eq "$?:$out" "0:VALID" "trigguard verify with the rotated keys.json accepts the old key's receipt (within its lifetime)"
sleep 1.3
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/receipt-short.json")"
tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'expired' and j.get('authentic') is True" \
    "an expired receipt: valid false, reason expired, still authentic"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys-rot.json" "$TG_TMP/receipt-short.json" 2>&1)
rc=$?
tg_eq "$rc" 6 "trigguard verify: an expired receipt exits 6 (not 1, a forgery's)"
tg_check "trigguard verify says EXPIRED: $out" grep -q "^EXPIRED: since " <<<"$out"
tg_stop rot

# --log-format text
tg_std_args text
tg_start text -- "${TG_STD_ARGS[@]}" --log-format text
tg_req GET /healthz -H "X-Request-Id: text-log-1"
tg_stop text
tg_check "--log-format text: a plain-text access line with the request id" \
    bash -c "grep 'text-log-1' '$(tg_logfile text)' | grep -qv '^{'"

# ---- a port already taken ------------------------------------------------------------------
# The commonest start failure in operations: another process holds the port. The daemon must
# refuse to start (exit 2, nothing listening, no port file) and say which address and why.
tg_std_args holder
tg_start holder -- "${TG_STD_ARGS[@]}"
taken=${TG_PORTS[holder]}
run_serve "--port already in use" 2 -- "${POLICY_ARGS[@]}" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-taken" --port "$taken" --port-file "$TG_TMP/port-taken"
tg_check "port in use: names the address and the reason: $OUT" \
    grep -q "cannot listen on 127.0.0.1 port $taken: Address already in use" <<<"$OUT"
tg_check "port in use: logged as startup_failed" grep -q "startup_failed" <<<"$OUT"
tg_check "port in use: no port file" test ! -e "$TG_TMP/port-taken"
run_serve "--decide-port already in use" 2 -- "${POLICY_ARGS[@]}" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-taken" --port 0 --decide-port "$taken" --port-file "$TG_TMP/port-taken"
tg_check "decide port in use: names the address and the reason: $OUT" \
    grep -q "cannot listen on 127.0.0.1 port $taken: Address already in use" <<<"$OUT"
tg_check "decide port in use: no port file" test ! -e "$TG_TMP/port-taken"
tg_req GET /readyz
tg_expect_status 200 "the daemon holding the port is unaffected"
tg_stop holder

# ---- no core dumps, no same-user ptrace ------------------------------------------------------
# serve makes itself non-dumpable before loading any secret: a crash writes no core file with
# the signing key in it, and processes of its own user cannot read its memory. Linux shows it
# by giving the process's /proc files to root; so the daemon runs as nobody here, and
# /proc/PID/mem must be root's (nobody's for a dumpable process). Needs root to switch users.
# nobody must reach everything that daemon opens, and the checkout, the build tree and
# $TMPDIR may all lie where it cannot enter (a root user's home is 0700): so the binary,
# policy and key are copied into a directory of its own under /tmp, and it runs from there.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    ND=$(mktemp -d /tmp/tg-nobody.XXXXXX)
    chmod 755 "$ND"
    cp "$TG_BIN" "$ND/trigguard" && cp "$TG_KEY" "$ND/key.pem" && cp "$TG_POLICY" "$ND/policy.json"
    chown -R nobody "$ND"
    # Sanitizer reports go to the daemon's log, which nobody can write (a log_path in the
    # checkout may not be), and are looked for there.
    nobody_env=(env)
    for var in ASAN_OPTIONS TSAN_OPTIONS; do
        [ -n "${!var:-}" ] || continue
        kept=()
        for o in ${!var//:/ }; do
            case $o in log_path=*) ;; *) kept+=("$o") ;; esac
        done
        nobody_env+=("$var=${kept[*]}")
    done
    as_nobody() {
        cd "$ND" && exec setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
            "${nobody_env[@]}" "$@"
    }
    if ! (as_nobody ./trigguard --version) >"$ND/version.out" 2>&1; then
        tg_log "SKIP: the non-dumpable check: nobody cannot run a copy of the binary in $ND: $(head -c 300 "$ND/version.out")"
    else
        (as_nobody TRIGGUARD_API_KEYS="$TG_API_KEYS" ./trigguard serve --policy "$ND/policy.json" \
            --key "$ND/key.pem" --ledger "$ND/ledger" --port 0 --port-file "$ND/port") \
            >"$ND/log" 2>&1 &
        NPID=$! # the subshell execs setpriv, which execs env, which execs the daemon: one pid
        for _ in $(seq 1 200); do [ -s "$ND/port" ] && break; sleep 0.1; done
        tg_check "serve run as nobody starts (log: $(tail -c 600 "$ND/log" | tr '\n' ' '))" test -s "$ND/port"
        tg_eq "$(stat -c %U "/proc/$NPID/mem" 2>/dev/null)" root \
            "serve run as nobody is not dumpable (its /proc/PID/mem belongs to root)"
        tg_eq "$(stat -c %U "/proc/$NPID" 2>/dev/null)" nobody "and it does run as nobody"
        kill -TERM "$NPID"
        wait "$NPID"
        tg_eq "$?" 0 "the nobody daemon stops cleanly"
        if grep -qE '(ERROR|WARNING): (Address|Leak|Thread)Sanitizer|runtime error:' "$ND/log"; then
            tg_fail "the nobody daemon: sanitizer report: $(head -c 2000 "$ND/log")"
        fi
    fi
    rm -rf "$ND"
else
    tg_log "not root (or no setpriv/nobody): the non-dumpable check is skipped"
fi

tg_done
