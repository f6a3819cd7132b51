-- wrk script for the server benchmark: POST AdmissionReviews over keep-alive HTTPS.
--   BENCH_REQUESTS  file with one request per line: "<path>\t<compact JSON body>", sent in turn
--   BENCH_OUT       where done() writes the summary and latency percentiles (JSON, microseconds)
local requests = {}
local i = 0

init = function(args)
  local headers = {["Content-Type"] = "application/json"}
  for line in io.lines(os.getenv("BENCH_REQUESTS")) do
    local path, body = line:match("^([^\t]+)\t(.*)$")
    requests[#requests + 1] = wrk.format("POST", path, headers, body)
  end
end

request = function()
  i = i % #requests + 1
  return requests[i]
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
