#!/usr/bin/env bash
# daemon_oidc.sh — OIDC / JWT callers (issue 20) against the real daemon: JWTs signed here by
# keys made here (RS256, ES256, EdDSA), a JWKS served over HTTPS on loopback (lib/jwt_tool.py),
# GitHub-Actions-shaped claims mapped to tenant, subject and actor; every refusal shape (expired,
# not yet valid, wrong audience, wrong issuer, unknown kid, alg none, HS256 keyed with the public
# key, a header alg that is not the key's, oversized tokens and claim sets); key rotation by an
# unknown kid; the issuer going down after a good fetch (still served); a fresh start with the
# issuer down or slow (503 for JWT callers, static tokens still 200); reload (good and bad
# configuration); a flag-configured issuer with a JWKS file; refusals at start.
source "$(dirname "$0")/lib/daemon.sh"

command -v openssl >/dev/null || tg_die "openssl is needed (scripts/deps run)"
python3 -c 'import cryptography' 2>/dev/null || tg_die "python3-cryptography is needed (scripts/deps test)"

JT=$TG_PYLIB/jwt_tool.py
GH=https://token.actions.githubusercontent.com
K=$TG_TMP/keys
W=$TG_TMP/www
mkdir -p "$K" "$W"
jt() { python3 "$JT" "$@"; }

# ---- keys, key sets, the HTTPS JWKS server -------------------------------------------------

jt keygen --kind rsa --out "$K/rsa1.pem"
jt keygen --kind ec --out "$K/ec1.pem"
jt keygen --kind ed --out "$K/ed1.pem"
jt keygen --kind rsa --out "$K/other.pem" # in no set: signs the unknown-kid token
jt keygen --kind ec --out "$K/rot1.pem"
jt keygen --kind ed --out "$K/rot2.pem"
jt keygen --kind ed --out "$K/file1.pem"
jt jwks --out "$W/gh.json" rsa-1="$K/rsa1.pem" ec-1="$K/ec1.pem" ed-1="$K/ed1.pem"
jt jwks --out "$W/rot.json" rot-1="$K/rot1.pem"
jt jwks --out "$TG_TMP/file-jwks.json" file-1="$K/file1.pem"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$TG_TMP/jwks-key.pem" -out "$TG_TMP/jwks-cert.pem" \
    >/dev/null 2>&1 || tg_die "openssl req: cannot make the JWKS server's certificate"

JWKS_PID=""
serve_jwks() { # serve_jwks: starts the JWKS server (again, on a new port), sets JWKS_PORT
    rm -f "$TG_TMP/jwks.port"
    "$TG_PY" "$JT" serve --dir "$W" --cert "$TG_TMP/jwks-cert.pem" --key "$TG_TMP/jwks-key.pem" \
        --port-file "$TG_TMP/jwks.port" &
    JWKS_PID=$!
    local i
    for i in $(seq 1 100); do
        [ -s "$TG_TMP/jwks.port" ] && break
        sleep 0.05
    done
    JWKS_PORT=$(cat "$TG_TMP/jwks.port") || tg_die "the JWKS server did not start"
}
stop_jwks() { [ -z "$JWKS_PID" ] || { kill "$JWKS_PID" 2>/dev/null; wait "$JWKS_PID" 2>/dev/null; JWKS_PID=""; }; }
trap 'stop_jwks; tg_cleanup' EXIT
serve_jwks

