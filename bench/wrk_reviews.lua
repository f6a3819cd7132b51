-- wrk script for the server benchmark: POST AdmissionReviews over keep-alive HTTPS.
--   BENCH_REQUESTS  file with one request per line: "<path>\t<compact JSON body>", sent in turn
--   BENCH_OUT       where done() writes the summary and latency percentiles (JSON, microseconds)
-- Every "@NONCE@" in a body is replaced by a per-request counter (server_bench.with_nonce: each
-- request's containers are new to the server, so its memo of command lines cannot answer for it).
local paths = {}
local bodies = {}
local headers = {["Content-Type"] = "application/json"}
local i = 0
local n = 0

init = function(args)
  for line in io.lines(os.getenv("BENCH_REQUESTS")) do
    local path, body = line:match("^([^\t]+)\t(.*)$")
    paths[#paths + 1] = path
    bodies[#bodies + 1] = body
  end
end

request = function()
  i = i % #bodies + 1
  n = n + 1
  local body = bodies[i]:gsub("@NONCE@", tostring(n))
  return wrk.format("POST", paths[i], headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  local parts = {}
  local ps = {}
  for p = 1, 99 do ps[#ps + 1] = p end
  for _, p in ipairs({0.1, 0.5, 99.5, 99.9, 99.99, 100}) do ps[#ps + 1] = p end
  table.sort(ps)
  for _, p in ipairs(ps) do
    -- percentile(100) answers 0 in wrk: the maximum is latency.max
    local v = p == 100 and latency.max or latency:percentile(p)
    parts[#parts + 1] = string.format('["%g", %d]', p, v)
  end
  local out = io.open(os.getenv("BENCH_OUT"), "w")
  out:write(string.format(
    '{"duration_us": %d, "requests": %d, "bytes": %d, "errors": {"connect": %d, "read": %d, "write": %d, ' ..
    '"status": %d, "timeout": %d}, "latency_min_us": %d, "latency_max_us": %d, "latency_mean_us": %.1f, ' ..
    '"percentiles_us": [%s]}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, table.concat(parts, ", ")))
  out:close()
end
