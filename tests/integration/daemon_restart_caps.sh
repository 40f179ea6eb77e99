#!/usr/bin/env bash
# daemon_restart_caps.sh — a restart whose --store-max-entries cannot hold the ledger's live
# entries is refused (exit 2, the numbers in the log) and drops nothing: until issue 17 the
# receipt index lost the entries that did not fit without a word, so GET /v1/receipts
# answered 404 for receipts already handed out. docs/OPERATIONS.md, Restarting with smaller
# tables.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args caps
N=20

# ---- fill: N receipts (no idempotency keys: only the receipt index grows) ---------------

tg_start caps -- "${TG_STD_ARGS[@]}"
ids=()
for i in $(seq 1 $N); do
    tg_post /v1/evaluate "$(tg_req_json example)"
    [ "$TG_STATUS" = 200 ] || break
    tg_jget id 'j["execution_id"]'
    ids+=("$id")
done
tg_eq "${#ids[@]}" "$N" "$N receipts signed"
tg_stop caps

# ---- restart with room for 16: refused, nothing changed ---------------------------------

ledger_before=$(cat "$TG_TMP"/ledger-caps/*.tgl | sha256sum)
OUT=$(timeout 30 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve "${TG_STD_ARGS[@]}" \
    --port 0 --port-file "$TG_TMP/port-refused" --store-max-entries 16 2>&1)
rc=$?
tg_eq "$rc" 2 "--store-max-entries 16 below $N live receipts: the start is refused (exit 2)"
tg_check "the refusal names both numbers and the flag" grep -q \
    "\"event\":\"startup_failed\".*receipt index: the ledger holds $N live entries but --store-max-entries is 16.*--store-max-entries $N or more" \
    <<<"$OUT"
tg_check "a store_too_small line says what would be lost" grep -q \
    "\"event\":\"store_too_small\".*receipt index: .*GET /v1/receipts would not find receipts already handed out" \
    <<<"$OUT"
tg_check "it never listened" test ! -s "$TG_TMP/port-refused"
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' <<<"$OUT"; then
    tg_fail "sanitizer report: $(head -c 2000 <<<"$OUT")"
fi
tg_eq "$(cat "$TG_TMP"/ledger-caps/*.tgl | sha256sum)" "$ledger_before" "the ledger is unchanged"

# ---- restart with room for all of them: every receipt handed out reads back -------------

tg_start caps2 -- "${TG_STD_ARGS[@]}" --store-max-entries $N
readable=0
for id in "${ids[@]}"; do
    tg_req GET "/v1/receipts/$id" "${TG_AUTH_A[@]}"
    [ "$TG_STATUS" = 200 ] && readable=$((readable + 1))
done
tg_eq "$readable" "$N" "--store-max-entries $N: all $N receipts read back"
tg_post /v1/evaluate "$(tg_req_json example)"
tg_expect_error 503 overloaded "and the index is full now: a new receipt is refused before signing"
tg_stop caps2

tg_done