# The GitHub-shaped issuer, a second one for key rotation, and one with a JWKS file.
config() { # config FILE AUDIENCE2 [extra member]: the OIDC configuration
    cat >"$1" <<EOF
{"issuers": [
  {"name": "github", "issuer": "$GH", "jwks": "https://127.0.0.1:$JWKS_PORT/jwks/gh",
   "audiences": ["trigguard"$2], "tenant_claim": "repository_owner", "tenants": ["acme", "gamma"],
   "subject": "{sub}", "actors": ["{repository}:{workflow}"]${3:-}},
  {"name": "rot", "issuer": "https://rot.test", "jwks": "https://127.0.0.1:$JWKS_PORT/jwks/rot",
   "audiences": ["trigguard"], "tenant": "acme"},
  {"name": "filed", "issuer": "https://file.test", "jwks": "$TG_TMP/file-jwks.json",
   "audiences": ["trigguard"], "tenant_claim": "org", "role": "caller"}
]}
EOF
}
OIDC_CONF=$TG_TMP/oidc.json
config "$OIDC_CONF" ""
oidc_args() { # oidc_args CONFIG: sets OIDC_ARGS
    OIDC_ARGS=(--oidc-config "$1" --oidc-ca-file "$TG_TMP/jwks-cert.pem" --oidc-refresh 300
        --oidc-timeout 1500 --oidc-connect-timeout 500)
}
oidc_args "$OIDC_CONF"

tg_keygen
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}" "${OIDC_ARGS[@]}"
PID=$(tg_pid main)

ghclaims() { # ghclaims [owner] [workflow]: GitHub Actions ID token claims
    local owner=${1:-acme} wf=${2:-deploy}
    echo "{\"iss\":\"$GH\",\"aud\":\"trigguard\",\"sub\":\"repo:$owner/app:environment:production\",
\"repository\":\"$owner/app\",\"repository_owner\":\"$owner\",\"ref\":\"refs/heads/main\",
\"environment\":\"production\",\"workflow\":\"$wf\",\"actor\":\"octocat\",\"run_id\":\"42\"}"
}
ACTOR_REQ='{"surface":"example","action":"noop","actor":"acme/app:deploy"}'
jwt_eval() { # jwt_eval TOKEN [JSON]: POST /v1/evaluate with the JWT
    tg_req POST /v1/evaluate -H "Authorization: Bearer $1" --json-body "${2:-$ACTOR_REQ}"
}
metric() { # metric 'NAME{labels}': its value in /metrics, or "absent"
    curl -s --max-time 5 "$TG_URL/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? "absent" : v }'
}
hup() { tg_hup "$PID"; }

# ---- valid tokens of each algorithm, mapped to tenant, subject and actor ---------------------

for spec in rsa-1:rsa1 ec-1:ec1 ed-1:ed1; do
    kid=${spec%%:*} key=${spec#*:}
    TOK=$(jt sign --key "$K/$key.pem" --kid "$kid" --claims "$(ghclaims)")
    jwt_eval "$TOK"
    tg_expect_status 200 "$kid: a valid JWT is a caller"
    tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['tenantId'] == 'acme' and j['receipt']['actorId'] == 'acme/app:deploy'" \
        "$kid: tenant from repository_owner, actor from repository:workflow"
done
grep -q '"subject":"repo:acme/app:environment:production"' "$(tg_logfile main)"
tg_check "the access log names the JWT's sub as the subject" test $? -eq 0
tg_eq "$(metric 'trigguard_oidc_verify_total{issuer="github",result="ok"}')" 3 "metrics: three verified"
tg_eq "$(metric 'trigguard_oidc_jwks_keys{issuer="github"}')" 3 "metrics: the set's three keys"
tg_check "metrics: key-set age present" test "$(metric 'trigguard_oidc_jwks_age_seconds{issuer="github"}')" != absent

# A JWT caller that asks for 100 Continue gets it, then its answer: the early token check
# (before the body) must not take a JWT for an unknown static token.
tg_check "Expect: 100-continue with a valid JWT: 100 Continue, then 200" python3 - "${TG_PORTS[main]}" "$TOK" "$ACTOR_REQ" <<'PY'
import socket, sys
port, tok, body = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
          b"Authorization: Bearer " + tok + b"\r\nExpect: 100-continue\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body))
got = s.recv(65536)
assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), got[:300]
s.sendall(body)
while b"\r\n\r\n" not in got.split(b"\r\n\r\n", 1)[1] or b'"decision"' not in got:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
s.close()
assert b"HTTP/1.1 200 OK\r\n" in got and b'"decision":"PERMIT"' in got, got[:400]
PY

