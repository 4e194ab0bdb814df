-- policy_contract_spec.lua — the C core checks every policy result against
-- the invariants: a result that breaks one is rejected, with a Warning event
-- naming the policy and the rule, and the cycle goes on with the built-in
-- policy; a policy that fails is reported and replaced the same way.
local H = require "tests.spec.helper"

local read = H.read

local policy_dir = H.policy_dir

local remove_dir = H.remove_dir

local scenario = "examples/seed-story.json"

local function strip_policy_events(out)
  for _, c in ipairs(out.cycles) do
    local kept = {}
    for _, e in ipairs(c.events or {}) do
      if e.reason ~= "PolicyRejected" and e.reason ~= "PolicyFailed" then kept[#kept + 1] = e end
    end
    c.events = kept
  end
  return out
end

local function same_as_builtin(out)
  local builtin = H.without_policy_ids(H.run(scenario, { policies = false }))
  assert.are.same(builtin, H.without_policy_ids(strip_policy_events(out)))
end

describe("policy results", function()
  it("a background result that overfills a node is rejected, named, and replaced", function()
    local dir = policy_dir({ ["background.lua"] = [[
      local M = {}
      function M.reoffer(view)
        -- keep everything and place every pending pod on its first candidate
        local keep, place = {}, {}
        for _, p in ipairs(view.running) do keep[#keep + 1] = p.name end
        for _, p in ipairs(view.pending) do
          if p.candidates[1] then place[p.name] = p.candidates[1] end
        end
        return { keep = keep, place = place }
      end
      return M
    ]] })
    local out = H.run(scenario, { policies = dir })
    remove_dir(dir)
    local ev = H.events(out, function(e) return e.reason == "PolicyRejected" end)
    assert.is_true(#ev > 0)
    assert.are.equal("Warning", ev[1].type)
    assert.are.equal("background.lua", ev[1].object)
    assert.truthy(ev[1].message:find("over capacity", 1, true), ev[1].message)
    same_as_builtin(out)
  end)

  it("a fair share larger than the pool is rejected, named, and replaced", function()
    local dir = policy_dir({ ["fairshare.lua"] = [[
      local M = {}
      function M.compute(view)
        local out = {}
        for _, q in ipairs(view.queues) do out[q.name] = { gpu = 1000, cpu = 0, memory = 0 } end
        return out
      end
      return M
    ]] })
    local out = H.run(scenario, { policies = dir })
    remove_dir(dir)
    local ev = H.events(out, function(e) return e.reason == "PolicyRejected" end)
    assert.is_true(#ev > 0)
    assert.are.equal("fairshare.lua", ev[1].object)
    assert.truthy(ev[1].message:find("more gpu than", 1, true), ev[1].message)
    same_as_builtin(out)
  end)

  it("a failing placement policy is reported with file:line and replaced", function()
    local dir = policy_dir({ ["placement.lua"] = "local M = {}\nfunction M.score(pod, node)\n  return pod.nope.x\nend\nreturn M\n" })
    local out = H.run(scenario, { policies = dir })
    remove_dir(dir)
    local ev = H.events(out, function(e) return e.reason == "PolicyFailed" end)
    assert.is_true(#ev > 0)
    assert.are.equal("placement.lua", ev[1].object)
    assert.truthy(ev[1].message:find("placement.lua:3:", 1, true), ev[1].message)
    same_as_builtin(out)
  end)

  it("a runaway policy is cut off by the instruction budget and replaced", function()
    local dir = policy_dir({ ["placement.lua"] = "local M = {}\nfunction M.score(pod, node)\n  while true do end\nend\nreturn M\n" })
    local out = H.run(scenario, { policies = dir, instructions = 100000 })
    remove_dir(dir)
    local ev = H.events(out, function(e) return e.reason == "PolicyFailed" end)
    assert.is_true(#ev > 0)
    assert.truthy(ev[1].message:find("instruction budget", 1, true), ev[1].message)
    same_as_builtin(out)
  end)

  it("the default Lua policies decide exactly what the built-in C ones do", function()
    for _, f in ipairs({ "examples/seed-story.json", "examples/reclaim.json",
                         "examples/preempt.json", "examples/controllers.json" }) do
      assert.are.same(H.without_policy_ids(H.run(f, { policies = false })),
                      H.without_policy_ids(H.run(f)))
    end
  end)
end)
