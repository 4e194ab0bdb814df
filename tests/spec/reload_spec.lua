-- reload_spec.lua — hot reload in the middle of a simulation.  A policy
-- directory that fails any check (it does not compile, lacks a function,
-- fails or runs away when called, or returns a result that breaks a rule)
-- is refused with a Warning that says why, and every later cycle decides
-- exactly what the policy in force would have decided without the reload.
-- One that passes goes live before the cycle, and its id is reported.
local H = require "tests.spec.helper"

local read = H.read

local policy_dir = H.policy_dir

local remove_dir = H.remove_dir

-- Background burn-in on four nodes, training arriving at t=30 and an
-- evaluation at t=60: cycles after a reload at t=20 or t=30 have AI work to
-- place and background work to evict.  reloads: { {at=, dir=}, ... }
local function scenario(reloads)
  local timeline = {}
  for _, r in ipairs(reloads or {}) do
    timeline[#timeline + 1] = { at = r.at, action = "reload_policies", dir = r.dir }
  end
  local sc = {
    name = "reload",
    cycle_interval = 10,
    horizon = 120,
    nodes = { H.node("n1"), H.node("n2"), H.node("n3"), H.node("n4") },
    queues = { H.queue("team-a", 16), H.queue("team-b", 16), H.bg_queue() },
    workloads = {
      H.bg("gpu-burn", { controller = "deployment", replicas = 24, requests = { gpu = 1 } }),
      H.bg("node-check", { controller = "daemonset", requests = { cpu = "100m", memory = "64Mi" } }),
      { name = "serve", queue = "team-a", priority = "inference", requests = { gpu = 1 },
        pods = { { node = "n1", state = "running" } } },
      { name = "train", queue = "team-a", replicas = 2, min_member = 2,
        requests = { gpu = 6, cpu = "8", memory = "64Gi" }, submit_at = 30, duration = 50 },
      { name = "eval", queue = "team-b", replicas = 2, requests = { gpu = 2 }, submit_at = 60 },
    },
  }
  if #timeline > 0 then sc.timeline = timeline end
  return sc
end

local OPTS = { instructions = 300000, memory = "32Mi" }

local function run(reloads, policies)
  local opts = { policies = policies or "policies" }
  for k, v in pairs(OPTS) do opts[k] = v end
  return H.run(scenario(reloads), opts)
end

local function decisions_of(cycle)
  return cycle.decisions or {}
end

local function events_of(out, reason)
  return H.events(out, function(e) return e.reason == reason end)
end

local BROKEN = {
  ["a syntax error"] = {
    files = { ["placement.lua"] = "local M = {}\nlocal x = = 1\nreturn M\n" },
    why = "placement.lua:2:",
  },
  ["a missing function"] = {
    files = { ["background.lua"] = "return { reoffer_all = function() return {} end }\n" },
    why = "background.lua: must return a table with a function \"reoffer\"",
  },
  ["a failing call"] = {
    dry_run = true,
    files = { ["placement.lua"] = "local M = {}\nfunction M.score(pod, node)\n  return pod.nope.x\nend\nreturn M\n" },
    why = "placement.lua:3: attempt to index a nil value",
  },
  ["an infinite loop"] = {
    dry_run = true,
    files = { ["placement.lua"] = "local M = {}\nfunction M.score(pod, node)\n  while true do end\nend\nreturn M\n" },
    why = "placement.lua:3: instruction budget exceeded",
  },
  ["a runaway recursion"] = {
    dry_run = true,
    files = { ["fairshare.lua"] = "local M = {}\nlocal function deeper(n)\n  return deeper(n + 1) + 1\nend\n" ..
                                  "function M.compute(view)\n  return deeper(1)\nend\nreturn M\n" },
    why = "fairshare.lua:3:",
  },
  ["a memory bomb"] = {
    dry_run = true,
    files = { ["background.lua"] = "local M = {}\nfunction M.reoffer(view)\n  local t = {}\n" ..
                                   "  local s = 'x' for i = 1, 64 do t[i] = s s = s .. s end\nend\nreturn M\n" },
    why = "background.lua:4: memory budget exceeded",
  },
  ["a result that overfills a node"] = {
    dry_run = true,
    files = { ["background.lua"] = [[
      local M = {}
      function M.reoffer(view)
        local keep, place = {}, {}
        for _, p in ipairs(view.running) do keep[#keep + 1] = p.name end
        for _, p in ipairs(view.pending) do
          if p.candidates[1] then place[p.name] = p.candidates[1] end
        end
        return { keep = keep, place = place }
      end
      return M
    ]] },
    why = "over capacity",
  },
  ["a fair share larger than the pool"] = {
    dry_run = true,
    files = { ["fairshare.lua"] = [[
      local M = {}
      function M.compute(view)
        local out = {}
        for _, q in ipairs(view.queues) do out[q.name] = { gpu = 1000, cpu = 0, memory = 0 } end
        return out
      end
      return M
    ]] },
    why = "more gpu than",
  },
}

describe("reloading a broken policy mid-run", function()
  for _, at in ipairs({ 20, 30 }) do
    local baseline
    before_each(function()
      baseline = baseline or run()
    end)

    for name, case in pairs(BROKEN) do
      it("with " .. name .. " at t=" .. at .. " is refused and changes no decision", function()
        local dir = policy_dir(case.files)
        local out = run({ { at = at, dir = dir } })
        remove_dir(dir)

        local refused = events_of(out, "PolicyReloadRefused")
        assert.are.equal(1, #refused)
        local ev = refused[1]
        assert.are.equal(at, ev.time)
        assert.are.equal("Warning", ev.type)
        assert.truthy(ev.message:find(dir, 1, true), ev.message)
        assert.truthy(ev.message:find(case.why, 1, true), ev.message)
        if case.dry_run and at == 30 then
          -- the gang submitted at t=30 is in the state the dry run copies
          assert.truthy(ev.message:find("dry run on the current state (t=30s)", 1, true), ev.message)
        end
        assert.are.equal(baseline.policy, ev.annotations["policy-id"])
        assert.are.same({}, events_of(out, "PolicyReloaded"))

        -- every cycle, before and after the reload, decides the same
        assert.are.equal(#baseline.cycles, #out.cycles)
        for i, c in ipairs(out.cycles) do
          assert.are.same(decisions_of(baseline.cycles[i]), decisions_of(c))
          assert.are.equal(baseline.cycles[i].policy, c.policy)
        end
        assert.are.same(baseline.summary, out.summary)
        assert.are.same(baseline.final, out.final)
      end)
    end
  end

  it("is refused on an empty cluster too: the built-in check scenario calls what the state cannot", function()
    local dir = policy_dir(BROKEN["a failing call"].files)
    local out = H.run({ name = "empty", horizon = 20,
                        timeline = { { at = 10, action = "reload_policies", dir = dir } } },
                      { policies = "policies" })
    remove_dir(dir)
    local ev = events_of(out, "PolicyReloadRefused")
    assert.are.equal(1, #ev)
    assert.truthy(ev[1].message:find("built-in check scenario", 1, true), ev[1].message)
    assert.truthy(ev[1].message:find("placement.lua:3:", 1, true), ev[1].message)
  end)

  it("leaves a policy that draws random numbers deciding as before", function()
    local random = policy_dir({ ["placement.lua"] =
      "local M = {}\nfunction M.score(pod, node)\n  return math.random(1, 1000)\nend\nreturn M\n" })
    local broken = policy_dir(BROKEN["a failing call"].files)
    local plain = run(nil, random)
    local again = run(nil, random)
    local reloaded = run({ { at = 30, dir = broken }, { at = 60, dir = broken } }, random)
    remove_dir(random)
    remove_dir(broken)
    assert.are.same(plain, again)
    assert.are.equal(2, #events_of(reloaded, "PolicyReloadRefused"))
    for i, c in ipairs(reloaded.cycles) do
      assert.are.same(decisions_of(plain.cycles[i]), decisions_of(c))
    end
  end)
end)

describe("policy ids in the output", function()
  it("are \"builtin\" for the C policies, and a reload's id from its cycle on", function()
    local spread = policy_dir({ ["placement.lua"] = read("examples/policies/spread/placement.lua") })
    local out = H.run(scenario({ { at = 30, dir = spread } }), { policies = false })
    remove_dir(spread)
    local ev = events_of(out, "PolicyReloaded")
    assert.are.equal(1, #ev)
    assert.are.equal("builtin", ev[1].annotations["previous-policy-id"])
    for _, c in ipairs(out.cycles) do
      assert.are.equal(c.time < 30 and "builtin" or ev[1].annotations["policy-id"], c.policy)
    end
    assert.are.equal(ev[1].annotations["policy-id"], out.policy)
    assert.are.equal("builtin", H.run(scenario(), { policies = false }).policy)
  end)
end)

describe("reloading a good policy mid-run", function()
  it("swaps it in before the cycle and reports its id", function()
    local spread = policy_dir({ ["placement.lua"] = read("examples/policies/spread/placement.lua") })
    local before = run()
    local out = run({ { at = 30, dir = spread } })
    local spread_only = run(nil, spread)
    remove_dir(spread)

    local ev = events_of(out, "PolicyReloaded")
    assert.are.equal(1, #ev)
    assert.are.equal("Normal", ev[1].type)
    assert.are.equal(30, ev[1].time)
    local id = ev[1].annotations["policy-id"]
    assert.are.equal(16, #id)
    assert.are.equal(before.policy, ev[1].annotations["previous-policy-id"])
    assert.are.equal(spread_only.policy, id)
    assert.are.equal(id, out.policy)
    for _, c in ipairs(out.cycles) do
      assert.are.equal(c.time < 30 and before.policy or id, c.policy)
    end
    -- before the reload nothing changes; from the gang on, spread decides
    for i, c in ipairs(out.cycles) do
      if c.time < 30 then assert.are.same(decisions_of(before.cycles[i]), decisions_of(c)) end
    end
    assert.are_not.same(before.final, out.final)
  end)
end)
