#!/usr/bin/env bash
# cli_usage.sh — argument handling of every trigguard subcommand: --help (exit 0, usage on
# stdout, nothing on stderr), unknown options, missing values and arguments, and each
# validation message (the exit code of src/cli/cli.h, the reason on stderr, nothing on stdout).
set -u

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_SRC:?TG_SRC must point at the repository root}"

policy="$TG_SRC/examples/policy.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
umask 022

# `serve` reads these from the environment (src/core/config.c); the cases below mean the
# defaults and the flags they pass, nothing inherited.
for v in $(compgen -e); do
    case $v in
    TRIGGUARD_* | PORT | TG_DECIDE_PORT | RATE_LIMIT_* | BULKHEAD_*) unset "$v" ;;
    esac
done

checks=0
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

IN=/dev/null # standard input of the next case (VAR=... before a case sets it for that case)

# invoke ARGS... — runs the binary; stdout in $out, stderr in $err (and in the files out and
# err), exit status in $rc. Builtins only around the one process: this file runs ~170 of them.
invoke() {
    rc=0
    "$TG_BIN" "$@" <"$IN" >out 2>err || rc=$?
    out="" err=""
    IFS= read -r -d '' out <out || true
    IFS= read -r -d '' err <err || true
}

show() {
    local o=${out:0:300} e=${err:0:300}
    printf 'exit %s; stdout: %s; stderr: %s' "$rc" "${o//$'\n'/|}" "${e//$'\n'/|}"
}

# expect WHERE HOW WANT NAME TEXT ARGS... — one case: exit WANT; stdout or stderr (WHERE:
# out or err) starts with (HOW: prefix) or contains (HOW: in) TEXT, a fixed string; the
# other stream is empty.
expect() {
    local where=$1 how=$2 want=$3 name=$4 text=$5 why="" got other
    shift 5
    checks=$((checks + 1))
    invoke "$@"
    if [ "$where" = out ]; then got=$out other=$err; else got=$err other=$out; fi
    [ "$rc" -eq "$want" ] || why+="exit $rc, want $want; "
    if [ "$how" = prefix ]; then
        [[ $got == "$text"* ]] || why+="std$where does not start with '$text'; "
    else
        [[ $got == *"$text"* ]] || why+="std$where lacks '$text'; "
    fi
    [ -z "$other" ] || why+="the other stream is not empty; "
    [ -z "$why" ] || fail "$name: $why$(show)"
}

# help_ok NAME USAGE ARGS... — exit 0, stdout starts with USAGE, stderr empty.
help_ok() { expect out prefix 0 "$1" "$2" "${@:3}"; }

# err_ok WANT NAME MESSAGE ARGS... — exit WANT, nothing on stdout, MESSAGE on stderr.
err_ok() { expect err in "$1" "$2" "$3" "${@:4}"; }

# out_ok WANT NAME TEXT ARGS... — a result, not an error: exit WANT, TEXT on stdout, nothing
# on stderr.
out_ok() { expect out in "$1" "$2" "$3" "${@:4}"; }

# absent NAME PATH — a refused command left nothing behind.
absent() {
    checks=$((checks + 1))
    [ ! -e "$2" ] || fail "$1: $2 was created"
}

# ---- fixtures: a request, keys, an (expired) signed receipt, a one-record ledger ----
setup_fail() {
    echo "FAIL: setup: $*" >&2
    exit 1
}
printf '%s' '{"surface":"payments.charge","actor":"agent.billing",
 "context":{"amount":20000,"currency":"USD"},"signals":{"riskScore":0.2}}' >req.json
