# lb.sh — an nginx load balancer in a temporary directory in front of some loopback ports, for
# scripts/cluster and the tests that run several instances (docs/POSTGRES.md, "Several
# instances"). Sourced; bash only.
#
#   source "$root/scripts/lib/lb.sh"
#   tg_lb_start 8080 "$port_a" "$port_b" || die "$TG_LB_ERROR"   # sets TG_LB_URL, TG_LB_PID
#   curl "$TG_LB_URL/healthz"
#   tg_lb_stop                            # also run by the EXIT trap tg_lb_start adds
#
# The configuration is unprivileged: everything nginx writes (pid file, error and access logs,
# temporary files) is in the directory, it listens on 127.0.0.1 only, and it runs in the
# foreground (`daemon off`) as a child of the calling shell, so its pid is known without a pid
# file and `wait` collects it. As root the worker process runs as nobody (nginx's default),
# which only needs to enter the directory, not read it.
#
# Balancing: round robin over the given ports. A POST goes to a second instance only when the
# first could not be reached (connection refused or reset before the request was sent):
# `proxy_next_upstream error` without `non_idempotent`, so a POST that reached an instance is
# never sent to another, whatever happens to the first, and a balancer retry can never
# execute a decision twice. (A GET, which changes nothing, is also retried after an error
# reading the answer.) An instance that failed is left out for TG_LB_FAIL_TIMEOUT seconds
# (default 2) and then tried again.
#
# Results (the functions report through these and their status, never by exiting):
#   TG_LB_URL    http://127.0.0.1:PORT
#   TG_LB_PORT   the port;  TG_LB_PID nginx's (master) pid;  TG_LB_DIR the directory
#   TG_LB_CONF   the configuration file;  TG_LB_LOG its error log;  TG_LB_ACCESS its access log
#   TG_LB_ERROR  why the last call failed
# shellcheck shell=bash
# shellcheck disable=SC2034 # the TG_LB_* results are read by the scripts that source this

TG_LB_DIR="" TG_LB_PID="" TG_LB_ERROR=""

# tg_lb_find_bin: sets TG_LB_NGINX to TG_LB_NGINX if set, else nginx from PATH or /usr/sbin
# (where Debian puts it, and which a non-root PATH often lacks).
tg_lb_find_bin() {
    if [ -n "${TG_LB_NGINX:-}" ] && [ -x "$TG_LB_NGINX" ]; then return 0; fi
    TG_LB_NGINX=$(command -v nginx || true)
    [ -n "$TG_LB_NGINX" ] || [ ! -x /usr/sbin/nginx ] || TG_LB_NGINX=/usr/sbin/nginx
    if [ -z "$TG_LB_NGINX" ]; then
        TG_LB_ERROR="nginx not found (install nginx-light: scripts/deps cluster)"
        return 1
    fi
}

# tg_lb_port_ok VALUE: VALUE is a TCP port (1..65535, digits only).
tg_lb_port_ok() {
    [[ $1 =~ ^[0-9]{1,5}$ ]] && [ $((10#$1)) -ge 1 ] && [ $((10#$1)) -le 65535 ]
}

# tg_lb_write_conf FILE PORT UPSTREAM_PORT...: the configuration (see the top of this file).
tg_lb_write_conf() {
    local conf=$1 port=$2 p user=""
    shift 2
    [ "$(id -u)" -ne 0 ] || user="user nobody nogroup;"
    {
        cat <<EOF
# written by scripts/lib/lb.sh for this run only
$user
daemon off;
worker_processes 1;
pid $TG_LB_DIR/nginx.pid;
error_log $TG_LB_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log $TG_LB_DIR/access.log;
    client_body_temp_path $TG_LB_DIR/tmp/body;
    proxy_temp_path $TG_LB_DIR/tmp/proxy;
    fastcgi_temp_path $TG_LB_DIR/tmp/fastcgi;
    uwsgi_temp_path $TG_LB_DIR/tmp/uwsgi;
    scgi_temp_path $TG_LB_DIR/tmp/scgi;
    # trigguard's own limit on a body is 64 KiB by default: let the daemon answer 413.
    client_max_body_size 16m;
    upstream trigguard {
EOF
        for p in "$@"; do
            printf '        server 127.0.0.1:%s max_fails=1 fail_timeout=%ss;\n' \
                "$p" "${TG_LB_FAIL_TIMEOUT:-2}"
        done
        cat <<EOF
        keepalive 32;
        # Below the daemon's idle timeout (--connection-timeout, 30 s by default): nginx must
        # drop an idle connection before the daemon does, or a POST sent on it just as the
        # daemon closes it fails (and is not retried).
        keepalive_timeout 20s;
    }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://trigguard;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            # A POST goes to the next instance only if it was never sent (no
            # non_idempotent, no timeout, no http_5xx): never a POST twice.
            proxy_next_upstream error;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 2s;
            # A decision waits at most for its commit (--ledger-stall-timeout) and the claim
            # (--db-timeout); keep well above both so nginx never cuts one short.
            proxy_read_timeout 60s;
            proxy_send_timeout 60s;
            proxy_buffering off;
        }
    }
}
EOF
    } >"$conf"
}

