-- paced.lua — evaluate.lua with a fixed pause between requests on each connection, to offer a
-- chosen rate instead of "as fast as replies come back" (wrk is closed-loop):
--
--   PACE_MS=20 TOKEN=bench-token wrk -t2 -c200 -d20s --latency -s bench/load/paced.lua URL
--
-- offers about connections * 1000 / (PACE_MS + reply latency) requests per second: with fast
-- replies (429s cost tens of microseconds) that is close to connections * 1000 / PACE_MS.
-- Used to drive the daemon at about twice its saturation rate (docs/OPERATIONS.md, "Overload
-- behaviour"). Every knob and the JSON summary line are those of evaluate.lua.

TG_SCRIPT_NAME = "paced.lua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "evaluate.lua")

local pace_ms = tonumber(os.getenv("PACE_MS") or "0")

function delay()
    return pace_ms
end