# The receipt route and the admin route take JWT callers too.
tg_jget EXEC 'j["receipt"]["executionId"]'
tg_req GET "/v1/receipts/$EXEC" -H "Authorization: Bearer $TOK"
tg_expect_status 200 "GET /v1/receipts with a JWT of the receipt's tenant"
tg_req POST /v1/admin/reload -H "Authorization: Bearer $TOK"
tg_expect_error 403 role_not_allowed "admin reload with a caller JWT"

# A tenant listed by the issuer without any token is reachable; tokens still work beside.
jwt_eval "$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims gamma)")" \
    '{"surface":"example","action":"noop","actor":"gamma/app:deploy"}'
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'gamma'" "a tenant only the issuer lists"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
tg_expect_status 200 "a static token beside the JWT callers"

# ---- 403s for a mapped principal -------------------------------------------------------------

jwt_eval "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --claims "$(ghclaims)")" \
    '{"surface":"example","action":"noop","actor":"someone"}'
tg_expect_error 403 actor_not_allowed "an actor other than repository:workflow"
jwt_eval "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --claims "$(ghclaims evil)")" \
    '{"surface":"example","action":"noop","actor":"evil/app:deploy"}'
tg_expect_error 403 tenant_not_allowed "a repository_owner the daemon does not serve"
jwt_eval "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --claims "$(ghclaims beta)")" \
    '{"surface":"example","action":"noop","actor":"beta/app:deploy"}'
tg_expect_error 403 tenant_not_allowed \
    "a tenant of the tokens (TRIGGUARD_API_KEYS) that the issuer's tenants list leaves out"

# ---- refusals: 401 unauthorized, nothing more said ---------------------------------------------

refuse() { # refuse LABEL TOKEN
    jwt_eval "$2"
    tg_expect_error 401 unauthorized "$1"
    tg_expect_py "'kid' not in j['message'] and 'alg' not in j['message'] and 'exp' not in j['message']" "$1: no detail for the caller"
}
refuse "expired" "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --expired --claims "$(ghclaims)")"
refuse "not yet valid" "$(jt sign --key "$K/ec1.pem" --kid ec-1 --nbf-in 3600 --claims "$(ghclaims)")"
refuse "wrong audience" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims | jq -c '.aud = "someone-else"')")"
refuse "wrong issuer" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims | jq -c '.iss = "https://evil.test"')")"
refuse "alg none" "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --none --claims "$(ghclaims)")"
refuse "HS256 keyed with the public key" "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --hs-secret "$K/rsa1.pem.pub" --claims "$(ghclaims)")"
refuse "header alg is not the key's" "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --alg ES256 --claims "$(ghclaims)")"
refuse "a signature by another key" "$(jt sign --key "$K/ec1.pem" --kid ed-1 --alg EdDSA --claims "$(ghclaims)")"
refuse "oversized token" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --pad 9000 --claims "$(ghclaims)")"
refuse "oversized claim set" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --many-claims 80 --claims "$(ghclaims)")"
refuse "a template's claim missing" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims | jq -c 'del(.workflow)')")"
refuse "tampered claims" "$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims)" | awk -F. -v c="$(printf '%s' "$(ghclaims | jq -c '.repository_owner = "gamma"')" | base64 -w0 | tr '+/' '-_' | tr -d '=')" '{print $1 "." c "." $3}')"

# Unknown kid: the set is fetched again (counted), then the token is refused.
BEFORE=$(metric 'trigguard_oidc_jwks_refresh_total{issuer="github",result="ok"}')
refuse "unknown kid" "$(jt sign --key "$K/other.pem" --kid nobody --claims "$(ghclaims)")"
tg_eq "$(metric 'trigguard_oidc_jwks_refresh_total{issuer="github",result="ok"}')" $((BEFORE + 1)) \
    "unknown kid: one refresh before refusing"
