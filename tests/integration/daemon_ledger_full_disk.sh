#!/usr/bin/env bash
# daemon_ledger_full_disk.sh — a daemon started on a full disk must not report ready.
# The ledger probes the disk at open (4 KiB written, synced and removed as ledger.probe);
# when that fails the daemon still starts, but /readyz is 503 saying why and decisions get
# 503 until the disk takes data again, when it recovers by itself. Before this, /readyz
# said ready until the first decision failed.
# Needs a small filesystem of its own: a tmpfs mounted here, so only as root where mounting
# is allowed; otherwise the test says why and passes without running.
source "$(dirname "$0")/lib/daemon.sh"

if [ "$(id -u)" != 0 ]; then
    tg_log "skip: not root, cannot mount a small tmpfs to fill"
    tg_done
fi
MNT=$(mktemp -d "${TMPDIR:-/tmp}/tg-fulldisk.XXXXXX")
if ! mount -t tmpfs -o size=1m,mode=0700 tg-fulldisk "$MNT" 2>"$TG_TMP/mount.err"; then
    tg_log "skip: mount -t tmpfs is not permitted here: $(cat "$TG_TMP/mount.err")"
    rmdir "$MNT"
    tg_done
fi
# Daemons stop first (tg_cleanup), then the mount can go.
fd_cleanup() {
    tg_cleanup
    umount "$MNT" 2>/dev/null || umount -l "$MNT"
    rmdir "$MNT"
}
trap fd_cleanup EXIT

tg_keygen
ARGS=(--policy "$TG_POLICY" --key "$TG_KEY" --ledger "$MNT/ledger" --log-format json --threads 2)
tg_start fd1 -- "${ARGS[@]}"
for i in 1 2; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"fd-$i\"")"
    tg_expect_status 200 "fd-$i on the empty disk"
    tg_save "fd-$i"
done
tg_stop fd1

# Fill the filesystem to the last page.
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null
tg_check "the filesystem is full" bash -c "! dd if=/dev/zero of='$MNT/more' bs=4k count=1 2>/dev/null"
rm -f "$MNT/more"

tg_start fd2 -- "${ARGS[@]}"
log=$(tg_logfile fd2)
tg_req GET /readyz
tg_expect_status 503 "full disk: /readyz at start"
tg_expect_py "j['ready'] is False and j['ledger'] is False and 'No space left on device' in j['reason'] and j['reason'].startswith('ledger: ')" \
    "full disk: /readyz says the ledger cannot write, and why"
tg_check "full disk: the start logs that it is not ready, and why" \
    grep -q '"level":"error","event":"ledger_not_ready".*No space left on device' "$log"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"fd-3"')"
tg_expect_error 503 ledger_unavailable "full disk: a decision fails closed"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"fd-1"')"
tg_expect_header Idempotent-Replayed true "full disk: a key acknowledged before still replays"
tg_check "full disk: the replay is byte for byte" cmp -s "$TG_BODY_FILE" "$(tg_saved_body fd-1)"
tg_check "full disk: the daemon keeps running" kill -0 "$(tg_pid fd2)"

# Room again: the retry loop (every second) finds it without a restart.
rm -f "$MNT/filler"
tg_check "room again: /readyz 200 within 6 s" tg_wait_status /readyz 200 60 0.1
tg_check "room again: ledger_recovered is logged" grep -q '"event":"ledger_recovered"' "$log"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"fd-3"')"
tg_expect_status 200 "room again: decisions are signed"
tg_req GET /readyz
tg_expect_py "j['ready'] is True and 'reason' not in j" "ready: no reason member"
tg_stop fd2
out=$("$TG_BIN" ledger verify "$MNT/ledger" 2>&1)
tg_eq "$?" 0 "the ledger verifies: $out"
tg_check "it holds the 3 acknowledged records" grep -q "records: *3 " <<<"$out"
tg_check "no probe file is left" test ! -e "$MNT/ledger/ledger.probe"
tg_done
