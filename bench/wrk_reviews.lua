-- wrk script for the server benchmark: POST AdmissionReviews over keep-alive HTTPS.
--   BENCH_REQUESTS  file with one request per line: "<path>\t<compact JSON body>", sent in order, again
--                   and again (one pass = the whole file once)
--   BENCH_OUT       where done() writes the summary and latency percentiles (JSON, microseconds)
--   BENCH_NONCE0    first value of the request counter (server_bench gives every wrk run its own range)
--   BENCH_PASS0     number of the first pass (likewise)
-- Placeholders, filled in each request's body (only lines that hold them are rewritten):
--   "@NONCE@"  the request counter (cold traffic, server_bench.with_nonce: every request's containers are
--              new to the server, so its memo of command lines cannot answer for it)
--   "@PASS@"   6 hex digits of the pass; "@P2@" 2 characters of the pass (corpus.fill: the per-pod uids and
--              random suffixes of the controller traffic, so a pod is never sent twice alike)
-- wrk calls request() once after init to check the script (script_verify_request), so the first line of
-- the first pass is never sent; passes still start at line 1, so a /mutate and the /validate after it
-- (lines 2k-1, 2k) always share their pass.
local paths = {}
local bodies = {}
local has_nonce = {}
local has_pass = {}
local headers = {["Content-Type"] = "application/json"}
local alphabet = "bcdfghjklmnpqrstvwxz2456789"
local i = 0
local n = tonumber(os.getenv("BENCH_NONCE0") or "0") or 0
local pass = tonumber(os.getenv("BENCH_PASS0") or "0") or 0
local pass_hex, pass_chars

local function set_pass()
  pass_hex = string.format("%06x", pass % 16777216)
  local a, b = math.floor(pass / 27) % 27 + 1, pass % 27 + 1
  pass_chars = alphabet:sub(a, a) .. alphabet:sub(b, b)
end

init = function(args)
  for line in io.lines(os.getenv("BENCH_REQUESTS")) do
    local path, body = line:match("^([^\t]+)\t(.*)$")
    paths[#paths + 1] = path
    bodies[#bodies + 1] = body
    has_nonce[#bodies] = body:find("@NONCE@", 1, true) ~= nil
    has_pass[#bodies] = body:find("@PASS@", 1, true) ~= nil or body:find("@P2@", 1, true) ~= nil
  end
  set_pass()
end

request = function()
  i = i + 1
  if i > #bodies then
    i = 1
    pass = pass + 1
    set_pass()
  end
  n = n + 1
  local body = bodies[i]
  if has_nonce[i] then body = body:gsub("@NONCE@", string.format("%d", n)) end
  if has_pass[i] then body = body:gsub("@PASS@", pass_hex):gsub("@P2@", pass_chars) end
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
