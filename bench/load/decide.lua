-- decide.lua — wrk load script: POST /decide (decision core only) with the same spend request.
--
--   TOKEN=bench-token wrk -t1 -c50 -d10s --latency -s bench/load/decide.lua http://127.0.0.1:8080
--
-- Same environment knobs and the same one-line JSON summary as evaluate.lua (read its header);
-- only the default path differs. /decide ignores the idempotency key, so every request is the
-- same work: validate, kernel, a ~170-byte reply; no hashing, signing or ledger.

TG_DEFAULT_PATH = "/decide"
TG_SCRIPT_NAME = "decide.lua"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "evaluate.lua")