tg_check "metrics: kid_unknown counted" test "$(metric 'trigguard_oidc_verify_total{issuer="github",result="kid_unknown"}')" -ge 1
tg_check "metrics: expired counted" test "$(metric 'trigguard_oidc_verify_total{issuer="github",result="expired"}')" -ge 1
tg_check "metrics: alg_refused counted (before any issuer is chosen)" test "$(metric 'trigguard_oidc_verify_total{issuer="",result="alg_refused"}')" -ge 1
tg_check "metrics: unknown issuer counted" test "$(metric 'trigguard_oidc_verify_total{issuer="",result="unknown_issuer"}')" -ge 1
grep -q 'oidc_refused' "$(tg_logfile main)"
tg_check "the log names the refused check" test $? -eq 0

# ---- rotation: a new key on the server, met by its kid ------------------------------------------

ROT='{"iss":"https://rot.test","aud":"trigguard","sub":"deployer"}'
jwt_eval "$(jt sign --key "$K/rot1.pem" --kid rot-1 --claims "$ROT")" "$(tg_req_json example)"
tg_expect_status 200 "rot: the first key"
jt jwks --out "$W/rot.json" rot-1="$K/rot1.pem" rot-2="$K/rot2.pem"
jwt_eval "$(jt sign --key "$K/rot2.pem" --kid rot-2 --claims "$ROT")" "$(tg_req_json example)"
tg_expect_status 200 "rot: a new kid triggers a refresh, then verifies"

# ---- a JWKS file source ---------------------------------------------------------------------------

FILED='{"iss":"https://file.test","aud":"trigguard","sub":"f","org":"beta"}'
jwt_eval "$(jt sign --key "$K/file1.pem" --kid file-1 --claims "$FILED")" "$(tg_req_json example)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta'" "file JWKS; a tokens tenant (beta) reached by an issuer without a tenants list"

# ---- the server goes down after a good fetch: the last good set keeps serving --------------------

stop_jwks
jwt_eval "$(jt sign --key "$K/ec1.pem" --kid ec-1 --claims "$(ghclaims)")"
tg_expect_status 200 "JWKS server down after a good fetch: still verified"

# ---- reload: the configuration file only ------------------------------------------------------

AUD2=$(jt sign --key "$K/ed1.pem" --kid ed-1 --claims "$(ghclaims | jq -c '.aud = "trigguard2"')")
jwt_eval "$AUD2"
tg_expect_status 401 "audience trigguard2 before the reload"
config "$OIDC_CONF" ',"trigguard2"'
hup
tg_req GET /version
tg_expect_py "j['last_reload']['result'] == 'ok' and 'oidc' in j['last_reload']['reloaded']" "version: oidc reloaded"
tg_eq "$(metric 'trigguard_reload_total{what="oidc",result="ok"}')" 1 "metrics: oidc reload ok"
jwt_eval "$AUD2"
tg_expect_status 200 "audience trigguard2 after the reload (the key set carried over, server still down)"
config "$OIDC_CONF" ',"trigguard2"' ',"bogus": 1'
hup
tg_req GET /version
tg_expect_py "j['last_reload']['result'] == 'failed' and 'bogus' in j['last_reload']['failed']['oidc']" \
    "version: the bad oidc config failed, naming the member"
tg_eq "$(metric 'trigguard_reload_total{what="oidc",result="failed"}')" 1 "metrics: oidc reload failed"
jwt_eval "$AUD2"
tg_expect_status 200 "a failed reload keeps the old configuration"
grep -q 'reload_failed' "$(tg_logfile main)"
tg_check "the failed reload is logged" test $? -eq 0
tg_stop main

# ---- a fresh start with the issuer down: 503 for JWT callers, never 200 -------------------------

DEAD=$(tg_free_port)
sed "s/127.0.0.1:$JWKS_PORT/127.0.0.1:$DEAD/g" "$OIDC_CONF" | jq 'del(.issuers[0].bogus)' >"$TG_TMP/dead.json"
tg_std_args down
oidc_args "$TG_TMP/dead.json"
tg_start down -- "${TG_STD_ARGS[@]}" "${OIDC_ARGS[@]}"
jwt_eval "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --claims "$(ghclaims)")"
tg_expect_error 503 identity_provider_unavailable "fresh start, issuer down: 503"
tg_check "503 says when to retry" test -n "$(tg_header Retry-After)"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
tg_expect_status 200 "fresh start, issuer down: static tokens unaffected"
jwt_eval "$(jt sign --key "$K/file1.pem" --kid file-1 --claims "$FILED")" "$(tg_req_json example)"
tg_expect_status 200 "fresh start, issuer down: a file-sourced issuer unaffected"
tg_check "metrics: failed fetches counted" test "$(metric 'trigguard_oidc_jwks_refresh_total{issuer="github",result="failed"}')" -ge 1
tg_stop down

