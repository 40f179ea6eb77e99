-- restart_fill.lua — wrk script of scripts/bench-restart: fills a ledger with PERMIT records
-- that each carry a fresh idempotency key and a fresh nonce (so the restart rebuilds one key,
-- one nonce and one receipt-index entry per record), and stops each thread after its quota.
--
-- Environment: TOKEN (Bearer token), QUOTA (requests per wrk thread), RUN_ID (key prefix).
-- It checks nothing but the status: replies >= 400 are wrk's own error count.

local token = os.getenv("TOKEN") or "bench-token"
local quota = tonumber(os.getenv("QUOTA") or "1000")
local run_id = os.getenv("RUN_ID") or tostring(os.time())
local head = '{"surface":"payments.charge","action":"charge","actor":"agent.billing",' ..
             '"context":{"amount":4999,"currency":"USD","merchant":"books-and-co"},' ..
             '"signals":{"riskScore":0.12,"rsdSpike":false},"idempotency_key":"'
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. token}

local n_threads = 0
function setup(thread)
    n_threads = n_threads + 1
    thread:set("thread_no", n_threads)
end

sent, answered = 0, 0

function request()
    sent = sent + 1
    local k = run_id .. "-" .. tostring(thread_no) .. "-" .. tostring(sent)
    return wrk.format("POST", "/v1/evaluate", headers, head .. k .. '","nonce":"n' .. k .. '"}')
end

function response(status, hdrs, body)
    answered = answered + 1
    if answered >= quota then
        wrk.thread:stop()
    end
end