# tg_lb_start PORT UPSTREAM_PORT...: writes the configuration into a new temporary directory,
# checks it (nginx -t), starts nginx in the background and waits (TG_LB_TIMEOUT seconds,
# default 15) until it answers on PORT. Adds tg_lb_stop to the EXIT trap, in front of
# whatever trap was there. Set TG_LB_SETSID=1 to start it in a session of its own (so a
# Ctrl-C in the terminal reaches only the calling script, which then stops it).
tg_lb_start() {
    local port=$1 p base old_trap i code
    shift
    TG_LB_ERROR=""
    if [ -n "$TG_LB_DIR" ]; then
        TG_LB_ERROR="a balancer is already running in $TG_LB_DIR"
        return 1
    fi
    if ! tg_lb_port_ok "$port"; then
        TG_LB_ERROR="the balancer's port must be 1 to 65535, not '$port'"
        return 1
    fi
    if [ $# -eq 0 ]; then
        TG_LB_ERROR="no upstream port given"
        return 1
    fi
    for p in "$@"; do
        if ! tg_lb_port_ok "$p"; then
            TG_LB_ERROR="an upstream port must be 1 to 65535, not '$p'"
            return 1
        fi
    done
    tg_lb_find_bin || return 1
    base=${TG_LB_TMPDIR:-${TMPDIR:-/tmp}}
    TG_LB_DIR=$(mktemp -d "$base/tg-lb.XXXXXX") || {
        TG_LB_ERROR="cannot create a temporary directory under $base"
        TG_LB_DIR=""
        return 1
    }
    # The trap first: a failure from here on still removes the directory (as in pg.sh).
    local -a prev=()
    eval "prev=($(trap -p EXIT))"
    old_trap=${prev[2]:-}
    # shellcheck disable=SC2064 # the old trap is expanded now, on purpose
    trap "tg_lb_stop; $old_trap" EXIT
    # nobody (the worker as root) must enter the directory to reach its temporary files.
    chmod 0711 "$TG_LB_DIR"
    mkdir "$TG_LB_DIR/tmp"
    TG_LB_PORT=$((10#$port)) TG_LB_CONF=$TG_LB_DIR/nginx.conf
    TG_LB_LOG=$TG_LB_DIR/error.log TG_LB_ACCESS=$TG_LB_DIR/access.log
    TG_LB_URL="http://127.0.0.1:$TG_LB_PORT"
    tg_lb_write_conf "$TG_LB_CONF" "$TG_LB_PORT" "$@"
    # -e: the error log before the configuration is read (the compiled-in one may not be
    # writable); -p: relative paths (none here) would resolve inside the directory.
    if ! "$TG_LB_NGINX" -t -q -p "$TG_LB_DIR" -e "$TG_LB_LOG" -c "$TG_LB_CONF" \
        >"$TG_LB_DIR/check.log" 2>&1; then
        TG_LB_ERROR="nginx refused the configuration: $(tr '\n' ' ' <"$TG_LB_DIR/check.log")"
        return 1
    fi
    local -a cmd=("$TG_LB_NGINX" -p "$TG_LB_DIR" -e "$TG_LB_LOG" -c "$TG_LB_CONF")
    [ "${TG_LB_SETSID:-0}" != 1 ] || cmd=(setsid "${cmd[@]}")
    "${cmd[@]}" >>"$TG_LB_DIR/nginx.out" 2>&1 &
    TG_LB_PID=$!
    # Up once it answers on the port: any HTTP status will do (an instance may be down).
    for ((i = 0; i < ${TG_LB_TIMEOUT:-15} * 20; i++)); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --noproxy '*' \
            "$TG_LB_URL/healthz" 2>/dev/null) || true
        [ "${code:-000}" = 000 ] || return 0
        if ! kill -0 "$TG_LB_PID" 2>/dev/null; then
            wait "$TG_LB_PID" 2>/dev/null
            TG_LB_PID=""
            TG_LB_ERROR="nginx exited at start: $(tail -n 5 "$TG_LB_LOG" "$TG_LB_DIR/nginx.out" 2>/dev/null | tr '\n' ' ')"
            return 1
        fi
        sleep 0.05
    done
    TG_LB_ERROR="nginx did not answer on port $TG_LB_PORT in ${TG_LB_TIMEOUT:-15}s: $(tail -n 5 "$TG_LB_LOG" 2>/dev/null | tr '\n' ' ')"
    return 1
}

# tg_lb_stop: stops nginx (SIGQUIT, a graceful stop; SIGKILL after 10 s) and removes the
# directory (kept when TG_LB_KEEP is set, e.g. to read its logs). Safe to call twice and when
# nothing was started. Returns 1 if nginx had to be killed.
tg_lb_stop() {
    local rc=0 i
    [ -n "$TG_LB_DIR" ] || return 0
    if [ -n "$TG_LB_PID" ]; then
        kill -QUIT "$TG_LB_PID" 2>/dev/null
        for ((i = 0; i < 200; i++)); do
            kill -0 "$TG_LB_PID" 2>/dev/null || break
            sleep 0.05
        done
        if kill -0 "$TG_LB_PID" 2>/dev/null; then
            kill -KILL "$TG_LB_PID" 2>/dev/null
            rc=1
        fi
        wait "$TG_LB_PID" 2>/dev/null
    fi
    if [ -n "${TG_LB_KEEP:-}" ]; then
        echo "lb: kept $TG_LB_DIR" >&2
    else
        rm -rf "$TG_LB_DIR"
    fi
    TG_LB_DIR="" TG_LB_PID=""
    return "$rc"
}