# ---- a slow issuer: the start is not held up, JWT callers get 503 --------------------------------

serve_jwks
echo 5 >"$W/slow"
config "$TG_TMP/slow.json" ""
tg_std_args slow
oidc_args "$TG_TMP/slow.json"
tg_start slow -- "${TG_STD_ARGS[@]}" "${OIDC_ARGS[@]}"
# (tg_start returning at all shows the start was not held up by the slow fetch)
jwt_eval "$(jt sign --key "$K/rsa1.pem" --kid rsa-1 --claims "$(ghclaims)")"
tg_expect_error 503 identity_provider_unavailable "slow issuer (past the timeout): 503"
tg_stop slow
rm -f "$W/slow"

# ---- an issuer from flags ----------------------------------------------------------------------

tg_std_args flags
tg_start flags -- "${TG_STD_ARGS[@]}" --oidc "ci=https://file.test" --oidc-jwks "ci=$TG_TMP/file-jwks.json" \
    --oidc-audience ci=trigguard --oidc-tenant-claim ci=org --oidc-actor 'ci={sub}'
jwt_eval "$(jt sign --key "$K/file1.pem" --kid file-1 --claims "$FILED")" '{"surface":"example","action":"noop","actor":"f"}'
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta' and j['receipt']['actorId'] == 'f'" "flag issuer: file JWKS, tenant claim, actor template"
jwt_eval "$(jt sign --key "$K/file1.pem" --kid file-1 --claims "$(echo "$FILED" | jq -c '.org = "acme2"')")" "$(tg_req_json example)"
tg_expect_error 403 tenant_not_allowed "flag issuer: a tenant with no tokens"
tg_stop flags

# ---- refused at start (exit 2, the reason named) ------------------------------------------------

refused_start() { # refused_start LABEL WANT args...
    local label=$1 want=$2 out rc
    shift 2
    out=$(timeout 30 "$TG_BIN" serve --port 0 --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-x" "$@" 2>&1 </dev/null)
    rc=$?
    tg_eq "$rc" 2 "$label: exit 2"
    case $out in *"$want"*) tg_pass "$label" ;; *) tg_fail "$label: wanted \"$want\" in: $out" ;; esac
}
refused_start "--oidc without a JWKS" "JWKS" --oidc gh=$GH --oidc-audience gh=a --oidc-tenant-claim gh=o
refused_start "companion flag without --oidc" "no --oidc x=ISSUER" --oidc-audience x=a
refused_start "http JWKS off loopback" "loopback" --oidc gh=$GH --oidc-jwks gh=http://example.com/k \
    --oidc-audience gh=a --oidc-tenant-claim gh=o
echo '{"issuers":[{"name":"a","unknown":1}]}' >"$TG_TMP/bad.json"
refused_start "unknown member in --oidc-config" "issuers[0].unknown: unknown member" --oidc-config "$TG_TMP/bad.json"
echo '{"keys":[]}' >"$TG_TMP/empty-jwks.json"
refused_start "a JWKS file without a usable key" "empty-jwks.json" --oidc gh=$GH --oidc-jwks "gh=$TG_TMP/empty-jwks.json" \
    --oidc-audience gh=a --oidc-tenant-claim gh=o

# The shipped GitHub example passes the start's checks (URLs are not fetched by a check).
out=$(timeout 60 "$TG_BIN" serve --check-config --policy "$TG_POLICY" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-x" --oidc-config "$TG_SRC/examples/oidc-github.json" 2>&1)
tg_eq "$?" 0 "examples/oidc-github.json passes --check-config${out:+: $out}"

tg_done
