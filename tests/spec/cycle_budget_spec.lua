-- cycle_budget_spec.lua — a whole cycle has a time budget.  A policy whose
-- every call is legal (well inside its instruction and time budgets) can
-- still be slow over a cycle: one score call per node class, times many
-- classes.  Past the cycle budget the rest of the cycle uses the built-in
-- policies, with a PolicyFailed warning naming the policy and the budget.
local H = require "tests.spec.helper"

-- The default bin-packing score after a busy loop of a few million
-- instructions (some milliseconds): legal per call, slow per cycle.
local SLOW = [[
local M = {}
function M.score(pod, node)
  local x = 0
  for i = 1, 1500000 do x = x + i end
  local function fraction(used, capacity)
    if capacity == 0 then return 0 end
    return used / capacity
  end
  return 1000 * fraction(node.allocated.gpu + pod.requests.gpu, node.capacity.gpu)
         + fraction(node.allocated.cpu + pod.requests.cpu, node.capacity.cpu) + x * 0
end
return M
]]

-- 40 nodes of distinct CPU sizes (40 node classes) and pods arriving in two
-- cycles: each pod costs 40 slow calls.
local function scenario()
  local nodes = {}
  for i = 1, 40 do nodes[i] = H.node(string.format("n%02d", i), 8, { cpu = tostring(32 + i) }) end
  return {
    name = "slow policy", cycle_interval = 10, horizon = 10,
    nodes = nodes,
    queues = { H.queue("ml", 320) },
    workloads = {
      { name = "a", queue = "ml", replicas = 6, requests = { gpu = 1 } },
      { name = "b", queue = "ml", replicas = 6, requests = { gpu = 1 }, submit_at = 10 },
    },
  }
end

local function budget_events(out)
  return H.events(out, function(e)
    return e.reason == "PolicyFailed" and e.annotations and e.annotations["cycle-budget"] ~= nil
  end)
end

describe("the cycle budget", function()
  local dir
  setup(function() dir = H.policy_dir({ ["placement.lua"] = SLOW }) end)
  teardown(function() H.remove_dir(dir) end)

  it("hands a policy slow over a cycle to the built-in for the rest of that cycle, with a warning", function()
    local out = H.run(scenario(), { policies = dir, cycle_budget = 0.05 })
    local ev = budget_events(out)
    -- once per cycle at most, and in both cycles (the next asks again)
    assert.are.equal(2, #ev)
    assert.are.same({ 1, 2 }, { ev[1].cycle, ev[2].cycle })
    for _, e in ipairs(ev) do
      assert.are.equal("Warning", e.type)
      assert.are.equal("placement.lua", e.annotations.policy)
      assert.are.equal("0.05", e.annotations["cycle-budget"])
      assert.truthy(e.message:find("cycle budget", 1, true), e.message)
      assert.truthy(e.message:find("0.05 s", 1, true), e.message)
      assert.truthy(e.message:find("built-in", 1, true), e.message)
    end
    -- nothing else failed: no other policy warning in those cycles
    assert.are.equal(2, #H.events(out, function(e) return e.reason == "PolicyFailed" end))
    -- what happened instead: every pod placed, where the built-in puts it
    -- (the slow policy scores like the built-in)
    local builtin = H.run(scenario(), { policies = false })
    local placed = H.decisions(out, function(d) return d.op == "bind" end)
    assert.are.equal(12, #placed)
    assert.are.same(H.decisions(builtin), H.decisions(out))
  end)

  it("leaves a policy alone within the budget", function()
    local out = H.run(scenario(), { policies = dir, cycle_budget = 600 })
    assert.are.equal(0, #budget_events(out))
    assert.are.equal(0, #H.events(out, function(e) return e.reason == "PolicyFailed" end))
    assert.are.equal(12, #H.decisions(out, function(d) return d.op == "bind" end))
  end)

  it("is an engine option: a slow cycle of the embedding API falls back the same way", function()
    local e <close> = H.understory.engine { policies = dir, cycle_budget = 0.05 }
    for _, n in ipairs(scenario().nodes) do e:upsert_node(n) end
    e:upsert_queue(H.queue("ml", 320))
    e:upsert_workload({ name = "a", queue = "ml", replicas = 6, requests = { gpu = 1 } }, 0)
    local res = e:run_cycle(0)
    local ev = {}
    for _, x in ipairs(res.events) do
      if x.reason == "PolicyFailed" then ev[#ev + 1] = x end
    end
    assert.are.equal(1, #ev)
    assert.are.equal("0.05", ev[1].annotations["cycle-budget"])
    assert.are.equal("placement.lua", ev[1].annotations.policy)
    assert.are.equal(6, #res.decisions) -- every pod bound, by the built-in placement
  end)

  it("is a positive number of seconds", function()
    for _, bad in ipairs({ 0, -1, "5", 0 / 0 }) do
      assert.has_error(function() H.run(scenario(), { cycle_budget = bad }) end,
                       "opts.cycle_budget: expected a positive number of seconds")
    end
  end)
end)