"$TG_BIN" keygen --out k.pem --key-id cli-usage-1 >pub.pem 2>err || setup_fail "keygen: $(cat err)"
"$TG_BIN" keygen --out other.pem >/dev/null 2>err || setup_fail "keygen: $(cat err)"
"$TG_BIN" keys k.pem >keys.json 2>err || setup_fail "keys: $(cat err)"
h=$(printf '%064d' 0 | tr 0 a)
cat >body.json <<EOF
{"protocolVersion":"trigguard/v1","executionId":"exec_$(printf '%032d' 7)","authorityId":"trigguard-local","tenantId":"acme","surface":"payments.charge","action":"transfer_funds","actorId":"agent.billing","decision":"PERMIT","reasonCode":"NO_POLICY_VIOLATION","requestHash":"$h","policyVersion":"2026-11-30.1","policyHash":"$h","protocolFingerprint":"$h","engineVersion":"trigguard/0.1.0","timestamp":"2021-01-01T00:00:00.000Z","expiresAt":"2021-01-01T00:10:00.000Z"}
EOF
"$TG_BIN" receipt sign --key k.pem <body.json >r.json 2>err || setup_fail "receipt sign: $(cat err)"
"$TG_BIN" ledger append L r.json >/dev/null 2>err || setup_fail "ledger append: $(cat err)"
head_hash=$("$TG_BIN" ledger verify L | sed -n 's/^  head hash:  \([0-9a-f]\{64\}\)$/\1/p')
[ -n "$head_hash" ] || setup_fail "no head hash in ledger verify output"
when=2021-01-01T00:05:00.000Z # inside the receipt's lifetime
printf '{"surface":' >truncated.json
mkdir adir

# ---- trigguard itself (src/cli/main.c) ----
err_ok 2 "no command" "usage: trigguard <command>" # no arguments at all: usage on stderr
help_ok "--help" "usage: trigguard <command>" --help
cp out help.out
help_ok "-h" "usage: trigguard <command>" -h
help_ok "help" "usage: trigguard <command>" help
vline="^trigguard [0-9]+\.[0-9]+\.[0-9]+[^ ]* \(protocol trigguard/v1, commit [^)]+\)$"
out_ok 0 "--version" "(protocol trigguard/v1, commit " --version
checks=$((checks + 1))
{ [ "$(wc -l <out)" -eq 1 ] && grep -Eq "$vline" out; } || fail "--version format: $(show)"
cp out version.out
out_ok 0 "version" "(protocol trigguard/v1, commit " version
checks=$((checks + 1))
cmp -s out version.out || fail "version and --version differ: $(show)"
err_ok 2 "version with an argument" "trigguard: version takes no arguments" version extra
err_ok 2 "--version with an argument" "trigguard: --version takes no arguments" --version extra
err_ok 2 "unknown command" "trigguard: unknown command 'frobnicate'" frobnicate
err_ok 2 "empty command" "unknown command ''" ""
checks=$((checks + 1))
grep -q "^usage: trigguard <command>" err || fail "unknown command: no usage on stderr: $(show)"

# Every command of tg_commands[] is listed by --help, has a --help of its own, and has cases
# in this file: a new command must bring its usage cases here.
known="canon check db keygen keys ledger log policy receipt serve token verify"
table=$(sed -n 's/^ *{"\([a-z-]*\)", tg_cmd_[a-z_]*,.*/\1/p' "$TG_SRC/src/cli/main.c" | sort | xargs)
listed=$(sed -n 's/^  \([a-z-]*\)  .*/\1/p' help.out | grep -vx version | sort | xargs)
checks=$((checks + 1))
[ -n "$table" ] && [ "$table" = "$known" ] ||
    fail "tg_commands[] is '$table', this test covers '$known': add the new command's cases"
checks=$((checks + 1))
[ "$listed" = "$table" ] || fail "--help lists '$listed', tg_commands[] has '$table'"
for c in $table; do
    help_ok "$c --help" "usage: trigguard $c" "$c" --help
done

# ---- canon ----
err_ok 2 "canon unknown option" "trigguard canon: unknown option '--frobnicate'" canon --frobnicate
err_ok 2 "canon two files" "trigguard canon: more than one input file" canon req.json req.json
err_ok 2 "canon missing file" "cannot open nofile.json" canon nofile.json
err_ok 2 "canon directory" "adir is not a readable regular file" canon adir
IN=truncated.json err_ok 2 "canon invalid stdin" "trigguard canon: stdin:" canon

# ---- check ----
need="trigguard check: --policy FILE and a request file are required"
err_ok 2 "check no request" "$need" check --policy "$policy"
err_ok 2 "check no --policy" "$need" check req.json
err_ok 2 "check --policy without value" "trigguard check: --policy needs a value" check --policy
err_ok 2 "check --receipt-ttl without value" "--receipt-ttl needs a value" \
    check --policy "$policy" --receipt-ttl
