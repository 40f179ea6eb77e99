// evaluate_bench.js — k6 load script: POST /v1/evaluate with the representative spend request.
//
//   k6 run --env BASE_URL=http://127.0.0.1:8080 --env VUS=50 --env DURATION=60s \
//          --env TOKEN=bench-token bench/load/evaluate_bench.js
//
// The same workload as bench/load/evaluate.lua (wrk): body.json beside this file with its
// {{IDEM}} replaced per request by a fresh idempotency key "<run>-<vu>-<iteration>", so every
// request runs the whole pipeline; every reply is checked for status 200 and
// "decision":"PERMIT". Each of VUS virtual users sends its next request as soon as the
// previous reply arrives (closed loop, like wrk's connections), for DURATION.
//
// Environment (--env NAME=value):
//   BASE_URL  http://127.0.0.1[:port], http://localhost[:port] or http://[::1][:port] only
//             (the script refuses anything else)                       [http://127.0.0.1:8080]
//   TOKEN     Bearer token                                             [bench-token]
//   VUS       virtual users                                            [50]
//   DURATION  k6 duration                                              [60s]
//   ENDPOINT  /v1/evaluate or /decide                                  [/v1/evaluate]
//   RUN_ID    prefix of the idempotency keys                           [k6-<time>-<random>]
//   OUTPUT    also write the run as JSON (docs/BENCHMARKS.md run shape) to this file
//
// Output: one line on stdout starting with '{' (RPS, percentiles, errors) and, with OUTPUT,
// a document with the run shape of docs/BENCHMARKS.md ("runs"[0]: concurrency = VUS,
// latency_ms from http_req_duration, the 105-point digest from k6's own trend percentiles,
// errors by kind). k6 cannot read the host's compiler or library versions: those fields say
// "unknown"; scripts/loadtest (wrk) writes the complete artifact.
// What this does not measure: open-loop latency (k6 VUs here are closed-loop), and k6's own
// CPU use on a shared machine.

import http from 'k6/http';
import { check } from 'k6';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';

const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const LOOPBACK = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d{1,5})?$/;
if (!LOOPBACK.test(BASE_URL)) {
    throw new Error(`BASE_URL ${BASE_URL}: only http://127.0.0.1, http://localhost or ` +
        'http://[::1] (optional port, no path) may receive benchmark traffic');
}
const ENDPOINT = __ENV.ENDPOINT || '/v1/evaluate';
if (ENDPOINT !== '/v1/evaluate' && ENDPOINT !== '/decide') {
    throw new Error('ENDPOINT must be /v1/evaluate or /decide');
}
const TOKEN = __ENV.TOKEN || 'bench-token';
const VUS = parseInt(__ENV.VUS || '50', 10);
const DURATION = __ENV.DURATION || '60s';
if (!(VUS >= 1)) {
    throw new Error('VUS must be a positive integer');
}

const TEMPLATE = open('./body.json').replace(/\s+$/, '');
const MARK = TEMPLATE.indexOf('{{IDEM}}');
if (MARK < 0) {
    throw new Error('body.json has no {{IDEM}} placeholder');
}
const HEAD = TEMPLATE.slice(0, MARK);
const TAIL = TEMPLATE.slice(MARK + '{{IDEM}}'.length);

// The percentiles of every digest (bench/common/stats.c): 0..99 by 1, then the tail.
const DIGEST_PCTS = [];
for (let p = 0; p < 100; p++) {
    DIGEST_PCTS.push(p);
}
DIGEST_PCTS.push(99.5, 99.9, 99.95, 99.99, 100);
const TREND_STATS = ['min', 'avg', 'max'].concat(
    DIGEST_PCTS.filter((p) => p > 0 && p < 100).map((p) => `p(${p})`));

export const options = {
    scenarios: {
        evaluate: { executor: 'constant-vus', vus: VUS, duration: DURATION },
    },
    summaryTrendStats: TREND_STATS,
    thresholds: {
        // Fail the run (non-zero exit) on any error rather than report a number with errors.
        tg_errors: ['count<1'],
    },
};

const errorsStatus = new Counter('tg_errors_status');
const errorsDecision = new Counter('tg_errors_decision');
const errorsTransport = new Counter('tg_errors_transport');
const errorsAll = new Counter('tg_errors');

