-- evaluate_digest.lua — evaluate.lua plus a latency digest for scripts/loadtest.
--
--   TOKEN=... DIGEST_OUT=/tmp/d.json JSON_OUT=/tmp/s.json \
--     wrk -t1 -c50 -d30s --latency -s bench/load/evaluate_digest.lua http://127.0.0.1:8080
--
-- The workload, the environment knobs and the one-line summary (stdout and JSON_OUT) are
-- exactly evaluate.lua's (this file runs it, then wraps its done()). Added: when DIGEST_OUT is
-- set, done() also writes {"percentiles":[...],"latency_us":[...]} there: wrk's latency at
-- the same 105 percentiles as bench/common/stats.c (0..99 by 1, 99.5, 99.9, 99.95, 99.99,
-- 100), so the evidence page can draw a percentile curve for the load runs too. wrk records
-- every response's latency in microseconds and its percentile(p) returns the smallest
-- recorded value whose cumulative count reaches round(p/100 * n + 0.5) (within one sample
-- of nearest rank, on 1 us buckets).

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
TG_SCRIPT_NAME = TG_SCRIPT_NAME or "evaluate_digest.lua"
dofile(here .. "evaluate.lua")

local digest_out = os.getenv("DIGEST_OUT")
local base_done = done

function done(summary, latency, requests)
    base_done(summary, latency, requests)
    if digest_out == nil or digest_out == "" then
        return
    end
    local pcts = {}
    for p = 0, 99 do
        pcts[#pcts + 1] = p
    end
    for _, p in ipairs({ 99.5, 99.9, 99.95, 99.99, 100 }) do
        pcts[#pcts + 1] = p
    end
    local ps, vs = {}, {}
    for i, p in ipairs(pcts) do
        ps[i] = (p == math.floor(p)) and string.format("%d", p) or string.format("%g", p)
        -- wrk's percentile(0) is its first non-empty bucket; use the recorded minimum for
        -- p0 and the maximum for p100 so the ends are exact.
        local v
        if p == 0 then
            v = latency.min
        elseif p == 100 then
            v = latency.max
        else
            v = latency:percentile(p)
        end
        vs[i] = string.format("%d", v)
    end
    local out = assert(io.open(digest_out, "w"), "evaluate_digest.lua: cannot write " .. digest_out)
    out:write('{"percentiles":[', table.concat(ps, ","), '],"latency_us":[',
              table.concat(vs, ","), ']}\n')
    out:close()
end