err_ok 2 "check unknown option" "trigguard check: unknown option '--frobnicate'" \
    check --policy "$policy" --frobnicate req.json
err_ok 2 "check two request files" "trigguard check: more than one request file" \
    check --policy "$policy" req.json req.json
ttl="trigguard check: --receipt-ttl must be 1..31536000 seconds"
for bad in 0 31536001 10s; do
    err_ok 2 "check --receipt-ttl '$bad'" "$ttl" check --policy "$policy" --receipt-ttl "$bad" req.json
done
for good in 1 31536000; do # the bounds themselves are accepted (the request is a DENY)
    out_ok 3 "check --receipt-ttl $good" '"decision":"DENY"' \
        check --policy "$policy" --key k.pem --receipt-ttl "$good" req.json
done
err_ok 2 "check --tenant ''" "trigguard check: --tenant must not be empty" \
    check --policy "$policy" --tenant "" req.json
err_ok 2 "check missing policy" "cannot open policy nopolicy.json" check --policy nopolicy.json req.json
err_ok 2 "check missing request" "cannot open nofile.json" check --policy "$policy" nofile.json
err_ok 2 "check missing key" "trigguard check: key: cannot open key file nokey.pem" \
    check --policy "$policy" --key nokey.pem req.json
err_ok 2 "check public key" "pub.pem holds a public key" check --policy "$policy" --key pub.pem req.json
err_ok 2 "check invalid --key-id" "invalid key id" \
    check --policy "$policy" --key k.pem --key-id "bad id" req.json
# an empty --authority-id means "not given", as for serve: the policy's authority
out_ok 3 "check empty --authority-id" '"authorityId":"trigguard-local"' \
    check --policy "$policy" --key k.pem --authority-id "" req.json
err_ok 2 "check --authority-id not UTF-8" "authorityId is not valid UTF-8" \
    check --policy "$policy" --key k.pem --authority-id $'\xff' req.json
# the receipt's options without --key (there is no receipt): refused, not silently ignored
noreceipt="trigguard check: --key-id, --authority-id and --receipt-ttl need --key"
err_ok 2 "check --key-id without --key" "$noreceipt" check --policy "$policy" --key-id k-1 req.json
err_ok 2 "check --authority-id without --key" "$noreceipt" \
    check --policy "$policy" --authority-id a req.json
err_ok 2 "check --receipt-ttl without --key" "$noreceipt" \
    check --policy "$policy" --receipt-ttl 5 req.json

# ---- keygen ----
help_ok "keygen --help wins" "usage: trigguard keygen" keygen --out new.pem --help
absent "keygen --help" new.pem
err_ok 2 "keygen no --out" "trigguard keygen: --out FILE is required" keygen
err_ok 2 "keygen --out without value" "trigguard keygen: unexpected argument '--out'" keygen --out
err_ok 2 "keygen --key-id without value" "unexpected argument '--key-id'" keygen --out new.pem --key-id
absent "keygen --key-id without value" new.pem
err_ok 2 "keygen unknown option" "unexpected argument '--frobnicate'" keygen --frobnicate
err_ok 2 "keygen --out twice" "unexpected argument '--out'" keygen --out new.pem --out new2.pem
absent "keygen --out twice" new.pem
err_ok 2 "keygen --out -" "--out - is refused" keygen --out -
absent "keygen --out -" ./-
kid="trigguard keygen: invalid --key-id (want 1..64 chars of [A-Za-z0-9._:-])"
err_ok 2 "keygen bad --key-id" "$kid" keygen --out new.pem --key-id "bad id"
absent "keygen bad --key-id" new.pem
cp k.pem k.pem.orig
err_ok 2 "keygen existing file" "k.pem already exists" keygen --out k.pem
checks=$((checks + 1))
cmp -s k.pem k.pem.orig || fail "keygen existing file: k.pem was changed"
err_ok 2 "keygen unwritable" "cannot create nodir/new.pem" keygen --out nodir/new.pem

