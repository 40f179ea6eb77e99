#!/usr/bin/env bash
# token_cli.sh — `trigguard token create|list|revoke`: the token printed once and only its
# digest kept, mode 0600, refusals that leave the file as it was, revocation by subject and
# by digest prefix, the daemon accepting what create wrote, and atomic replacement (a reader
# never sees a partial file; concurrent creates lose nothing).
source "$(dirname "$0")/lib/daemon.sh"

T=$TG_TMP/tok/tokens.json
mkdir -p "$TG_TMP/tok"
tk() { "$TG_BIN" token "$@" >"$TG_TMP/tk.out" 2>"$TG_TMP/tk.err"; }
sha() { printf %s "$1" | sha256sum | cut -c1-64; }
entries() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$T"; }

# ---- create ---------------------------------------------------------------------------

umask 022
tk create --tokens "$T" --tenant acme --subject billing-bot --actor agent.billing \
    --surface payments.charge
tg_eq "$?" 0 "create: exit 0"
TOK1=$(cat "$TG_TMP/tk.out")
tg_check "create: stdout is one token, tgt_ + 43 base64url chars" \
    grep -Eqx 'tgt_[A-Za-z0-9_-]{43}' "$TG_TMP/tk.out"
tg_eq "$(wc -l <"$TG_TMP/tk.out")" 1 "create: the token is the only line on stdout"
tg_eq "$(stat -c %a "$T")" 600 "create: a new file is mode 0600 whatever the umask"
tg_check "create: the file holds the token's digest" grep -q "$(sha "$TOK1")" "$T"
tg_check "create: the file never holds the token" bash -c "! grep -qF '$TOK1' '$T'"
tg_check "create: stderr names the subject, not the token" \
    bash -c "grep -q 'subject billing-bot' '$TG_TMP/tk.err' && ! grep -qF '$TOK1' '$TG_TMP/tk.err'"
tg_check "create: the entry has the bindings" python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))[0]
sys.exit(e != {"tenant": "acme", "token_sha256": sys.argv[2], "subject": "billing-bot",
               "actors": ["agent.billing"], "surfaces": ["payments.charge"]})' "$T" "$(sha "$TOK1")"

tk create --tokens "$T" --tenant acme --role executor
tg_eq "$?" 0 "create: a second token, role executor"
TOK2=$(cat "$TG_TMP/tk.out")
tk create --tokens "$T" --tenant beta --actor a.one --actor a.two --role approver --subject rev
TOK3=$(cat "$TG_TMP/tk.out")
tg_ne "$TOK1" "$TOK2" "two creates make two tokens"
tg_eq "$(entries)" 3 "three entries"
tg_eq "$(stat -c %a "$T")" 600 "the file stays 0600 after a change"

# ---- list -----------------------------------------------------------------------------

tk list --tokens "$T"
tg_eq "$?" 0 "list: exit 0"
D2=$(sha "$TOK2")
tg_check "list: header" grep -qx $'subject\ttenant\trole\tdigest\tactors\tsurfaces' "$TG_TMP/tk.out"
tg_check "list: the bound token" grep -qx $'billing-bot\tacme\tcaller\t'"$(sha "$TOK1" | cut -c1-12)"$'\tagent.billing\tpayments.charge' "$TG_TMP/tk.out"
tg_check "list: the derived subject, unbound" grep -qx "acme:${D2:0:8}"$'\tacme\texecutor\t'"${D2:0:12}"$'\t\\*\t\\*' "$TG_TMP/tk.out"
tg_check "list: several actors" grep -qx $'rev\tbeta\tapprover\t'"$(sha "$TOK3" | cut -c1-12)"$'\ta.one,a.two\t\\*' "$TG_TMP/tk.out"
tg_check "list: never a token or a whole digest" \
    bash -c "! grep -qF -e '$TOK1' -e '$TOK2' -e '$D2' '$TG_TMP/tk.out'"

# ---- refusals leave the file unchanged -------------------------------------------------

