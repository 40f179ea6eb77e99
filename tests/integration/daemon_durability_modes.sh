#!/usr/bin/env bash
# daemon_durability_modes.sh — --durability none (records written on the request thread)
# and batch (acknowledged at write, synced periodically) keep every guarantee of the
# default mode: idempotent replays byte for byte, before and after a restart; a spent
# nonce stays spent; /version names the mode; the ledger verifies with every signature.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
for mode in none batch; do
    tg_std_args "$mode"
    tg_start "$mode" -- "${TG_STD_ARGS[@]}" --durability "$mode"
    tg_req GET /version
    tg_expect_py "j['durability'] == '$mode'" "$mode: /version names the durability mode"

    for i in 1 2 3 4 5; do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$mode-k$i\",\"nonce\":\"$mode-n$i\"")"
        tg_expect_status 200 "$mode: evaluate $i"
        tg_save "$mode-$i"
    done
    tg_post /v1/evaluate "$(tg_req_json deny ",\"idempotency_key\":\"$mode-kd\"")"
    tg_expect_py "s == 200 and j['decision'] == 'DENY' and 'receipt' in j" "$mode: a DENY is signed"
    tg_save "$mode-deny"

    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$mode-k1\",\"nonce\":\"$mode-n1\"")"
    tg_expect_header Idempotent-Replayed true "$mode: replay before restart"
    tg_check "$mode: replay before restart is byte-identical" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "$mode-1")"
    tg_post /v1/evaluate "$(tg_req_json permit ",\"nonce\":\"$mode-n2\"")"
    tg_expect_error 409 replay_detected "$mode: nonce reuse"

    tg_fetch_keys "$TG_TMP/keys-$mode.json"
    tg_stop "$mode"
    out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-$mode" --keys "$TG_TMP/keys-$mode.json" 2>&1)
    tg_eq "$?" 0 "$mode: ledger verify --keys after a clean stop: $out"

    tg_start "$mode" -- "${TG_STD_ARGS[@]}" --durability "$mode"
    for i in 3 5; do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$mode-k$i\",\"nonce\":\"$mode-n$i\"")"
        tg_expect_header Idempotent-Replayed true "$mode: replay $i after restart"
        tg_check "$mode: replay $i after restart is byte-identical" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "$mode-$i")"
    done
    tg_post /v1/evaluate "$(tg_req_json deny ",\"idempotency_key\":\"$mode-kd\"")"
    tg_check "$mode: DENY replay after restart is byte-identical" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "$mode-deny")"
    tg_post /v1/evaluate "$(tg_req_json permit ",\"nonce\":\"$mode-n4\"")"
    tg_expect_error 409 replay_detected "$mode: nonce still spent after restart"
    tg_stop "$mode"
done
tg_done
