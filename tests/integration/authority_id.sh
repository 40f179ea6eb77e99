#!/usr/bin/env bash
# authority_id.sh — issue 18: `serve` and `check` give a request the same authorityId, by
# the one rule of docs/POLICY.md (tg_policy_authority_id): --authority-id when given and
# not empty, else the bundle's "authority", else trigguard-local. keys.json names the same.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
REQ=$(tg_req_json permit)
printf '%s' "$REQ" >"$TG_TMP/req.json"
# the test policy without its "authority" member
python3 - "$TG_POLICY" "$TG_TMP/no-authority.json" <<'PY' || tg_die "cannot write the policy copy"
import json, sys
p = json.load(open(sys.argv[1]))
assert p.pop("authority") == "trigguard-itest"
json.dump(p, open(sys.argv[2], "w"))
PY

n=0
# same_authority WANT POLICY [--authority-id A | env VAR=value ...]: a daemon and
# `trigguard check --key` on the same request and policy both sign WANT.
same_authority() {
    local want=$1 policy=$2
    shift 2
    local -a envs=() flags=()
    while [ $# -gt 0 ]; do
        case $1 in
        *=*) envs+=("$1") ;;
        *) flags+=("$1") ;;
        esac
        shift
    done
    n=$((n + 1))
    tg_start "a$n" "${envs[@]}" -- --policy "$policy" --key "$TG_KEY" --ledger "$TG_TMP/ledger-$n" \
        --threads 2 "${flags[@]}"
    tg_post /v1/evaluate "$REQ"
    local served
    tg_jget served "j['receipt']['authorityId']"
    tg_eq "$served" "$want" "serve ${envs[*]} ${flags[*]} ($(basename "$policy")): authorityId"
    tg_req GET /.well-known/trigguard/keys.json
    tg_expect_py "j['authority'] == '$want'" "keys.json authority ${flags[*]}"
    tg_stop "a$n"
    local out checked
    out=$(env "${envs[@]}" "$TG_BIN" check --policy "$policy" --key "$TG_KEY" "${flags[@]}" \
        "$TG_TMP/req.json" 2>&1)
    tg_eq "$?" 0 "trigguard check ${flags[*]}: PERMIT"
    checked=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["receipt"]["authorityId"])' "$out" 2>&1)
    tg_eq "$checked" "$served" "trigguard check ${flags[*]} ($(basename "$policy")): the daemon's authorityId"
}

same_authority trigguard-itest "$TG_POLICY"
same_authority ops-override "$TG_POLICY" --authority-id ops-override
same_authority trigguard-local "$TG_TMP/no-authority.json"
same_authority ops-override "$TG_TMP/no-authority.json" --authority-id ops-override
# an empty value is "not given" (check takes the flag, serve also the environment)
same_authority trigguard-itest "$TG_POLICY" --authority-id ""
tg_start env TRIGGUARD_AUTHORITY_ID= -- --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-env" --threads 2
tg_post /v1/evaluate "$REQ"
tg_expect_py "j['receipt']['authorityId'] == 'trigguard-itest'" "TRIGGUARD_AUTHORITY_ID= : the policy's authority"
tg_stop env
tg_start env2 TRIGGUARD_AUTHORITY_ID=from-env -- --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-env2" --threads 2
tg_post /v1/evaluate "$REQ"
tg_expect_py "j['receipt']['authorityId'] == 'from-env'" "TRIGGUARD_AUTHORITY_ID=from-env wins over the policy"
tg_stop env2

tg_done