cp "$T" "$TG_TMP/before.json"
refuse() { # refuse WANT LABEL NEEDLE ARGS...
    local want=$1 label=$2 needle=$3
    shift 3
    tk "$@"
    tg_eq "$?" "$want" "$label: exit $want"
    tg_check "$label: says '$needle'" grep -qF -- "$needle" "$TG_TMP/tk.err"
    tg_check "$label: nothing on stdout" test ! -s "$TG_TMP/tk.out"
    tg_check "$label: the file is unchanged" cmp -s "$T" "$TG_TMP/before.json"
}
refuse 2 "duplicate subject" "duplicate subject" create --tokens "$T" --tenant x --subject rev
refuse 2 "bad tenant" "[3].tenant" create --tokens "$T" --tenant "a b"
refuse 2 "bad subject" "[3].subject" create --tokens "$T" --tenant acme --subject "a b"
refuse 2 "bad role" "--role must be" create --tokens "$T" --tenant acme --role root
refuse 2 "group actor" "policy actor group" create --tokens "$T" --tenant acme --actor @payers
refuse 2 "duplicate actor" "listed twice" create --tokens "$T" --tenant acme --actor a --actor a
refuse 2 "no tenant" "--tenant T is required" create --tokens "$T"
refuse 2 "no --tokens" "--tokens FILE is required" create --tenant acme
refuse 2 "unknown option" "unexpected argument '--observe'" create --tokens "$T" --tenant a --observe
refuse 2 "option without value" "needs a value" create --tokens "$T" --tenant
refuse 2 "option twice" "--tenant given twice" create --tokens "$T" --tenant a --tenant b
refuse 2 "unknown subcommand" "unknown subcommand 'rotate'" rotate --tokens "$T"
refuse 2 "list with other options" "takes --tokens FILE only" list --tokens "$T" --tenant a
refuse 2 "revoke without a selector" "one of --subject S or --digest" revoke --tokens "$T"
refuse 2 "revoke with both" "one of --subject S or --digest" revoke --tokens "$T" --subject rev --digest abcd
refuse 2 "revoke short prefix" "4..64 hex digits" revoke --tokens "$T" --digest abc
refuse 2 "revoke non-hex prefix" "4..64 hex digits" revoke --tokens "$T" --digest abcz
refuse 1 "revoke unknown subject" "no entry in" revoke --tokens "$T" --subject nobody
refuse 1 "revoke unknown digest" "no entry in" revoke --tokens "$T" --digest 0000000000000000000000

