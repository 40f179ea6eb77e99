#!/usr/bin/env bash
# gate_nginx.sh — GET|POST /v1/gate behind a real nginx (auth_request) in front of a small
# upstream (issue 24): a permitted request reaches the upstream with the receipt's id and hash
# in headers; denied, unmapped, unauthenticated and path-trick requests never do; trigguard
# down -> nginx answers 500, not the upstream. Also the gate's own answers (400 without the
# original request's headers, 403 route_not_mapped) and its receipts (GET /v1/receipts).
source "$(dirname "$0")/lib/daemon.sh"

NGINX=$(command -v nginx || true)
[ -n "$NGINX" ] || [ ! -x /usr/sbin/nginx ] || NGINX=/usr/sbin/nginx
if [ -z "$NGINX" ]; then
    echo "gate_nginx: nginx not installed (scripts/deps test)" >&2
    exit 77
fi
tg_keygen
POLICY=$TG_TMP/policy.json
python3 - "$TG_POLICY" "$POLICY" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["surfaces"]["gate.deploy"] = {
    "tier": 2, "required_context": {"target": "string", "version": "string"},
    "optional_context": {"ref": "string"},
    "rules": [{"id": "staging", "effect": "permit",
               "when": [{"field": "context.target", "op": "eq", "value": "staging"}]},
              {"id": "prod-from-main", "effect": "permit",
               "when": [{"field": "context.target", "op": "eq", "value": "production"},
                        {"field": "context.ref", "op": "eq", "value": "refs/heads/main"}]}],
    "default": "deny"}
p["routes"] = [
    {"method": "POST", "path": "/deploy/{target}/{version}", "surface": "gate.deploy",
     "action": "deploy",
     "context": {"target": "{target}", "version": "{version}", "ref": "header:X-Git-Ref"}},
    {"method": ["GET", "HEAD"], "path": "/docs/*", "surface": "example"}]
json.dump(p, open(sys.argv[2], "w"))
PY
# Routes that cannot work are refused when the bundle loads, naming the path.
bad_route() { # bad_route LABEL ROUTE_JSON EXPECTED_MESSAGE
    python3 - "$POLICY" "$TG_TMP/bad.json" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["routes"] = [json.loads(sys.argv[3])]
json.dump(p, open(sys.argv[2], "w"))
PY
    local out rc=0
    out=$("$TG_BIN" policy check "$TG_TMP/bad.json" 2>&1) || rc=$?
    tg_eq "$rc" 2 "$1: refused"
    tg_check "$1: says '$3'" grep -qF -- "$3" <<<"$out"
}
bad_route "unknown surface" '{"path": "/x", "surface": "nope"}' 'routes[0].surface: must name a surface'
bad_route "unknown method" '{"method": "BREW", "path": "/x", "surface": "example"}' 'routes[0].method:'
bad_route "relative path" '{"path": "x", "surface": "example"}' "routes[0].path: must start with '/'"
bad_route "star not last" '{"path": "/a/*/b", "surface": "example"}' "routes[0].path: '*' must be the last segment"
bad_route "dot-dot" '{"path": "/a/../b", "surface": "example"}' 'routes[0].path: segment 2 is empty'
bad_route "unbound parameter" '{"path": "/a/{x}", "surface": "example", "context": {"y": "{z}"}}' \
    'routes[0].context.y: the path has no parameter {z}'
bad_route "unknown member" '{"path": "/a", "surface": "example", "headers": {}}' 'routes[0].headers: unknown member'

tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}" --policy "$POLICY"
TG_PORT=${TG_PORTS[main]}

# ---- the gate itself ---------------------------------------------------------------------
tg_req GET /v1/gate -H "Authorization: Bearer tok-acme"
tg_expect_error 400 invalid_request "no X-Original-* headers"
tg_req GET /v1/gate -H "Authorization: Bearer tok-acme" -H "X-Original-Method: GET" -H "X-Original-URI: /nowhere"
tg_expect_error 403 route_not_mapped "an unmapped path"
tg_req GET /v1/gate -H "Authorization: Bearer tok-acme" -H "X-Forwarded-Method: GET" -H "X-Forwarded-Uri: /docs/a/b?x=1"
tg_expect_status 200 "X-Forwarded-* (Traefik's names), a GET under /docs"
tg_check "a PERMIT names its receipt" tg_has_header TrigGuard-Execution-Id
for bad in /docs/../deploy/production/1 /docs/%2e%2e/x /docs//x /docs/a%2Fb "/docs/a\\b"; do
    tg_req GET /v1/gate -H "Authorization: Bearer tok-acme" -H "X-Original-Method: GET" -H "X-Original-URI: $bad"
    tg_expect_error 403 route_not_mapped "a path trick: $bad"
done
tg_req POST /v1/gate -H "Authorization: Bearer tok-acme" -H "X-Original-Method: POST" -H "X-Original-URI: /deploy/staging"
tg_expect_error 403 route_not_mapped "a missing path parameter"

# ---- an upstream that records what reaches it --------------------------------------------
UP_LOG=$TG_TMP/upstream.log
: >"$UP_LOG"
UP_PORT=$(tg_free_port)
cat >"$TG_TMP/upstream.py" <<'PY'
import http.server, json, sys
port, log = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n: self.rfile.read(n)
        with open(log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "exec": self.headers.get("TrigGuard-Execution-Id"),
                                "hash": self.headers.get("TrigGuard-Receipt-Hash")}) + "\n")
        body = b"upstream ok\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_HEAD = answer
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
# Stopped at exit by its script's path too: $! may be a wrapper's pid rather than python's.
python3 "$TG_TMP/upstream.py" "$UP_PORT" "$UP_LOG" >"$TG_TMP/upstream.out" 2>&1 &
UP_PID=$!
NG_PID=""
# Chained in front of the EXIT trap already set (lib/daemon.sh's, and scripts/lib/pg.sh's with
# --store postgres), never in place of it: the throwaway cluster must still be removed.
eval "prev_trap=($(trap -p EXIT))"
# shellcheck disable=SC2064 # the previous trap is expanded now, on purpose
trap "kill \$NG_PID \$UP_PID 2>/dev/null; pkill -f '$TG_TMP/upstream.py'; ${prev_trap[2]:-}" EXIT
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$UP_PORT/" && break; sleep 0.1; done
: >"$UP_LOG" # the readiness probe above is not a request under test

