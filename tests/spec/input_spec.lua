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