# ---- keys ----
err_ok 2 "keys no files" "trigguard keys: no key files given" keys
err_ok 2 "keys --authority without value" "trigguard keys: --authority needs a value" keys k.pem --authority
err_ok 2 "keys unknown option" "trigguard keys: unknown option '--frobnicate'" keys --frobnicate k.pem
err_ok 2 "keys missing file" "cannot open key file nokey.pem" keys nokey.pem
err_ok 2 "keys not a PEM" "no -----BEGIN line found" keys req.json
err_ok 2 "keys same key twice" "the same key id or public key was given twice" keys k.pem k.pem
cp other.pem loose.pem && chmod 0644 loose.pem
err_ok 2 "keys group-readable key" "readable by group or others" keys loose.pem
# an empty --authority is refused (every receipt needs a non-empty authorityId), like check's
# empty --tenant
err_ok 2 "keys --authority ''" "--authority" keys --authority "" k.pem

# ---- receipt ----
help_ok "receipt -h" "usage: trigguard receipt sign" receipt -h
help_ok "receipt sign --help" "usage: trigguard receipt sign" receipt sign --help
err_ok 2 "receipt without subcommand" "usage: trigguard receipt sign" receipt
err_ok 2 "receipt unknown subcommand" "trigguard receipt: unknown subcommand 'frob'" receipt frob
err_ok 2 "receipt sign no --key" "trigguard receipt sign: --key KEY.pem is required" receipt sign
err_ok 2 "receipt sign --key without value" "unexpected argument '--key'" receipt sign --key
err_ok 2 "receipt sign unknown option" "receipt sign: unexpected argument '--frobnicate'" \
    receipt sign --key k.pem --frobnicate
err_ok 2 "receipt sign extra argument" "unexpected argument 'body.json'" receipt sign --key k.pem body.json
err_ok 2 "receipt sign missing key" "cannot open key file nokey.pem" receipt sign --key nokey.pem
err_ok 2 "receipt sign public key" "pub.pem holds a public key" receipt sign --key pub.pem
IN=truncated.json err_ok 2 "receipt sign invalid JSON" "trigguard receipt sign: input is not valid JSON" \
    receipt sign --key k.pem
printf '[1]' >array.json
IN=array.json err_ok 2 "receipt sign array" "a receipt must be a JSON object" receipt sign --key k.pem
IN=req.json err_ok 2 "receipt sign unknown member" "receipt is malformed: unknown member" \
    receipt sign --key k.pem
IN=body.json err_ok 2 "receipt sign bad --key-id" "invalid key id" receipt sign --key k.pem --key-id "a b"

# ---- verify ----
vneed="trigguard verify: need --keys keys.json (or --key KEY.pem, --log-key VKEY) and a receipt file"
err_ok 2 "verify no keys" "$vneed" verify r.json
err_ok 2 "verify no receipt" "$vneed" verify --keys keys.json
err_ok 2 "verify --consistency alone" "trigguard verify: --consistency goes with --checkpoint" \
    verify --keys keys.json --consistency c.json r.json
err_ok 2 "verify bad --log-key" "trigguard verify: --log-key a+b+c: not a verifier key" \
    verify --log-key a+b+c r.json
err_ok 2 "verify --keys without value" "trigguard verify: unexpected argument '--keys'" verify r.json --keys
err_ok 2 "verify --now without value" "unexpected argument '--now'" verify --keys keys.json r.json --now
nownot="is not an RFC 3339 time between 1970 and 9999, like 2026-11-30T05:40:10.123Z or 2026-11-30T07:40:10+02:00"
err_ok 2 "verify bad --now" "trigguard verify: --now 'yesterday' $nownot" \
    verify --keys keys.json --now yesterday r.json
# RFC 3339 needs the offset, the "T" and the seconds; it has no leap second in Unix time
for bad in 2021-01-01T00:05:00 "2021-01-01 00:05:00Z" 2021-01-01T00:05Z 2021-01-01T00:05:60Z \
    2021-01-01T00:05:00+0200 1970-01-01T00:30:00+01:00; do
    err_ok 2 "verify --now $bad" "--now '$bad' $nownot" verify --keys keys.json --now "$bad" r.json