# ---- nginx in front: auth_request to the gate --------------------------------------------
NG=$TG_TMP/nginx
mkdir -p "$NG/tmp"
chmod 0711 "$TG_TMP" "$NG"
NG_PORT=$(tg_free_port)
user=""
[ "$(id -u)" -ne 0 ] || user="user nobody nogroup;"
cat >"$NG/nginx.conf" <<NGINX_CONF
$user
daemon off;
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/error.log warn;
events { worker_connections 64; }
http {
    access_log $NG/access.log;
    client_body_temp_path $NG/tmp/body;
    proxy_temp_path $NG/tmp/proxy;
    fastcgi_temp_path $NG/tmp/fastcgi;
    uwsgi_temp_path $NG/tmp/uwsgi;
    scgi_temp_path $NG/tmp/scgi;
    server {
        listen 127.0.0.1:$NG_PORT;
        location / {
            auth_request /_trigguard;
            auth_request_set \$tg_exec \$upstream_http_trigguard_execution_id;
            auth_request_set \$tg_hash \$upstream_http_trigguard_receipt_hash;
            proxy_set_header TrigGuard-Execution-Id \$tg_exec;
            proxy_set_header TrigGuard-Receipt-Hash \$tg_hash;
            proxy_pass http://127.0.0.1:$UP_PORT;
        }
        location = /_trigguard {
            internal;
            proxy_pass http://127.0.0.1:$TG_PORT/v1/gate;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI \$request_uri;
            proxy_set_header X-Original-Method \$request_method;
        }
    }
}
NGINX_CONF
"$NGINX" -t -q -p "$NG" -e "$NG/error.log" -c "$NG/nginx.conf" >"$NG/check.log" 2>&1 ||
    tg_die "nginx refused the configuration: $(cat "$NG/check.log")"
"$NGINX" -p "$NG" -e "$NG/error.log" -c "$NG/nginx.conf" >>"$NG/nginx.out" 2>&1 &
NG_PID=$!
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$NG_PORT/" && break; sleep 0.1; done
NGURL=http://127.0.0.1:$NG_PORT
front() { curl -s -o "$TG_TMP/front.body" -w '%{http_code}' --max-time 20 --path-as-is "$@"; }
upstream_count() { wc -l <"$UP_LOG" | tr -d ' '; }

tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' "$NGURL/deploy/staging/1.2")" 200 "a permitted deploy passes nginx"
tg_eq "$(cat "$TG_TMP/front.body")" "upstream ok" "the upstream answered"
tg_eq "$(upstream_count)" 1 "the upstream saw it"
EXEC=$(tail -1 "$UP_LOG" | jq -r .exec)
HASH=$(tail -1 "$UP_LOG" | jq -r .hash)
tg_check "the upstream got the execution id ($EXEC)" grep -qE '^exec_[0-9a-f]{32}$' <<<"$EXEC"
tg_check "the upstream got the receipt hash ($HASH)" grep -qE '^[0-9a-f]{64}$' <<<"$HASH"
tg_req GET "/v1/receipts/$EXEC" -H "Authorization: Bearer tok-acme"
tg_expect_status 200 "the gate's receipt is stored"
tg_eq "$(tg_body | jq -r '.receipt.receiptHash // .receiptHash')" "$HASH" "the header's hash is the stored receipt's"
tg_eq "$(tg_body | jq -r '.receipt.surface // .surface')" gate.deploy "the receipt's surface"

tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' -H 'X-Git-Ref: refs/heads/main' "$NGURL/deploy/production/1.2")" 200 \
    "a header mapped into the context permits production from main"
tg_eq "$(upstream_count)" 2 "the upstream saw it"
tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' -H 'X-Git-Ref: refs/heads/dev' "$NGURL/deploy/production/1.2")" 403 \
    "production from another ref is denied"
tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' "$NGURL/deploy/production/1.2")" 403 "no ref header: denied"
tg_eq "$(front -X GET -H 'Authorization: Bearer tok-acme' "$NGURL/admin")" 403 "an unmapped path is denied"
tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' "$NGURL/docs/x")" 403 "a mapped path with another method is denied"
tg_eq "$(front -X POST "$NGURL/deploy/staging/1.2")" 401 "no token: 401"
tg_eq "$(front -X POST -H 'Authorization: Bearer tok-nope' "$NGURL/deploy/staging/1.2")" 401 "a bad token: 401"
tg_eq "$(front -X POST -H 'Authorization: Bearer tok-acme' "$NGURL/docs/../deploy/staging/1.2")" 403 \
    "a dot-dot path is denied (nginx would normalize it for the upstream)"
tg_eq "$(upstream_count)" 2 "none of the refused requests reached the upstream"

tg_stop main
code=$(front -X POST -H 'Authorization: Bearer tok-acme' "$NGURL/deploy/staging/1.2")
tg_check "trigguard down: nginx fails closed with a 5xx (got $code)" test "$code" -ge 500
tg_eq "$(upstream_count)" 2 "trigguard down: the upstream never saw it"
tg_done