export function setup() {
    const v = http.get(`${BASE_URL}/version`);
    let server = {};
    if (v.status === 200) {
        try {
            server = JSON.parse(v.body);
        } catch (e) {
            server = {};
        }
    }
    const runId = __ENV.RUN_ID || `k6-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
    return { runId, server };
}

export default function (data) {
    const key = `${data.runId}-${exec.vu.idInTest}-${exec.vu.iterationInInstance}`;
    const res = http.post(`${BASE_URL}${ENDPOINT}`, HEAD + key + TAIL, {
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
        tags: { name: ENDPOINT },
    });
    const ok = check(res, {
        'status is 200': (r) => r.status === 200,
        'decision is PERMIT': (r) => typeof r.body === 'string' &&
            r.body.indexOf('"decision":"PERMIT"') !== -1,
    });
    if (!ok) {
        errorsAll.add(1);
        if (res.status === 0) {
            errorsTransport.add(1);
        } else if (res.status !== 200) {
            errorsStatus.add(1);
        } else {
            errorsDecision.add(1);
        }
    }
}

function counterValue(data, name) {
    const m = data.metrics[name];
    return m && m.values && typeof m.values.count === 'number' ? m.values.count : 0;
}

export function handleSummary(data) {
    const d = data.metrics.http_req_duration.values;
    const reqs = counterValue(data, 'http_reqs');
    const seconds = data.state.testRunDurationMs / 1000;
    const kinds = {
        transport: counterValue(data, 'tg_errors_transport'),
        non_200: counterValue(data, 'tg_errors_status'),
        non_permit: counterValue(data, 'tg_errors_decision'),
    };
    const count = kinds.transport + kinds.non_200 + kinds.non_permit;
    const at = (p) => (p === 0 ? d.min : p === 100 ? d.max : d[`p(${p})`]);
    const round6 = (x) => Math.round(x * 1e6) / 1e6;
    const run = {
        name: `vus${VUS}`,
        concurrency: VUS,
        iterations: null,
        duration_s: round6(seconds),
        requests: reqs,
        ok: reqs - kinds.non_200 - kinds.non_permit,
        latency_ms: {
            min: round6(d.min), mean: round6(d.avg), p50: round6(at(50)), p90: round6(at(90)),
            p95: round6(at(95)), p99: round6(at(99)), p99_9: round6(at(99.9)),
            max: round6(d.max),
        },
        digest: {
            definition: "k6 http_req_duration trend percentiles; p0 = min, p100 = max",
            percentiles: DIGEST_PCTS,
            latency_ms: DIGEST_PCTS.map((p) => round6(at(p))),
        },
        throughput_per_s: seconds > 0 ? Math.round((reqs / seconds) * 10) / 10 : 0,
        throughput_source: 'k6: http_reqs / test run duration',
        errors: { count, rate: reqs > 0 ? Math.min(1, count / reqs) : 0, by_kind: kinds },
    };
    const server = (data.setup_data && data.setup_data.server) || {};
    const doc = {
        schema: 'trigguard-bench/1',
        benchmark: ENDPOINT === '/decide' ? 'http_decide_load' : 'http_evaluate_load',
        what: `POST ${ENDPOINT} under closed-loop load: ${VUS} k6 virtual users for ${DURATION}`,
        harness: 'bench/load/evaluate_bench.js (k6)',
        method: 'k6 http_req_duration per request (sending to end of receiving); every ' +
            'reply checked for status 200 and PERMIT; a fresh idempotency key per request',
        not_measured: 'open-loop latency; the load generator shares the machine with the daemon',
        parameters: { base_url: BASE_URL, endpoint: ENDPOINT, vus: VUS, duration: DURATION,
            idempotency_keys: 'unique per request' },
        server: {
            engine: server.engine || 'unknown', build_commit: server.build_commit || 'unknown',
            durability: server.durability || 'unknown',
            policy_version: server.policy_version || 'unknown',
            policy_hash: server.policy_hash || 'unknown',
        },
        environment: {
            note: 'k6 cannot read the host facts; run scripts/loadtest for a complete artifact',
            git_commit: server.build_commit || 'unknown',
            durability: server.durability || 'unknown',
            date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        },
        runs: [run],
    };
    const line = JSON.stringify({
        tool: 'k6', target: `${BASE_URL}${ENDPOINT}`, vus: VUS, duration_s: run.duration_s,
        requests: reqs, rps: run.throughput_per_s, latency_ms: run.latency_ms,
        errors: run.errors,
    });
    const out = { stdout: `${line}\n` };
    if (__ENV.OUTPUT) {
        out[__ENV.OUTPUT] = `${JSON.stringify(doc)}\n`;
    }
    return out;
}