done
err_ok 2 "verify unknown option" "unexpected argument '--frobnicate'" verify --keys keys.json --frobnicate r.json
err_ok 2 "verify two receipts" "unexpected argument 'r.json'" verify --keys keys.json r.json r.json
err_ok 2 "verify missing keys.json" "cannot open nokeys.json" verify --keys nokeys.json r.json
err_ok 2 "verify bad keys.json" "trigguard verify: req.json: keys.json:" verify --keys req.json r.json
err_ok 2 "verify missing key file" "cannot open key file nokey.pem" verify --key nokey.pem r.json
err_ok 2 "verify missing receipt" "cannot open noreceipt.json" verify --keys keys.json noreceipt.json
err_ok 2 "verify receipt not JSON" "truncated.json is not a usable receipt document" \
    verify --keys keys.json truncated.json
# a verdict is a result: stdout, exit 0 or 1, nothing on stderr
out_ok 0 "verify VALID" "VALID" verify --keys keys.json --now "$when" r.json
checks=$((checks + 1))
[ "$out" = $'VALID\n' ] || fail "verify VALID by key id printed more than VALID: $(show)"
# --now: any RFC 3339 time, the same instant however it is written
for now in 2021-01-01T02:05:00+02:00 2020-12-31T19:05:00.000-05:00 2021-01-01t00:05:00.123456789z \
    2021-01-01T00:09:59.9999Z; do
    out_ok 0 "verify --now $now" "VALID" verify --keys keys.json --now "$now" r.json
done
# expiry has its own verdict and exit status: authentic, but no longer authorizing
expired="EXPIRED: since 2021-01-01T00:10:00.000Z (now "
out_ok 6 "verify expired" "$expired" verify --keys keys.json r.json
out_ok 6 "verify expired at expiresAt" "${expired}2021-01-01T00:10:00.000Z); the signature and hash hold" \
    verify --keys keys.json --now 2021-01-01T02:10:00+02:00 r.json
checks=$((checks + 1))
[[ $out != *INVALID* ]] || fail "an expired receipt is called INVALID: $(show)"
out_ok 1 "verify unknown key" "INVALID: unknown_key" verify --key other.pem --now "$when" r.json
# a key file without its trigguard-key-id line (as openssl writes it) still verifies what
# it signed, and the output says which file did
grep -v '^trigguard-key-id:' pub.pem >noid.pem
out_ok 0 "verify --key without key id" "VALID (signed by --key noid.pem, key id tg-" \
    verify --key noid.pem --now "$when" r.json
out_ok 6 "verify --key without key id, expired" "(signed by --key noid.pem, key id tg-" \
    verify --key noid.pem r.json
# keys.json still matches by id: the same key listed under another id is unknown_key
"$TG_BIN" keys noid.pem >noid.keys.json 2>err || fail "keys noid.pem: $(cat err)"
out_ok 1 "verify --keys matches by key id" "INVALID: unknown_key" \
    verify --keys noid.keys.json --now "$when" r.json
help_ok "verify --help" "usage: trigguard verify" verify --help
checks=$((checks + 1))
[[ $out == *"6 EXPIRED"* && $out == *"RFC 3339"* ]] || fail "verify --help lacks exit 6 or RFC 3339: $(show)"

# ---- policy ----
help_ok "policy -h" "usage: trigguard policy check FILE" policy -h
help_ok "policy check --help" "usage: trigguard policy check FILE" policy check --help
# --help anywhere, as every other command takes it
help_ok "policy check FILE --help" "usage: trigguard policy check FILE" policy check "$policy" --help
err_ok 2 "policy without subcommand" "usage: trigguard policy check FILE" policy
err_ok 2 "policy check without FILE" "usage: trigguard policy check FILE" policy check
err_ok 2 "policy check two files" "usage: trigguard policy check FILE" policy check "$policy" "$policy"
err_ok 2 "policy unknown subcommand" "trigguard policy: unknown subcommand 'frob'" policy frob "$policy"
err_ok 2 "policy check missing file" "cannot open policy nopolicy.json" policy check nopolicy.json
err_ok 2 "policy check invalid" "trigguard policy check: req.json: surface: unknown member" \
    policy check req.json

