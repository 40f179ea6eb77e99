# dev.sh — what scripts/run and scripts/cluster share besides the build (scripts/cluster runs
# `scripts/run --no-serve` for that): the PORT rule and the example request with what it gets
# under the policy bundle being served. Sourced; bash only.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the TG_DEV_* results are read by the scripts that source this

# tg_dev_port VALUE: VALUE is a TCP port from 1 to 65535 in decimal digits (no sign, no
# spaces, no 0x; leading zeros are fine). Sets TG_DEV_PORT to it as a plain number.
tg_dev_port() {
    TG_DEV_PORT=""
    [[ $1 =~ ^[0-9]{1,5}$ ]] && [ $((10#$1)) -ge 1 ] && [ $((10#$1)) -le 65535 ] || return 1
    TG_DEV_PORT=$((10#$1))
}

# The example request: the bundled policy's representative PERMIT.
TG_DEV_REQUEST='{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.05,"rsdSpike":false}}'

# tg_dev_example BIN POLICY: decides TG_DEV_REQUEST in-process against POLICY (`trigguard
# check`, the daemon's kernel) and sets TG_DEV_EXPECT to what it gets, for the line above a
# printed curl: a signed PERMIT under the bundled policy; DENY, SILENCE or a 400 under another.
tg_dev_example() {
    local bin=$1 policy=$2 rc=0 decided reason
    decided=$(printf '%s' "$TG_DEV_REQUEST" | "$bin" check --policy "$policy" - 2>&1) || rc=$?
    reason=$(sed -n 's/.*"reason_code":"\([A-Z0-9_]*\)".*/\1/p' <<<"$decided" | head -1)
    case $rc in
    0) TG_DEV_EXPECT="this request gets a signed PERMIT" ;;
    3) TG_DEV_EXPECT="under $policy this request gets DENY ($reason), not a PERMIT: edit it to fit the bundle" ;;
    4) TG_DEV_EXPECT="under $policy this request gets SILENCE ($reason), not a PERMIT: edit it to fit the bundle" ;;
    *) TG_DEV_EXPECT="under $policy this request is refused (HTTP 400: ${decided%%$'\n'*}): edit it to fit the bundle" ;;
    esac
}
