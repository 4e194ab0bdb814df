-- transitions_spec.lua — the background rules while the AI plan is in
-- transition (a releasing pod and the pod pipelined onto its room), gangs
-- that break, and who an eviction names as its evictor.  Each case runs
-- with the default Lua policies and with the built-in C policies: both
-- must follow the same rules.
local H = require "tests.spec.helper"
local understory = H.understory

local flavours = {
  { name = "Lua policies", opts = {} },
  { name = "built-in policies", opts = { policies = false } },
}

local function cpu_node(name, extra)
  local n = H.node(name, 8)
  for k, v in pairs(extra or {}) do n[k] = v end
  return n
end

local function evictions_of(out, workload)
  return H.decisions(out, function(d)
    return d.op == "evict" and d.pod:sub(1, #workload + 1) == workload .. "-"
  end)
end

for _, fl in ipairs(flavours) do
  describe("keep-if-fits against the AI end state (" .. fl.name .. ")", function()
    it("a 10-CPU agent survives a preemption whose pods fit beside it at every moment", function()
      -- 64 CPUs: batch (40) releasing and urgent (40) pipelined onto its
      -- room are never on the node together, so 40 + 10 <= 64 throughout
      local out = H.run({
        name = "agent", cycle_interval = 10, horizon = 60,
        nodes = { cpu_node("n1") },
        queues = { H.queue("team", 8), H.bg_queue() },
        workloads = {
          H.bg("agent", { controller = "daemonset", requests = { cpu = "10" } }),
          { name = "batch", queue = "team", priority = "train",
            requests = { gpu = 8, cpu = "40" } },
          { name = "urgent", queue = "team", priority = "build-preemptible",
            requests = { gpu = 8, cpu = "40" }, submit_at = 20 },
        },
      }, fl.opts)
      assert.are.same({}, evictions_of(out, "agent"))
      local pipe = H.decisions(out, function(d) return d.op == "pipeline" end)
      assert.are.equal(1, #pipe)
      assert.are.equal("urgent-0", pipe[1].pod)
      assert.are.same({ "batch-0" }, pipe[1].waits_for)
      assert.are.equal("running", H.final_pod(out, "agent-n1").state)
      assert.are.equal("running", H.final_pod(out, "urgent-0").state)
    end)

    it("a 100m health check survives a gang that loses a node and is placed again", function()
      local out = H.run({
        name = "gang", cycle_interval = 10, horizon = 80,
        nodes = { cpu_node("n1"), cpu_node("n2"), cpu_node("n3", { unschedulable = true }) },
        queues = { H.queue("team", 16), H.bg_queue() },
        workloads = {
          H.bg("check", { controller = "daemonset", requests = { cpu = "100m" } }),
          { name = "train", queue = "team", replicas = 2, min_member = 2,
            requests = { gpu = 8, cpu = "40" } },
        },
        timeline = {
          { at = 20, action = "remove_node", node = "n2" },
          { at = 20, action = "uncordon", node = "n3" },
        },
      }, fl.opts)
      assert.are.same({}, evictions_of(out, "check"))
      assert.are.equal("running", H.final_pod(out, "check-n1").state)
      assert.are.equal("running", H.final_pod(out, "train-0").state)
      assert.are.equal("running", H.final_pod(out, "train-1").state)
    end)

    it("the tie-break counts displacement against the end state too", function()
      -- a2 and b1 are identical and hold no AI pod: new may go to either.
      -- On b1, leaving (40 CPUs) terminates: gone once the plan ends, so new
      -- fits beside agent there and makes no one leave; on a2 it would
      -- displace hog.  Counting leaving as if it stayed made both displace
      -- one pod, and the name kept new on a2.
      local out = H.run({
        name = "ties", cycle_interval = 10, horizon = 40,
        nodes = { cpu_node("a2"), cpu_node("b1") },
        queues = { H.queue("team", 16), H.bg_queue() },
        workloads = {
          H.bg("agent", { requests = { cpu = "10" }, pods = { { node = "b1", state = "running" } } }),
          H.bg("leaving", { requests = { cpu = "40" }, termination_grace = 30,
                            pods = { { node = "b1", state = "running" } } }),
          H.bg("hog", { requests = { cpu = "30" }, pods = { { node = "a2", state = "running" } } }),
          { name = "new", queue = "team", requests = { gpu = 1, cpu = "40" }, submit_at = 10 },
        },
        timeline = { { at = 10, action = "delete", workload = "leaving" } },
      }, fl.opts)
      local placed = H.decisions(out, function(d) return d.pod == "new-0" and d.op ~= "evict" end)
      assert.are.equal("b1", placed[1].node)
      assert.are.same({}, H.decisions(out, function(d) return d.op == "evict" end))
    end)

    it("still evicts what does not fit once the plan ends", function()
      -- urgent needs 60 CPUs: 60 + 10 > 64 at the end, so the agent goes,
      -- named after the workload that needed its room
      local out = H.run({
        name = "agent", cycle_interval = 10, horizon = 40,
        nodes = { cpu_node("n1") },
        queues = { H.queue("team", 8), H.bg_queue() },
        workloads = {
          H.bg("agent", { controller = "daemonset", requests = { cpu = "10" } }),
          { name = "batch", queue = "team", priority = "train",
            requests = { gpu = 8, cpu = "40" } },
          { name = "urgent", queue = "team", priority = "build-preemptible",
            requests = { gpu = 8, cpu = "60" }, submit_at = 20 },
        },
      }, fl.opts)
      local ev = evictions_of(out, "agent")
      assert.are.equal(1, #ev)
      assert.are.equal("backgroundpods", ev[1].action)
      assert.are.equal("urgent", ev[1].evictor)
    end)
  end)

  describe("placements the policy returns are applied (" .. fl.name .. ")", function()
    it("a pending pod is never offered room an evicted pod still holds", function()
      -- big (8 GPUs) is evicted for train (4 GPUs) and terminates for 5 s;
      -- small (4 GPUs) may not take the 4 GPUs big still holds: it waits
      -- for idle room and binds once big is gone
      local out = H.run({
        name = "idle", cycle_interval = 10, horizon = 40,
        nodes = { H.node("n1", 8) },
        queues = { H.queue("team", 8), H.bg_queue() },
        workloads = {
          H.bg("big", { requests = { gpu = 8 } }),
          H.bg("small", { requests = { gpu = 4 }, submit_at = 10 }),
          { name = "train", queue = "team", requests = { gpu = 4 }, submit_at = 10 },
        },
      }, fl.opts)
      local at10 = H.decisions(out, function(d) return d.time == 10 end)
      local ops = {}
      for _, d in ipairs(at10) do ops[#ops + 1] = d.op .. " " .. d.pod end
      assert.are.same({ "evict big-0", "pipeline train-0" }, ops)
      local later = H.decisions(out, function(d) return d.pod == "small-0" end)
      assert.are.equal(1, #later)
      assert.are.equal("bind", later[1].op)
      assert.are.equal(20, later[1].time)
      assert.are.equal("running", H.final_pod(out, "small-0").state)
      assert.are.equal("running", H.final_pod(out, "train-0").state)
    end)
  end)

  describe("the evictor needed the room (" .. fl.name .. ")", function()
    it("names the workload whose placement pushed the pod out, not the first one on the node", function()
      -- tiny (1 GPU) lands first and fits beside burn (4 GPUs); wide
      -- (4 GPUs) comes next and does not: wide is the evictor
      local out = H.run({
        name = "evictor", cycle_interval = 10, horizon = 30,
        nodes = { H.node("n1", 8) },
        queues = { H.queue("a", 1), H.queue("b", 7), H.bg_queue() },
        workloads = {
          H.bg("burn", { requests = { gpu = 4 } }),
          { name = "tiny", queue = "a", priority = "inference", requests = { gpu = 1 }, submit_at = 10 },
          { name = "wide", queue = "b", requests = { gpu = 4 }, submit_at = 10 },
        },
      }, fl.opts)
      local ev = evictions_of(out, "burn")
      assert.are.equal(1, #ev)
      assert.are.equal("wide", ev[1].evictor)
      local events = H.events(out, function(e) return e.reason == "Evict" end)
      assert.are.equal(1, #events)
      assert.are.equal("wide", events[1].annotations["evictor-pod-group-name"])
      -- tiny was placed before wide in that cycle
      local placed = H.decisions(out, function(d) return d.time == 10 and d.op ~= "evict" end)
      assert.are.equal("tiny-0", placed[1].pod)
    end)
  end)
end

describe("gang floor under reclaim", function()
  it("never breaks a gang whose pods the same cycle placed", function()
    -- g (min_member 2) runs g-0 and g-1 on n1; at t=10 allocate places g-2
    -- on n2, then j reclaims n1.  Taking g-0 and g-1 would leave g-2 alone:
    -- a gang of 1 below its min_member of 2.
    for _, fl in ipairs(flavours) do
      local out = H.run({
        name = "floor", cycle_interval = 10, horizon = 40,
        nodes = { H.node("n1", 8, { labels = { host = "n1" } }),
                  H.node("n2", 8, { unschedulable = true }) },
        queues = { H.queue("a", 0), H.queue("b", 16) },
        workloads = {
          { name = "g", queue = "a", replicas = 3, min_member = 2, requests = { gpu = 4 },
            termination_grace = 5,
            pods = { { node = "n1", state = "running" }, { node = "n1", state = "running" } } },
          { name = "j", queue = "b", requests = { gpu = 8 }, node_selector = { host = "n1" },
            submit_at = 10 },
          -- b's demand takes the whole pool, so a is over its fair share
          { name = "k", queue = "b", requests = { gpu = 8 }, node_selector = { host = "none" },
            submit_at = 10 },
        },
        timeline = { { at = 10, action = "uncordon", node = "n2" } },
      }, fl.opts)
      local held = { ["g-0"] = true, ["g-1"] = true }
      for _, c in ipairs(out.cycles) do
        for _, d in ipairs(c.decisions or {}) do
          if d.pod:match("^g%-") then held[d.pod] = d.op ~= "evict" or nil end
        end
        local n = 0
        for _ in pairs(held) do n = n + 1 end
        assert.is_true(n == 0 or n >= 2, fl.name .. ": t=" .. c.time .. ": g holds " .. n .. " pods")
      end
      assert.are.equal("running", H.final_pod(out, "j-0").state)
    end
  end)
end)

describe("a policy that evicts what fits", function()
  it("is rejected, named, and the pod stays", function()
    -- places pending pods on their first candidate, keeps nothing running
    local dir = H.policy_dir({ ["background.lua"] = [[
      local M = {}
      function M.reoffer(view)
        local place = {}
        for _, p in ipairs(view.pending) do place[p.name] = p.candidates[1] end
        return { keep = {}, place = place }
      end
      return M
    ]] })
    local out = H.run({
      name = "evict-all", cycle_interval = 10, horizon = 20,
      nodes = { cpu_node("n1") },
      queues = { H.queue("team", 8), H.bg_queue() },
      workloads = {
        H.bg("agent", { controller = "daemonset", requests = { cpu = "10" } }),
        { name = "train", queue = "team", requests = { gpu = 8, cpu = "40" }, submit_at = 10 },
      },
    }, { policies = dir })
    H.remove_dir(dir)
    assert.are.same({}, evictions_of(out, "agent"))
    local rej = H.events(out, function(e) return e.reason == "PolicyRejected" end)
    assert.are.equal(1, #rej)
    assert.are.equal("background.lua", rej[1].object)
    assert.truthy(rej[1].message:find("evicting pod \"agent-n1\"", 1, true), rej[1].message)
    assert.truthy(rej[1].message:find("needs its room", 1, true), rej[1].message)
  end)
end)

-- A control plane that only applies decisions: bind and pipeline put a pod
-- on its node, evict takes it off.  Whatever the engine stops must reach it
-- as a decision, so its view stays the engine's.
local function mirror_apply(mirror, decisions)
  for _, d in ipairs(decisions) do
    if d.op == "evict" then
      assert.is_not_nil(mirror[d.pod], "evict of a pod the control plane never placed: " .. d.pod)
      mirror[d.pod] = nil
    else
      mirror[d.pod] = d.node
    end
  end
end

local function engine_holding(e)
  local held = {}
  for _, p in ipairs(e:pods()) do
    if p.state == "running" or p.state == "pipelined" then held[p.name] = p.node end
  end
  return held
end

describe("a gang that breaks", function()
  local function cluster()
    local e = understory.engine({ policies = "policies" })
    for _, n in ipairs({ "n1", "n2", "n3" }) do e:upsert_node(H.node(n, 8)) end
    e:upsert_queue(H.queue("team", 24))
    e:upsert_workload({ name = "train", queue = "team", replicas = 2, min_member = 2,
                        requests = { gpu = 8 }, termination_grace = 5 }, 0)
    return e
  end

  it("stops each remaining pod with an evict decision when a node is removed", function()
    local e <close> = cluster()
    local mirror = {}
    mirror_apply(mirror, e:run_cycle(0).decisions)
    assert.are.same(engine_holding(e), mirror)
    local lost = mirror["train-0"]
    e:remove_node(lost)
    mirror["train-0"] = nil  -- the control plane saw the node go, and its pod with it
    local r = e:run_cycle(10)
    local stops = {}
    for _, d in ipairs(r.decisions) do
      if d.op == "evict" then stops[#stops + 1] = d end
    end
    assert.are.equal(1, #stops)
    assert.are.equal("train-1", stops[1].pod)
    assert.are.equal("stalegangeviction", stops[1].action)
    assert.are.equal("train", stops[1].evictor)
    local ev = nil
    for _, x in ipairs(r.events) do
      if x.reason == "Evict" then ev = x end
    end
    assert.is_not_nil(ev)
    assert.are.equal("stalegangeviction", ev.annotations["evictor-action-type"])
    assert.are.equal("1", ev.annotations["num-evicted-pods"])
    assert.are.equal("train", ev.annotations["evictor-pod-group-name"])
    mirror_apply(mirror, r.decisions)
    assert.are.same(engine_holding(e), mirror)
    -- the gang waits for its own pod rather than pipeline behind it, then
    -- runs whole again
    for t = 20, 40, 10 do
      local rr = e:run_cycle(t)
      for _, d in ipairs(rr.decisions) do
        if d.op == "pipeline" then
          for _, w in ipairs(d.waits_for) do
            assert.is_nil(w:match("^train%-"), d.pod .. " waits for " .. w)
          end
        end
      end
      mirror_apply(mirror, rr.decisions)
      assert.are.same(engine_holding(e), mirror)
    end
    local n = 0
    for _ in pairs(mirror) do n = n + 1 end
    assert.are.equal(2, n)
  end)

  it("stops the rest when a failed bind is reported", function()
    local e <close> = cluster()
    local mirror = {}
    mirror_apply(mirror, e:run_cycle(0).decisions)
    -- the bind of train-0 failed: the control plane says it is pending
    e:upsert_pod({ name = "train-0" })
    mirror["train-0"] = nil
    local r = e:run_cycle(10)
    local stops = {}
    for _, d in ipairs(r.decisions) do
      if d.op == "evict" then stops[#stops + 1] = d.pod .. " " .. d.action end
    end
    assert.are.same({ "train-1 stalegangeviction" }, stops)
    mirror_apply(mirror, r.decisions)
    assert.are.same(engine_holding(e), mirror)
  end)
end)