# ---- db (tests/integration/db_migrate.sh runs it against a server) ----
dusage="usage: trigguard db migrate [--database-url URL]"
help_ok "db -h" "$dusage" db -h
help_ok "db migrate --help" "$dusage" db migrate --help
err_ok 2 "db without subcommand" "trigguard db: no subcommand given" db
err_ok 2 "db unknown subcommand" "trigguard db: unknown subcommand 'frob'" db frob
err_ok 2 "db two subcommands" "trigguard db: unexpected argument 'status'" db migrate status
err_ok 2 "db unknown option" "trigguard db: unexpected argument '--frobnicate'" db migrate --frobnicate
err_ok 2 "db --database-url without value" "trigguard db: --database-url needs a value" \
    db migrate --database-url
err_ok 2 "db migrate without a URL" "trigguard db migrate: no database: give --database-url" db migrate
err_ok 2 "db status with an empty URL" "trigguard db status: no database" db status --database-url ""
err_ok 2 "db migrate unparseable URL" "trigguard db migrate: the database URL does not parse" \
    db migrate --database-url "postgresql://%zz"
TRIGGUARD_DATABASE_URL="not a conninfo" err_ok 2 "db status unparseable URL from the environment" \
    "trigguard db status: the database URL does not parse" db status

# ---- ledger ----
lusage="usage: trigguard ledger verify PATH"
help_ok "ledger -h" "$lusage" ledger -h
help_ok "ledger help" "$lusage" ledger help
help_ok "ledger verify --help" "$lusage" ledger verify --help
help_ok "ledger dump -h" "$lusage" ledger dump -h
help_ok "ledger append --help" "$lusage" ledger append --help
err_ok 2 "ledger without subcommand" "$lusage" ledger
err_ok 2 "ledger unknown subcommand" "trigguard ledger: unknown subcommand 'frob'" ledger frob L
err_ok 2 "ledger verify no PATH" "trigguard ledger verify: PATH is required" ledger verify
err_ok 2 "ledger dump no PATH" "trigguard ledger dump: PATH is required" ledger dump
err_ok 2 "ledger verify unknown option" "ledger verify: unexpected argument '--frobnicate'" \
    ledger verify L --frobnicate
err_ok 2 "ledger verify two paths, the second no ledger" "L2: not a ledger directory" ledger verify L L2
err_ok 2 "ledger verify --head without value" "unexpected argument '--head'" ledger verify L --head
hexmsg="trigguard ledger verify: --head wants 64 hex characters"
err_ok 2 "ledger verify --head not hex" "$hexmsg" ledger verify L --head "$(printf '%064d' 0 | tr 0 g)"
err_ok 2 "ledger verify --head 63 hex" "$hexmsg" ledger verify L --head "${head_hash:1}"
out_ok 0 "ledger verify --head matches" "ledger OK: L" ledger verify L --head "$head_hash"
out_ok 1 "ledger verify --head differs" "head hash differs from --head" \
    ledger verify L --head "$(printf '%064d' 0)"
err_ok 2 "ledger verify missing path" "trigguard ledger verify: noledger" ledger verify noledger
err_ok 2 "ledger verify missing key file" "cannot open key file nokey.pem" ledger verify L --key nokey.pem
err_ok 2 "ledger dump --json" "trigguard ledger dump: unexpected argument '--json'" \
    ledger dump L --json # dump takes no options

aneed="trigguard ledger append: DIR and at least one FILE are required"
err_ok 2 "ledger append no DIR" "$aneed" ledger append
err_ok 2 "ledger append no FILE" "$aneed" ledger append L2
err_ok 2 "ledger append unknown option" "ledger append: unexpected argument '--frobnicate'" \
    ledger append L2 --frobnicate r.json
err_ok 2 "ledger append --meta without value" "unexpected argument '--meta'" ledger append L2 --meta
sb="trigguard ledger append: --segment-bytes wants a number"
for bad in abc 0; do
    err_ok 2 "ledger append --segment-bytes '$bad'" "$sb" ledger append L2 --segment-bytes "$bad" r.json
done
# digits only: strtoull alone would take "-1" as 2^64-1
err_ok 2 "ledger append --segment-bytes -1" "$sb" ledger append L6 --segment-bytes -1 r.json
err_ok 2 "ledger append --durability bogus" "trigguard ledger append: --durability fsync|batch|none" \
    ledger append L2 --durability bogus r.json
