#!/usr/bin/env bash
# daemon_admin_listen.sh — --admin-listen ADDR:PORT (issue 24): /metrics, POST
# /v1/admin/reload and the health routes on their own listener, which the API port then no
# longer serves (health stays on both); the API routes are not served on the admin port;
# bad addresses are refused at start.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOT
[{"tenant": "acme", "token_sha256": "$(printf %s tok-acme | sha256sum | cut -c1-64)"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-adm | sha256sum | cut -c1-64)", "subject": "adm", "role": "admin"}]
EOT
chmod 600 "$TOKENS"

for bad in 127.0.0.1 "127.0.0.1:" ":9090" "localhost:9090" "127.0.0.1:70000" "::1:9090" "[::1]9090"; do
    OUT=$(timeout 30 "$TG_BIN" serve --policy "$TG_POLICY" --key "$TG_KEY" --admin-listen "$bad" --check-config 2>&1)
    tg_eq "$?" 2 "--admin-listen '$bad' is refused"
    tg_check "the refusal names the option" grep -q -- '--admin-listen' <<<"$OUT"
done
OUT=$(timeout 30 "$TG_BIN" serve --policy "$TG_POLICY" --key "$TG_KEY" --admin-listen "[::1]:0" --print-config 2>&1)
tg_eq "$?" 0 "--admin-listen [::1]:0 is taken"

tg_std_args main
tg_start main TRIGGUARD_API_KEYS= -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS" --admin-listen 127.0.0.1:0
API=$TG_URL
for _ in $(seq 1 50); do [ -s "$TG_TMP/port-main.admin" ] && break; sleep 0.1; done
ADMIN=http://127.0.0.1:$(cat "$TG_TMP/port-main.admin")
code() { curl -s -o "$TG_TMP/body" -w '%{http_code}' --max-time 10 "$@"; }

tg_eq "$(code "$ADMIN/metrics")" 200 "/metrics on the admin port"
tg_check "the admin port's /metrics is the daemon's" grep -q '^trigguard_build_info{' "$TG_TMP/body"
for r in /healthz /readyz /version; do
    tg_eq "$(code "$ADMIN$r")" 200 "$r on the admin port"
    tg_eq "$(code "$API$r")" 200 "$r still on the API port (load balancers check it)"
done
tg_eq "$(code "$API/metrics")" 404 "/metrics is gone from the API port"
tg_eq "$(code -X POST -H 'Authorization: Bearer tok-adm' "$API/v1/admin/reload")" 404 "reload is gone from the API port"
tg_eq "$(code -X POST -H 'Authorization: Bearer tok-adm' "$ADMIN/v1/admin/reload")" 200 "reload on the admin port"
tg_eq "$(jq -r .result "$TG_TMP/body")" ok "the reload went through"
tg_eq "$(code -X POST -H 'Authorization: Bearer tok-acme' "$ADMIN/v1/admin/reload")" 403 "reload still needs an admin token"
REQ='{"surface":"example","action":"echo","actor":"me"}'
tg_eq "$(code -X POST -H 'Authorization: Bearer tok-acme' -H 'Content-Type: application/json' -d "$REQ" "$ADMIN/v1/evaluate")" 404 \
    "the API is not served on the admin port"
tg_eq "$(code -X POST -H 'Authorization: Bearer tok-acme' -H 'Content-Type: application/json' -d "$REQ" "$API/v1/evaluate")" 200 \
    "the API port decides"
tg_eq "$(code "$ADMIN/.well-known/trigguard/keys.json")" 404 "keys.json is the API's"
tg_check "the log names the admin listener" grep -q '"event":"listening_admin"' "$(tg_logfile main)"
tg_stop main
tg_done
