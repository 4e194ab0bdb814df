-- input_spec.lua — inputs that pass validation never overflow or go NaN,
-- and inputs past a bound are refused at load with the JSON path at fault.
-- Property tests over seeded random cases (deterministic: same seeds, same
-- cases), run against both builds by tests/run.sh; under the sanitizer
-- build an overflow aborts the run.
local H = require "tests.spec.helper"

local MAX = math.maxinteger

-- Lua integers wrap; the engine's sums saturate at the int64 maximum.
local function sat_add(a, b)
  if a > MAX - b then return MAX end
  return a + b
end

local function sat_mul(n, x)
  local s = 0
  for _ = 1, n do s = sat_add(s, x) end
  return s
end

local function rng(seed)
  local s = seed
  return function(lo, hi)
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + s % (hi - lo + 1)
  end
end

local function load_error(scenario)
  local ok, err = pcall(H.understory.simulate, scenario, {})
  assert.is_false(ok, "the scenario was loaded")
  return tostring(err)
end

describe("quantities", function()

  -- One queue (quota 0, weight 1): its fair share is min(capacity, demand),
  -- its allocation what runs, whatever the sizes: up to 1,500 nodes and
  -- pods of up to 8Pi each, so sums pass 2^63 and saturate.
  it("sum without overflow: fair share is min(capacity, demand), saturated", function()
    for seed = 1, 12 do
      local r = rng(seed)
      local nnodes = seed % 3 == 0 and r(1025, 1500) or r(1, 40)
      local node_gi = seed % 2 == 0 and 8388608 or r(1, 8388608)    -- up to 8Pi
      local pod_gi = seed % 4 < 2 and 8388608 or r(1, 8388608)
      local replicas = seed % 3 == 1 and r(1025, 1500) or r(1, 60)
      local nodes = {}
      for i = 1, nnodes do
        nodes[i] = { name = string.format("n%04d", i), cpu = "1", memory = node_gi .. "Gi" }
      end
      local out = H.run({
        name = "sums " .. seed, horizon = 0, nodes = nodes, queues = { { name = "q" } },
        workloads = { { name = "w", queue = "q", replicas = replicas, min_member = 1,
                        requests = { memory = pod_gi .. "Gi" } } },
      }, { policies = false })
      local gi = 1 << 30
      local capacity = sat_mul(nnodes, node_gi * gi)
      local demand = sat_mul(replicas, pod_gi * gi)
      local q = H.queue_figures(out, "q")
      assert.are.equal(math.min(capacity, demand), q.fair_share.memory, "seed " .. seed)
      local running = 0
      for _, p in ipairs(out.final.pods) do
        if p.state == "running" then running = running + 1 end
      end
      -- one pod per node at most fits when pods are as large as nodes
      assert.is_true(running <= replicas)
      assert.are.equal(sat_mul(running, pod_gi * gi), q.allocated.memory, "seed " .. seed)
      assert.is_true(q.allocated.memory >= 0)
    end
  end)

  it("past the per-quantity bound are refused at load, naming the field", function()
    local err = load_error({
      nodes = { { name = "n1", memory = "9Pi" } }, queues = { { name = "q" } } })
    assert.matches("nodes%[0%]%.memory: \"9Pi\" is not a memory quantity %(too large%)", err)
  end)
end)

