-- evaluate.lua — wrk load script: POST /v1/evaluate with the representative spend request.
--
--   TOKEN=bench-token wrk -t1 -c50 -d10s --latency -s bench/load/evaluate.lua http://127.0.0.1:8080
--
-- The request is bench/load/body.json (tier-1 surface payments.charge, actor agent.billing,
-- amount 4999 USD, two signals: a PERMIT under examples/policy.json); the text {{IDEM}} in it
-- is replaced per request by a fresh idempotency key "<run>-<thread>-<n>", so every request
-- runs the whole pipeline (parse, hash, decide, sign, ledger) instead of an idempotent replay.
--
-- Environment (read in every wrk thread):
--   TOKEN      Bearer token sent in Authorization                    [bench-token]
--   BODY_FILE  request template; {{IDEM}} marks the key              [body.json beside this file]
--   IDEM       unique: a new key per request; fixed: one key for all (replays after the
--              first; with several connections a duplicate of a request still in flight
--              gets 409, as the spec requires)                                        [unique]
--   RUN_ID     prefix of the keys, so keys never repeat across runs  [time + random]
--   TG_PATH    request path                [/v1/evaluate if the URL has no path, else the URL's]
--   CHECK      1: count responses by status class and by decision (defines wrk's response()
--              callback, which costs the load generator ~1-2 us per reply); 0: rely on wrk's
--              own error counters only (status >= 400)                                    [1]
--   LABEL      copied into the JSON summary
--   JSON_OUT   also write the JSON summary to this file
--
-- done() prints the summary as one line that starts with '{' (wrk's own text never does):
-- latency percentiles in microseconds from wrk's histogram, requests, rps, and errors by
-- kind: connect, read, write, timeout (wrk's socket errors), status (wrk: replies >= 400)
-- and, with CHECK=1, non_2xx (every reply outside 200..299) and non_permit (2xx replies
-- whose body lacks "decision":"PERMIT"; /decide and /v1/evaluate both carry that field).
--
-- What this does not measure: open-loop latency (wrk is closed-loop: it waits for each reply
-- before the next request on a connection, so stalls hide requests that would have queued),
-- and anything about correctness beyond status and decision.

local default_path = TG_DEFAULT_PATH or "/v1/evaluate"
local script_name = TG_SCRIPT_NAME or "evaluate.lua"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local body_file = os.getenv("BODY_FILE") or (here .. "body.json")
local token = os.getenv("TOKEN") or "bench-token"
local idem_mode = os.getenv("IDEM") or "unique"
local check = (os.getenv("CHECK") or "1") ~= "0"
local label = os.getenv("LABEL") or ""
local json_out = os.getenv("JSON_OUT")
math.randomseed(os.time())
local run_id = os.getenv("RUN_ID") or string.format("%d-%06d", os.time(), math.random(0, 999999))

local fh = assert(io.open(body_file, "rb"), "evaluate.lua: cannot read BODY_FILE " .. body_file)
local template = fh:read("*a"):gsub("%s+$", "")
fh:close()
local head, tail = template:match("^(.-){{IDEM}}(.*)$")
assert(head, "evaluate.lua: " .. body_file .. " has no {{IDEM}} placeholder")
assert(idem_mode == "unique" or idem_mode == "fixed", "evaluate.lua: IDEM must be unique or fixed")

local path = os.getenv("TG_PATH")
if path == nil or path == "" then
    path = (wrk.path ~= nil and wrk.path ~= "/" and wrk.path ~= "") and wrk.path or default_path
end

local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
}

-- Main state: remember each thread so done() can add up their counters.
local threads = {}
function setup(thread)
    threads[#threads + 1] = thread
    thread:set("thread_no", #threads)
end

-- Per-thread state below (each wrk thread runs its own copy of this file).
seq = 0
n_2xx, n_3xx, n_4xx, n_5xx, n_other = 0, 0, 0, 0, 0
n_permit, n_not_permit = 0, 0
local key_prefix
local fixed_request

function request()
    if idem_mode == "fixed" then
        if fixed_request == nil then
            fixed_request = wrk.format("POST", path, headers, head .. run_id .. "-fixed" .. tail)
        end
        return fixed_request
    end
    if key_prefix == nil then
        key_prefix = head .. run_id .. "-" .. tostring(thread_no or 0) .. "-"
    end
    seq = seq + 1
    return wrk.format("POST", path, headers, key_prefix .. seq .. tail)
end

if check then
    function response(status, _, body)
        if status >= 200 and status < 300 then
            n_2xx = n_2xx + 1
            if body ~= nil and body:find('"decision":"PERMIT"', 1, true) then
                n_permit = n_permit + 1
            else
                n_not_permit = n_not_permit + 1
            end
        elseif status >= 500 and status < 600 then
            n_5xx = n_5xx + 1
        elseif status >= 400 then
            n_4xx = n_4xx + 1
        elseif status >= 300 then
            n_3xx = n_3xx + 1
        else
            n_other = n_other + 1
        end
    end
end

local function jstr(s)
    return '"' .. tostring(s):gsub('[%c"\\]', function(c)
        return string.format("\\u%04x", c:byte())
    end) .. '"'
end

function done(summary, latency, _)
    local secs = summary.duration / 1e6
    local e = summary.errors
    local sums = { n_2xx = 0, n_3xx = 0, n_4xx = 0, n_5xx = 0, n_other = 0,
                   n_permit = 0, n_not_permit = 0 }
    for _, t in ipairs(threads) do
        for k in pairs(sums) do
            sums[k] = sums[k] + (t:get(k) or 0)
        end
    end
    local parts = {
        '"tool":"wrk"', '"script":' .. jstr(script_name), '"label":' .. jstr(label),
        '"target":' .. jstr((wrk.scheme or "http") .. "://" .. (wrk.host or "?") .. ":"
                            .. tostring(wrk.port or "") .. path),
        '"idem_mode":' .. jstr(idem_mode), '"threads":' .. #threads,
        string.format('"duration_s":%.3f', secs),
        string.format('"requests":%d', summary.requests),
        string.format('"bytes":%d', summary.bytes),
        string.format('"rps":%.1f', secs > 0 and summary.requests / secs or 0),
    }
    local errs = string.format('"connect":%d,"read":%d,"write":%d,"timeout":%d,"status":%d',
                               e.connect, e.read, e.write, e.timeout, e.status)
    if check then
        local non2xx = sums.n_3xx + sums.n_4xx + sums.n_5xx + sums.n_other
        errs = errs .. string.format(',"non_2xx":%d,"non_permit":%d', non2xx, sums.n_not_permit)
        parts[#parts + 1] = string.format(
            '"status_classes":{"2xx":%d,"3xx":%d,"4xx":%d,"5xx":%d,"other":%d}',
            sums.n_2xx, sums.n_3xx, sums.n_4xx, sums.n_5xx, sums.n_other)
        parts[#parts + 1] = string.format('"decisions":{"PERMIT":%d,"other":%d}',
                                          sums.n_permit, sums.n_not_permit)
    end
    parts[#parts + 1] = '"errors":{' .. errs .. '}'
    parts[#parts + 1] = string.format(
        '"latency_us":{"min":%d,"mean":%.1f,"stdev":%.1f,"p50":%d,"p75":%d,"p90":%d,'
            .. '"p95":%d,"p99":%d,"p99_9":%d,"p99_99":%d,"max":%d}',
        latency.min, latency.mean, latency.stdev, latency:percentile(50),
        latency:percentile(75), latency:percentile(90), latency:percentile(95),
        latency:percentile(99), latency:percentile(99.9), latency:percentile(99.99), latency.max)
    local line = "{" .. table.concat(parts, ",") .. "}"
    io.write(line, "\n")
    if json_out ~= nil and json_out ~= "" then
        local out = assert(io.open(json_out, "w"), "evaluate.lua: cannot write JSON_OUT " .. json_out)
        out:write(line, "\n")
        out:close()
    end
end
