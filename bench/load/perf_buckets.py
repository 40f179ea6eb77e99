#!/usr/bin/env python3
"""perf_buckets.py — attribute `perf script` samples of the daemon to pipeline steps.

    perf record -F 999 --call-graph dwarf,8192 -p "$(pidof trigguard)" -o perf.data -- sleep 6
    perf script -i perf.data | python3 bench/load/perf_buckets.py [--detail SUBSTRING]

Each sample goes to the first bucket (in RULES order) that names a function anywhere on the
sample's call stack, so a malloc called by the JSON parser counts as "JSON parse", and a
kernel sendmsg counts as "TCP send". Samples matching no rule are split by the leaf's DSO.
--detail prints the most common leaf functions (with their nearest trigguard callers) of the
buckets whose name contains SUBSTRING. Needs call stacks: a build with frame pointers or, as
above, DWARF unwinding (libc and libsodium have no frame pointers).

What it does not do: weigh by time (every sample counts once; perf samples at a fixed rate),
or see inside inlined functions perf could not name.
"""
import argparse
import collections
import re
import sys

RULES = [
    ("Ed25519 sign (libsodium)", ["tg_key_sign"]),
    ("SHA-256 (request, context, receipt, execution id, ledger chain)",
     # tg_sha256 (nettle) since issue 25; libsodium's names for runs of older builds.
     ["tg_sha256", "tg_sha256_update", "tg_sha256_final", "tg_sha256_init",
      "nettle_sha256_update", "nettle_sha256_digest", "_nettle_sha256_compress_sha_ni",
      "_nettle_sha256_compress_x86_64", "_nettle_sha256_compress",
      "crypto_hash_sha256", "crypto_hash_sha256_update", "crypto_hash_sha256_final",
      "crypto_hash_sha256_init"]),
    ("access log line", ["tg_log_request", "tg_log_write"]),
    ("store sweep (1 s tick, main thread)", ["tg_store_sweep"]),
    ("JSON parse + free (jansson)", ["tg_json_parse", "json_decref", "json_delete"]),
    ("receipt fields + canonical JSON", ["tg_receipt_sign_fields", "tg_request_hash",
                                         "tg_canon_write", "tg_canon_string"]),
    ("request validation + kernel", ["tg_frame_from_request", "tg_kernel_decide"]),
    ("idempotency + receipt-index tables", ["tg_store_idem_begin", "tg_store_idem_complete",
                                            "tg_store_idem_restore", "tg_store_nonce_use",
                                            "claim_keys"]),
    ("ledger: encode + pwrite + fdatasync (writer thread)", ["write_batch", "tg_lg_encode",
                                                              "do_fdatasync"]),
    ("ledger: enqueue (malloc + copy + wake the writer)", ["tg_ledger_append"]),
    ("response body", ["compose_response", "compose_meta", "respond_decide", "tg_reply_error"]),
    ("auth, rate limit, bulkhead", ["tg_auth_check", "tg_rate_check", "tg_bulkhead_enter",
                                    "tg_bulkhead_leave", "admit"]),
    ("resume the connection (writer -> HTTP thread)", ["tg_exchange_complete",
                                                       "MHD_resume_connection"]),
    ("per-request bookkeeping (contexts, metrics, frees)",
     ["tg_pipeline_evaluate", "on_durable", "on_completed", "ctx_create", "queue_exchange",
      "tg_metrics_request", "eval_req_free"]),
    ("TCP send (kernel)", ["__libc_sendmsg", "sendmsg", "__libc_send", "writev", "__writev"]),
    ("TCP recv (kernel)", ["__libc_recv", "recv", "recvfrom"]),
    ("epoll (libmicrohttpd event loop)", ["epoll_wait", "epoll_ctl", "__GI_epoll_ctl"]),
    ("ledger writer waiting/waking (futex, scheduler)", ["writer_main"]),
    ("libmicrohttpd request handling", ["on_request"]),
]

FRAME = re.compile(r"\s+[0-9a-f]+\s+(\S+?)(?:\+0x[0-9a-f]+)?\s+\((.*)\)\s*$")


def bucket_of(frames):
    names = [f[0] for f in frames]
    for label, funcs in RULES:
        for fn in funcs:
            if fn in names:
                return label
    dso = frames[0][1]
    if "kernel" in dso:
        return "kernel, outside the buckets above"
    if "libc" in dso:
        return "libc, outside the buckets above"
    return "other (%s)" % dso.rsplit("/", 1)[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--detail", help="show leaf functions of buckets containing this text")
    args = ap.parse_args()
    counts = collections.Counter()
    detail = collections.Counter()
    total = 0
    frames = []

    def flush():
        nonlocal total
        if not frames:
            return
        total += 1
        label = bucket_of(frames)
        counts[label] += 1
        if args.detail and args.detail in label:
            own = [f[0] for f in frames if f[1].endswith("/trigguard")][:3]
            detail[frames[0][0] + "  <-  " + " <- ".join(own)] += 1

    for line in sys.stdin:
        if line.startswith((" ", "\t")) and line.strip():
            m = FRAME.match(line)
            if m:
                frames.append((m.group(1), m.group(2)))
            continue
        flush()  # a blank line or a new sample header ends the previous stack
        frames = []
    flush()
    if total == 0:
        sys.exit("perf_buckets: no samples with call stacks on stdin")
    for label, n in counts.most_common():
        print("%6.1f%%  %6d  %s" % (100.0 * n / total, n, label))
    print("total samples: %d" % total)
    for leaf, n in detail.most_common(25):
        print("   %5.1f%%  %s" % (100.0 * n / total, leaf))


if __name__ == "__main__":
    main()