describe("over-quota weights", function()

  -- Two queues of equal weight split the over-quota room evenly and hand
  -- out all of it, for every weight the loader accepts.
  it("any accepted weight gives finite, even shares that add up to the capacity", function()
    local weights = { 1e-300, 0.001, 1, 7, 1000, 999999.5, 1000000 }
    local r = rng(42)
    for _ = 1, 5 do weights[#weights + 1] = r(1, 1000000) end
    for _, w in ipairs(weights) do
      for _, pol in ipairs({ "policies", false }) do
        local out = H.run({
          name = "weights", horizon = 0,
          nodes = { H.node("n1", 8) },
          queues = {
            { name = "a", resources = { gpu = { quota = 0, over_quota_weight = w } } },
            { name = "b", resources = { gpu = { quota = 0, over_quota_weight = w } } } },
          workloads = {
            { name = "wa", queue = "a", replicas = 8, min_member = 1, requests = { gpu = 1 } },
            { name = "wb", queue = "b", replicas = 8, min_member = 1, requests = { gpu = 1 } } },
        }, { policies = pol })
        local a, b = H.queue_figures(out, "a"), H.queue_figures(out, "b")
        assert.are.equal(4, a.fair_share.gpu, "weight " .. w)
        assert.are.equal(4, b.fair_share.gpu, "weight " .. w)
        for _, e in ipairs(H.events(out)) do
          assert.is_nil(e.reason:match("^Policy"), "weight " .. w .. ": " .. e.message)
        end
      end
    end
  end)

  it("above 1,000,000 are refused at load, naming the field", function()
    for _, w in ipairs({ 1000000.5, 1e308 }) do
      local err = load_error({
        nodes = { H.node("n1", 8) },
        queues = { { name = "a", resources = { gpu = { quota = 0, over_quota_weight = w } } } } })
      assert.matches("queues%[0%]%.resources%.gpu%.over_quota_weight: .* is more than 1000000", err)
    end
  end)
end)

describe("names", function()

  it("longer than Kubernetes' 253 characters are refused at load, naming the field", function()
    local long = string.rep("w", 254)
    local cases = {
      { { nodes = { { name = long } } }, "nodes%[0%]%.name: is 254 characters long" },
      { { queues = { { name = long } } }, "queues%[0%]%.name: is 254 characters long" },
      { { queues = { { name = "q" } }, workloads = { { name = string.rep("x", 600), queue = "q" } } },
        "workloads%[0%]%.name: is 600 characters long" },
      { { nodes = { { name = "n1", gpu = 1 } }, queues = { { name = "q" } },
          workloads = { { name = "w", queue = "q", pods = { { name = long, node = "n1", state = "running" } } } } },
        "workloads%[0%]%.pods%[0%]%.name: is 254 characters long" },
    }
    for _, c in ipairs(cases) do assert.matches(c[2], load_error(c[1])) end
  end)

  -- Names at the bound, sharing long prefixes, on daemonsets and replicas:
  -- every live pod has a name of its own, which starts with its workload's.
  it("at the bound give every pod a distinct name", function()
    for seed = 1, 6 do
      local r = rng(seed)
      local prefix = string.rep("p", r(200, 240))
      local function name(tag, len)
        return (prefix .. tag .. string.rep("z", 253)):sub(1, len)
      end
      local nodes, workloads = {}, {}
      for i = 1, r(2, 5) do nodes[i] = { name = name("n" .. i, r(250, 253)), gpu = 8, cpu = "64" } end
      for i = 1, r(2, 4) do
        workloads[#workloads + 1] = { name = name("w" .. i, r(250, 253)), queue = "q",
          replicas = r(11, 13), min_member = 1, requests = { cpu = "100m" } }
        workloads[#workloads + 1] = { name = name("d" .. i, 253), queue = "q",
          controller = "daemonset", requests = { cpu = "100m" } }
      end
      local out = H.run({ name = "names", horizon = 0, nodes = nodes,
                          queues = { { name = "q" } }, workloads = workloads }, { policies = false })
      local seen, count = {}, 0
      for _, p in ipairs(out.final.pods) do
        assert.is_nil(seen[p.name], "seed " .. seed .. ": two pods named " .. p.name)
        seen[p.name] = true
        count = count + 1
        assert.are.equal(p.workload .. "-", p.name:sub(1, #p.workload + 1))
      end
      local expected = 0
      for _, w in ipairs(workloads) do expected = expected + (w.replicas or #nodes) end
      assert.are.equal(expected, count)
    end
  end)
end)

-- Every field at the edges the loader accepts, drawn at random: the run
-- finishes, and every figure it reports is a finite number >= 0.  Under
-- the sanitizer build an overflow or a conversion of a NaN aborts it.
describe("any valid scenario", function()

  local function pick(r, list) return list[r(1, #list)] end

  local function finite(x) return type(x) == "number" and x == x and x > -math.huge and x < math.huge end

  local function check_res(res, what)
    for _, k in ipairs({ "gpu", "cpu", "memory" }) do
      assert.is_true(finite(res[k]) and res[k] >= 0, what .. "." .. k .. " = " .. tostring(res[k]))
    end
  end

  it("at the edges of every bound runs to the end with finite figures", function()
    local MAXCPU, MAXMEM = "9007199254740992m", "9007199254740992"
    for seed = 1, 40 do
      local r = rng(seed)
      local times = { 0, 1e-300, 1, 1e300 }
      local nodes, queues, workloads = {}, {}, {}
      for i = 1, r(1, 4) do
        nodes[i] = { name = "n" .. i, gpu = pick(r, { 0, 1, 8, 64, 64 }),
                     cpu = pick(r, { "0", "1m", "64", MAXCPU, MAXCPU }),
                     memory = pick(r, { "0", "1", "512Gi", MAXMEM, MAXMEM }) }
      end
      for i = 1, r(1, 3) do
        local res = {}
        for _, k in ipairs({ "gpu", "cpu", "memory" }) do
          local max = k == "gpu" and 1000000 or (k == "cpu" and MAXCPU or MAXMEM)
          res[k] = { quota = pick(r, { 0, -1, -1, max }), limit = pick(r, { -1, -1, 0, max }),
                     over_quota_weight = pick(r, { 0, 5e-324, 1, 1000000 }) }
        end
        queues[i] = { name = "q" .. i, priority = pick(r, { -1000000000, 0, 1000000000 }), resources = res }
      end
      for i = 1, r(1, 4) do
        local replicas = pick(r, { 1, 3, 1000 })
        workloads[i] = {
          name = "w" .. i, queue = "q" .. r(1, #queues),
          priority = pick(r, { -1000000000, 1000000000, "train", "inference" }),
          replicas = replicas, min_member = pick(r, { 1, replicas }),
          requests = { gpu = pick(r, { 0, 0.001, 0.999, 1, 1, 64, 1000000 }),
                       cpu = pick(r, { "0", "1m", "1", MAXCPU }),
                       memory = pick(r, { "0", "1", "1Gi", MAXMEM }) },
          termination_grace = pick(r, times), submit_at = pick(r, { 0, 0, 1e300 }),
        }
        if r(1, 2) == 1 then workloads[i].duration = pick(r, { 1e-300, 1, 1e300 }) end
        if r(1, 3) == 1 then
          workloads[i].labels = { ["kai.scheduler/background"] = "true" }
          workloads[i].requests.gpu = pick(r, { 0, 1 })
        end
      end
      local ci = pick(r, { 1e-300, 10, 1e300 })
      for i = 1, #workloads do
        if r(1, 3) == 1 then workloads[i].created_at = pick(r, { -1e12, 0, 1e300 }) end
      end
      for i = 1, #queues do
        if r(1, 3) == 1 then queues[i].created_at = pick(r, { -1e12, 0, 1e300 }) end
      end
      local timeline = {}
      for _ = 1, r(0, 4) do
        local at, kind = ci * r(0, 2), r(1, 5)
        if kind == 1 then
          timeline[#timeline + 1] = { at = at, action = "delete", workload = "w" .. r(1, #workloads) }
        elseif kind == 2 then
          timeline[#timeline + 1] = { at = at, action = "complete", workload = "w" .. r(1, #workloads) }
        elseif kind == 3 then
          timeline[#timeline + 1] = { at = at, action = "remove_node", node = "n" .. r(1, #nodes) }
        elseif kind == 4 then
          timeline[#timeline + 1] = { at = at, action = "cordon", node = "n" .. r(1, #nodes) }
        else
          timeline[#timeline + 1] = { at = at, action = "add_node",
                                      node = { name = "x" .. #timeline, gpu = 64, cpu = MAXCPU, memory = MAXMEM } }
        end
      end
      local out = H.run({ name = "edges " .. seed, cycle_interval = ci, horizon = 3 * ci,
                          nodes = nodes, queues = queues, workloads = workloads,
                          timeline = #timeline > 0 and timeline or nil },
                        { policies = seed % 2 == 0 and "policies" or false })
      for _, c in ipairs(out.cycles) do
        assert.is_true(finite(c.time), "seed " .. seed)
        for _, q in ipairs(c.queues or {}) do
          check_res(q.allocated, "seed " .. seed .. " cycle " .. c.cycle .. " " .. q.name .. ".allocated")
          check_res(q.fair_share, "seed " .. seed .. " cycle " .. c.cycle .. " " .. q.name .. ".fair_share")
        end
      end
      for _, q in ipairs(out.final.queues) do
        check_res(q.allocated, "seed " .. seed .. " final " .. q.name .. ".allocated")
        check_res(q.fair_share, "seed " .. seed .. " final " .. q.name .. ".fair_share")
      end
      for _, k in ipairs({ "cycles", "background_evictions", "preemptions", "reclaims", "ai_pods_pending" }) do
        assert.is_true(finite(out.summary[k]) and out.summary[k] >= 0, "seed " .. seed .. " summary." .. k)
      end
    end
  end)
end)