meta_max=$(printf '%016384d' 0) # TG_LEDGER_META_MAX
err_ok 2 "ledger append --meta too long" "trigguard ledger append: --meta is longer than 16384 bytes" \
    ledger append L2 --meta "${meta_max}1" r.json
absent "refused ledger appends" L2
out_ok 0 "ledger append --meta at the limit" "seq 1 segment 1 offset 0" \
    ledger append L3 --meta "$meta_max" r.json
err_ok 2 "ledger append missing FILE" "cannot open nofile.json" ledger append L4 nofile.json
err_ok 2 "ledger append uncreatable DIR" "cannot create ledger directory" ledger append nodir/L r.json
# an option after the first FILE is refused before anything is appended (exit 2 means
# nothing was written)
err_ok 2 "ledger append option after FILE" "unexpected argument '--frobnicate'" \
    ledger append L5 r.json --frobnicate
absent "ledger append option after FILE" L5/ledger-000001.tgl

# ---- log (tests/integration/daemon_batch_receipts.sh covers what log audit does) ----
ausage="usage: trigguard log audit URL|DIR"
help_ok "log -h" "$ausage" log -h
help_ok "log audit --help" "$ausage" log audit --help
err_ok 2 "log without subcommand" "$ausage" log
err_ok 2 "log unknown subcommand" "trigguard log: unknown subcommand frob" log frob
err_ok 2 "log audit no target" "trigguard log audit: URL or DIR is required" log audit
err_ok 2 "log audit unknown option" "trigguard log audit: unexpected argument '--frob'" \
    log audit L --frob
err_ok 2 "log audit --keep 0" "trigguard log audit: --keep wants 1..1024" log audit L --keep 0
err_ok 2 "log audit bad --log-key" "trigguard log audit: --log-key x+y: not a verifier key" \
    log audit L --log-key x+y
err_ok 2 "log audit a ledger without a log" "has no stored checkpoint" log audit L

# ---- token (tests/integration/token_cli.sh covers what it does) ----
help_ok "token --help wins" "usage: trigguard token" token create --tokens tk.json --help
absent "token --help" tk.json
err_ok 2 "token no subcommand" "usage: trigguard token" token
err_ok 2 "token unknown subcommand" "trigguard token: unknown subcommand 'frobnicate'" token frobnicate
err_ok 2 "token create no --tokens" "trigguard token create: --tokens FILE is required" \
    token create --tenant acme
err_ok 2 "token create no --tenant" "trigguard token create: --tenant T is required" \
    token create --tokens tk.json
absent "token create no --tenant" tk.json
err_ok 2 "token create --tenant without value" "unexpected argument '--tenant' (needs a value)" \
    token create --tokens tk.json --tenant
err_ok 2 "token create unknown option" "unexpected argument '--frobnicate'" \
    token create --tokens tk.json --tenant acme --frobnicate x
err_ok 2 "token create bad --role" "--role must be caller, approver, executor or admin" \
    token create --tokens tk.json --tenant acme --role root
absent "token create bad --role" tk.json
err_ok 2 "token list missing file" "cannot open" token list --tokens tk.json
err_ok 2 "token revoke no selector" "give one of --subject S or --digest PREFIX" \
    token revoke --tokens tk.json

# ---- serve: every case fails (or exits) before listening ----
err_ok 2 "serve unknown option" 'trigguard serve: unknown option "--frobnicate" (see --help)' \
    serve --frobnicate
err_ok 2 "serve extra argument" 'trigguard serve: unexpected argument "extra"' serve extra
err_ok 2 "serve --port without value" "trigguard serve: option --port needs a value" serve --port
err_ok 2 "serve --port not a number" 'option port: "abc" is not an integer' serve --port abc
err_ok 2 "serve --port out of range" "option port: 70000 is outside [0, 65535]" serve --port 70000
err_ok 2 "serve --log-level bogus" 'option log-level: "bogus" is not one of error|warn|info|debug' \
    serve --log-level bogus
err_ok 2 "serve --durability bogus" 'option durability: "bogus" is not one of fsync|batch|none' \
    serve --durability bogus
err_ok 2 "serve bypass=yes" 'option unsafe-local-auth-bypass: "yes" is not true or false' \
    serve --unsafe-local-auth-bypass=yes
