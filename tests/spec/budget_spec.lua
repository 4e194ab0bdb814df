-- budget_spec.lua — a runaway policy in a running simulation: an infinite
-- loop, a runaway recursion and a memory bomb, in each of the three policy
-- files, are cut off within budget and reported as a Warning event (policy
-- file, file:line, message); the cycle completes with the last good version
-- of that policy, or the built-in one when there is none; nothing the cut-off
-- call decided is used.
local H = require "tests.spec.helper"

local read = H.read

local policy_dir = H.policy_dir

local remove_dir = H.remove_dir

-- Small budgets keep the runaways quick; the bomb gets the default
-- instruction budget so that memory runs out first.  The time limit is not
-- what is tested here: a generous one keeps a loaded machine from cutting
-- a call by time first (hostile_spec.lua tests the time limit).
local OPTS = {
  loop = { instructions = 200000, memory = "24Mi", time_limit = 60000 },
  recursion = { instructions = 200000, memory = "24Mi", time_limit = 60000 },
  bomb = { memory = "8Mi", time_limit = 60000 },
}

-- Runaway bodies; `when` is a Lua condition on the call's argument `arg`
-- (true: every call).  Line 3 of each file is where it runs away.
local RUNAWAY = {
  loop = function(when)
    return "local M = {}\nlocal function run(arg)\n  if " .. when .. " then while true do end end\nend\n"
  end,
  recursion = function(when)
    return "local M = {}\nlocal function deeper(n)\n  return deeper(n + 1) + 1\nend\n" ..
           "local function run(arg)\n  if " .. when .. " then return deeper(1) end\nend\n"
  end,
  bomb = function(when)
    return "local M = {}\nlocal function run(arg)\n  if " .. when .. " then local t = {} " ..
           "for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end end\nend\n"
  end,
}
local WHAT = {
  loop = "instruction budget exceeded",
  recursion = "", -- stack, instruction or memory budget: whichever comes first
  bomb = "memory budget exceeded",
}
-- The rest of each file: run the runaway part, then what the default does.
local function file(name, kind, when)
  local default = read("policies/" .. name):gsub("\nreturn M%s*$", "\n")
  local fn = ({ ["fairshare.lua"] = "compute", ["placement.lua"] = "score",
                ["background.lua"] = "reoffer" })[name]
  -- the default's own function, renamed, runs after the runaway check
  default = default:gsub("function M%." .. fn .. "%(", "function M.default_" .. fn .. "(")
  local head = RUNAWAY[kind](when)
  return head .. default:gsub("^%-%-%[%[.-%]%]", ""):gsub("\nlocal M = {}\n", "\n", 1) ..
         "\nfunction M." .. fn .. "(a, b)\n  run(a)\n  return M.default_" .. fn .. "(a, b)\nend\nreturn M\n"
end

local function without_policy_events(out)
  for _, c in ipairs(out.cycles) do
    local kept = {}
    for _, e in ipairs(c.events or {}) do
      if e.reason ~= "PolicyFailed" and e.reason ~= "PolicyRejected" then kept[#kept + 1] = e end
    end
    c.events = kept
  end
  return H.without_policy_ids(out)
end

-- The seed story up to t=70: background work fills the cluster, the gang
-- arrives at t=30 and the evaluation job at t=60.  Short, since a runaway
-- is cut off again in every cycle.
local scenario = read("examples/seed-story.json"):gsub('"horizon": %d+', '"horizon": 70')

describe("a runaway policy", function()
  local builtin
  before_each(function()
    builtin = builtin or H.without_policy_ids(H.run(scenario, { policies = false }))
  end)

  for _, name in ipairs({ "fairshare.lua", "placement.lua", "background.lua" }) do
    for _, kind in ipairs({ "loop", "recursion", "bomb" }) do
      it("(" .. kind .. " in " .. name .. ") is cut off, reported, and replaced by the built-in", function()
        local dir = policy_dir({ [name] = file(name, kind, "true") })
        local opts = { policies = dir }
        for k, v in pairs(OPTS[kind]) do opts[k] = v end
        local out = H.run(scenario, opts)
        remove_dir(dir)
        local ev = H.events(out, function(e) return e.reason == "PolicyFailed" end)
        assert.is_true(#ev > 0)
        assert.are.equal("Warning", ev[1].type)
        assert.are.equal(name, ev[1].object)
        assert.are.equal(name, ev[1].annotations.policy)
        assert.truthy(ev[1].message:find(name .. ":3:", 1, true), ev[1].message)
        assert.truthy(ev[1].message:find(WHAT[kind], 1, true), ev[1].message)
        assert.truthy(ev[1].message:find("uses the built-in policy instead", 1, true), ev[1].message)
        assert.are.same(builtin, without_policy_events(out))
      end)
    end
  end

  it("that passed its reload check falls back to the last good version, not the built-in", function()
    -- spread placement is the version in force; at t=50 a version goes live
    -- that runs away only for eval-b, which arrives at t=60
    local spread = policy_dir({ ["placement.lua"] = read("examples/policies/spread/placement.lua") })
    local later = policy_dir({ ["placement.lua"] = file("placement.lua", "bomb", "arg.workload == 'eval-b'") })
    local sc = scenario:gsub('"timeline": %[',
      '"timeline": [\n    {"at": 50, "action": "reload_policies", "dir": "' .. later .. '"},')
    local opts = { policies = spread }
    for k, v in pairs(OPTS.bomb) do opts[k] = v end
    local out = H.run(sc, opts)
    local spread_only = H.run(scenario, opts)
    remove_dir(spread)
    remove_dir(later)

    assert.are.equal(1, #H.events(out, function(e) return e.reason == "PolicyReloaded" end))
    local ev = H.events(out, function(e) return e.reason == "PolicyFailed" end)
    assert.is_true(#ev > 0)
    assert.are.equal(60, ev[1].time)
    assert.truthy(ev[1].message:find("placement.lua:3: memory budget exceeded", 1, true), ev[1].message)
    assert.truthy(ev[1].message:find("uses the previous version (" .. spread_only.policy .. ")", 1, true),
                  ev[1].message)
    -- every decision is spread's: the runaway version decided nothing
    for i, c in ipairs(out.cycles) do
      assert.are.same(spread_only.cycles[i].decisions, c.decisions)
    end
  end)
end)
