#!/usr/bin/env bash
# callgrind_evidence.sh — the committed instruction counts (evidence/artifacts/callgrind/,
# written by scripts/callgrind) hold together, and the validator catches a changed figure.
#
# No valgrind here: the counts come from a release build under callgrind, which the suite
# does not make (scripts/test builds with sanitizers, and valgrind cannot run those). What
# runs is bench/report/validate_callgrind.py on the committed callgrind.json with its raw
# dumps, then on copies with one figure changed each (a ratio, a per-request figure, an
# object's count, a raw count, a zero count from a toggle that matched nothing): every copy
# must be refused, and for its reason, so the check cannot pass by accepting anything.
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" callgrind_evidence

dir=$TG_SRC/evidence/artifacts/callgrind
doc=$dir/callgrind.json
validator=$TG_SRC/bench/report/validate_callgrind.py
check "callgrind.json is committed" test -s "$doc"
check "its raw dumps are committed" test -d "$dir/raw"

if "$py" "$validator" --raw "$dir/raw" "$doc" >"$tmp/valid.log" 2>&1; then
    ok
else
    cat "$tmp/valid.log" >&2
    fail "the committed callgrind.json does not validate"
fi

# The evidence is the issue's comparison: every case, both builds, 1000 requests or more.
check "the committed document compares the tree with a ref on all three cases" "$py" - "$doc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ref"] is not None and d["requests"] >= 1000, (d["ref"], d["requests"])
assert [c["name"] for c in d["cases"]] == ["decide", "evaluate_none", "evaluate_fsync"]
assert not d["tree"]["dirty"], d["tree"]
PY

# tamper NAME REASON PYTHON: a copy of the document changed by PYTHON (d is the document)
# must be refused with REASON in the message.
tamper() {
    local name=$1 reason=$2 code=$3 rc=0
    "$py" - "$doc" "$tmp/$name.json" "$code" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
    "$py" "$validator" "$tmp/$name.json" >"$tmp/$name.log" 2>&1 || rc=$?
    if [ "$rc" = 1 ] && grep -qF -- "$reason" "$tmp/$name.log"; then
        ok
    else
        cat "$tmp/$name.log" >&2
        fail "a copy with $name changed was not refused for \"$reason\" (exit $rc)"
    fi
}
tamper ratio "ratio.handler" 'd["cases"][1]["ratio"]["handler"] = round(d["cases"][1]["ratio"]["handler"] - 0.01, 4)'
tamper per_request "ir_per_request" 'd["cases"][2]["tree"]["process"]["ir_per_request"] += 100'
tamper ref_count "ratio.process" 'd["cases"][0]["ref"]["process"]["summary_ir"] += 5000 * d["requests"]; d["cases"][0]["ref"]["process"]["ir_per_request"] = round(d["cases"][0]["ref"]["process"]["summary_ir"] / d["requests"], 1)'
tamper by_object "by_object" 'd["cases"][1]["tree"]["handler"]["by_object"].pop()'
tamper share "share" 'd["cases"][1]["tree"]["process"]["top_self"][0]["share"] += 0.01'
tamper zero "summary_ir must be a positive integer" 'h = d["cases"][0]["tree"]["handler"]; h["summary_ir"] = 0; h["ir_per_request"] = 0.0'

# A raw dump that disagrees with the document (its count read again from the file).
mkdir -p "$tmp/raw"
cp "$dir"/raw/*.gz "$tmp/raw/"
f=$tmp/raw/tree-decide-handler.callgrind.out.gz
gzip -dc "$f" | sed 's/^summary: \([0-9]*\)$/summary: 1\1/' | gzip -n >"$f.new" && mv "$f.new" "$f"
rc=0
"$py" "$validator" --raw "$tmp/raw" "$doc" >"$tmp/raw.log" 2>&1 || rc=$?
if [ "$rc" = 1 ] && grep -qF "the raw dump says" "$tmp/raw.log"; then
    ok
else
    cat "$tmp/raw.log" >&2
    fail "a raw dump with another count was not refused (exit $rc)"
fi

checks_done