chmod 640 "$T"
for c in "create --tenant acme" "list" "revoke --subject rev"; do
    # shellcheck disable=SC2086
    refuse 2 "$c on a group-readable file" "chmod 600" ${c%% *} --tokens "$T" ${c#* }
done
chmod 604 "$T"
refuse 2 "list on an other-readable file" "lets group or others access it" list --tokens "$T"
chmod 600 "$T"
ln -s "$T" "$TG_TMP/tok/link.json"
tk list --tokens "$TG_TMP/tok/link.json"
tg_eq "$?" 2 "a symbolic link is refused"
tg_check "symbolic link: says so" grep -q "symbolic link" "$TG_TMP/tk.err"
printf '[{"tenant":"x"}]' >"$TG_TMP/tok/broken.json"
chmod 600 "$TG_TMP/tok/broken.json"
cp "$TG_TMP/tok/broken.json" "$TG_TMP/broken.orig"
tk create --tokens "$TG_TMP/tok/broken.json" --tenant acme
tg_eq "$?" 2 "create refuses to change a file that does not load"
tg_check "broken file: says what is wrong" grep -q 'missing member' "$TG_TMP/tk.err"
tg_check "broken file: unchanged" cmp -s "$TG_TMP/tok/broken.json" "$TG_TMP/broken.orig"
tk list --tokens "$TG_TMP/tok/missing.json"
tg_eq "$?" 2 "list of a missing file"
tk create --tokens "$TG_TMP/nodir/t.json" --tenant acme
tg_eq "$?" 2 "create in a missing directory"
"$TG_BIN" token create --tokens "$T" --tenant acme >/dev/full 2>"$TG_TMP/tk.err"
tg_eq "$?" 2 "create with stdout on a full disk: exit 2"
tg_check "create to a full disk: no entry for a token nobody saw" cmp -s "$T" "$TG_TMP/before.json"
tg_check "refusals leave no temporary file" \
    bash -c "[ -z \"\$(find '$TG_TMP/tok' -name '*.tmp.*')\" ]"
"$TG_BIN" token --help >"$TG_TMP/tk.out" 2>&1
tg_eq "$?" 0 "token --help: exit 0"
tg_check "token --help: usage and exit codes" \
    bash -c "grep -q '^usage: trigguard token create' '$TG_TMP/tk.out' && grep -q 'exit status' '$TG_TMP/tk.out'"

# ---- the daemon accepts what create wrote ----------------------------------------------

tg_keygen
tg_std_args main
tg_start main TRIGGUARD_API_KEYS= -- "${TG_STD_ARGS[@]}" --tokens "$T"
tg_req POST /v1/evaluate -H "Authorization: Bearer $TOK1" \
    --json-body '{"surface":"payments.charge","action":"transfer_funds","context":{"amount":5,"currency":"USD"}}'
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['actorId'] == 'agent.billing' and j['receipt']['tenantId'] == 'acme'" \
    "a created token decides as its tenant and its one actor"
tg_req POST /v1/evaluate -H "Authorization: Bearer $TOK1" --json-body "$(tg_req_json example)"
tg_expect_error 403 surface_not_allowed "a created token keeps its surface binding"
tg_req POST /v1/evaluate -H "Authorization: Bearer $TOK2" --json-body "$(tg_req_json permit)"
tg_expect_error 403 role_not_allowed "a created executor token may not decide"
tg_stop main

# ---- revoke ---------------------------------------------------------------------------

tk revoke --tokens "$T" --subject billing-bot
tg_eq "$?" 0 "revoke by subject"
tg_check "revoke: says which" grep -q '^revoked billing-bot (tenant acme' "$TG_TMP/tk.out"
tg_check "revoke: the digest is gone" bash -c "! grep -q '$(sha "$TOK1")' '$T'"
tg_eq "$(entries)" 2 "two entries left"
tk revoke --tokens "$T" --digest "${D2:0:10}"
tg_eq "$?" 0 "revoke by digest prefix"
tg_check "revoke by prefix: the right one" bash -c "! grep -q '$D2' '$T' && grep -q '\"subject\": \"rev\"' '$T'"
tk revoke --tokens "$T" --digest "$(sha "$TOK3" | cut -c1-8 | tr a-f A-F)"
tg_eq "$?" 0 "revoke by an upper-case prefix"
tg_eq "$(entries)" 0 "no entry left"
tg_eq "$(stat -c %a "$T")" 600 "still 0600"

# Two digests that share their first 20 hex digits: a short prefix is ambiguous.
SHARED=0123456789abcdef0123
printf '[{"tenant":"a","token_sha256":"%s%s","subject":"one"},{"tenant":"a","token_sha256":"%s%s","subject":"two"}]' \
    "$SHARED" "$(printf '1%.0s' {1..44})" "$SHARED" "$(printf '2%.0s' {1..44})" >"$T"
cp "$T" "$TG_TMP/before.json"
refuse 2 "ambiguous prefix" "matches 2 entries" revoke --tokens "$T" --digest "$SHARED"
tg_check "ambiguous prefix: names both" bash -c "grep -qx '  one' '$TG_TMP/tk.err' && grep -qx '  two' '$TG_TMP/tk.err'"
tk revoke --tokens "$T" --digest "${SHARED}2"
tg_eq "$?" 0 "one more digit is not ambiguous"
tg_check "the other entry stays" grep -q '"subject": "one"' "$T"

# ---- atomicity: readers see whole files, concurrent writers lose nothing ---------------

printf '[]' >"$T"
chmod 600 "$T"
python3 - "$T" >"$TG_TMP/reader.out" 2>&1 <<'PY' &
import json, os, sys, time
path, bad, reads, end = sys.argv[1], 0, 0, time.time() + 60
stop = path + ".stop"
while not os.path.exists(stop) and time.time() < end:
    try:
        with open(path, "rb") as f:
            data = f.read()
        v = json.loads(data)
        assert isinstance(v, list) and all("token_sha256" in e for e in v)
    except (ValueError, AssertionError) as e:
        bad += 1
        print("partial or invalid file:", repr(data[:80]), e)
    reads += 1
print("reads", reads, "bad", bad)
sys.exit(1 if bad or reads < 10 else 0)
PY
READER=$!
writer() {
    local i
    for i in $(seq 1 15); do
        "$TG_BIN" token create --tokens "$T" --tenant "w$1" --subject "w$1-$i" >/dev/null 2>>"$TG_TMP/writer.err" ||
            echo "writer $1 create $i failed" >>"$TG_TMP/writer.err"
    done
}
writer 1 &
W1=$!
writer 2 &
W2=$!
wait "$W1" "$W2"
touch "$T.stop"
wait "$READER"
tg_eq "$?" 0 "a concurrent reader never saw a partial or invalid file ($(tail -1 "$TG_TMP/reader.out"))"
tg_check "no writer failed" bash -c "! grep -q failed '$TG_TMP/writer.err'"
tg_eq "$(entries)" 30 "two concurrent writers of 15 creates each: 30 entries, none lost"
rm -f "$T.stop"
tg_check "no temporary file is left" bash -c "[ -z \"\$(find '$TG_TMP/tok' -name '*.tmp.*')\" ]"
tk list --tokens "$T"
tg_eq "$(grep -c $'\tw[12]\t' "$TG_TMP/tk.out")" 30 "list shows all 30"

tg_done