err_ok 2 "serve --listen host name" '--listen "localhost" is not an IPv4 or IPv6 address' \
    serve --listen localhost
err_ok 2 "serve --tls-cert alone" "trigguard serve: --tls-cert and --tls-key go together" \
    serve --tls-cert cert.pem
err_ok 2 "serve same ports" "--decide-port must differ from --port" serve --port 9000 --decide-port 9000
PORT=abc err_ok 2 "serve bad environment" 'environment PORT for port: "abc" is not an integer' \
    serve --print-config
out_ok 0 "serve --print-config" "port = 8080" serve --print-config --api-keys s3cret-token
checks=$((checks + 1))
{ grep -qx "api-keys = (redacted)" out && ! grep -q s3cret-token out; } ||
    fail "serve --print-config shows the API keys: $(show)"
err_ok 2 "serve without --policy" "--policy is required" serve --port 0 --ledger led
absent "serve without --policy" led
err_ok 2 "serve --check-config without --policy" "--policy is required" serve --check-config
err_ok 2 "serve --check-config missing policy" "cannot open policy nopolicy.json" \
    serve --check-config --policy nopolicy.json --ledger led
err_ok 2 "serve --check-config missing key" "cannot open key file nokey.pem" \
    serve --check-config --policy "$policy" --key nokey.pem --ledger led
err_ok 2 "serve --check-config ledger parent" "--ledger nodir/led does not exist" \
    serve --check-config --policy "$policy" --ledger nodir/led
err_ok 2 "serve --check-config missing TLS files" "cannot open TLS certificate nocert.pem" \
    serve --check-config --policy "$policy" --ledger led --tls-cert nocert.pem --tls-key nokey.pem
# (stderr carries a no_tenants warning: only the exit code and stdout are the contract here)
checks=$((checks + 1))
invoke serve --check-config --policy "$policy" --key k.pem --ledger led --port 0
{ [ "$rc" -eq 0 ] && grep -q "^configuration OK: .*signing key cli-usage-1" out; } ||
    fail "serve --check-config valid: $(show)"
absent "serve --check-config" led
# an empty --authority-id means the policy's authority (docs/POLICY.md); one that is not
# UTF-8 is refused at start, since it is every receipt's authorityId
checks=$((checks + 1))
invoke serve --check-config --policy "$policy" --key k.pem --ledger led --authority-id=
[ "$rc" -eq 0 ] || fail "serve --check-config empty --authority-id: $(show)"
err_ok 2 "serve --check-config --authority-id not UTF-8" "--authority-id is not valid UTF-8" \
    serve --check-config --policy "$policy" --key k.pem --ledger led --authority-id=$'\xff'

# ---- output that cannot be written: exit 2 ("nothing usable was produced") with a message,
# never exit 0 (for check that would read as PERMIT) ----
if [ -w /dev/full ]; then
    # full WANT NAME ARGS... — stdout is /dev/full: exit WANT and the message on stderr.
    full() {
        local want=$1 name=$2 why=""
        shift 2
        checks=$((checks + 1))
        rc=0
        "$TG_BIN" "$@" <"$IN" >/dev/full 2>err || rc=$?
        [ "$rc" -eq "$want" ] || why+="exit $rc, want $want; "
        grep -q "error writing standard output" err || why+="no write error on stderr; "
        [ -z "$why" ] || fail "$name to a full disk: $why stderr: $(head -c 300 err)"
    }
    IN=req.json full 2 "canon" canon
    full 2 "--version" --version
    full 2 "policy check" policy check "$policy"
    full 2 "serve --print-config" serve --print-config
    full 2 "serve --check-config" serve --check-config --policy "$policy" --key k.pem --ledger led
    full 2 "check" check --policy "$policy" req.json
    full 2 "keys" keys k.pem
    full 2 "verify" verify --keys keys.json --now "$when" r.json
    full 2 "ledger verify" ledger verify L
    full 2 "token create" token create --tokens tkfull.json --tenant acme
    absent "token create to a full disk" tkfull.json
    IN=body.json full 2 "receipt sign" receipt sign --key k.pem
else
    echo "cli_usage: /dev/full is not writable here: write-error cases skipped" >&2
fi

echo "cli_usage: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
