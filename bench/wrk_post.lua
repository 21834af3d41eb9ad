-- wrk script: POST a small non-stream chat completion and print a JSON summary line.
-- Env: WRK_BODY_FILE (JSON body), WRK_AUTH (Authorization header value).
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = os.getenv("WRK_AUTH") or "Bearer sk-bench"

done = function(summary, latency, requests)
  -- errors.status counts responses with status > 399 (wrk); no per-response Lua hook, so
  -- wrk keeps its fast path.
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,' ..
    '"max_us":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"status_errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, latency.max, e.connect, e.read, e.write, e.timeout, e.status))
end
