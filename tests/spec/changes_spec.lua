-- changes_spec.lua — everything that changes the cluster shows in the
-- output: each cycle's `changes` list names the submissions, deletions,
-- completions, node additions, removals and cordons applied before it, with
-- the pods they created or stopped.
local H = require "tests.spec.helper"

local function rng(seed)
  local s = seed
  return function(lo, hi)
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + s % (hi - lo + 1)
  end
end

-- The changes of the cycle at time t, as "action object" strings, and the
-- change objects themselves.
local function changes_at(out, t)
  for _, c in ipairs(out.cycles) do
    if c.time == t then
      local list = {}
      for _, ch in ipairs(c.changes) do list[#list + 1] = ch.action .. " " .. (ch.workload or ch.node) end
      return list, c.changes
    end
  end
  error("no cycle at t=" .. t)
end

describe("changes", function()

  it("name every kind of change in the cycle where it takes effect, with its pods", function()
    local out = H.run({
      name = "changes", cycle_interval = 10, horizon = 80,
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("team", 16), H.bg_queue() },
      workloads = {
        -- four pods that never fit: pending until deleted at 20
        { name = "wide", queue = "team", replicas = 4, min_member = 4, requests = { gpu = 8 } },
        { name = "short", queue = "team", requests = { gpu = 1 }, duration = 15 },
        H.bg("agent", { controller = "daemonset", requests = { cpu = "100m" } }),
      },
      timeline = {
        { at = 20, action = "delete", workload = "wide" },
        { at = 30, action = "cordon", node = "n1" },
        { at = 35, action = "uncordon", node = "n1" },
        { at = 40, action = "add_node", node = H.node("n3", 8) },
        { at = 50, action = "remove_node", node = "n2" },
        { at = 60, action = "submit", workload = { name = "late", queue = "team", requests = { gpu = 1 } } },
        { at = 70, action = "complete", workload = "late" },
      },
    })
    assert.are.same({ "submit wide", "submit short", "submit agent" }, (changes_at(out, 0)))
    local _, c0 = changes_at(out, 0)
    assert.are.same({ "wide-0", "wide-1", "wide-2", "wide-3" }, c0[1].pods)
    assert.are.same({ "agent-n1", "agent-n2" }, c0[3].pods)
    -- the four pending pods vanish with the delete, and the output says so
    local list, c20 = changes_at(out, 20)
    table.sort(list)
    assert.are.same({ "complete short", "delete wide" }, list)
    for _, ch in ipairs(c20) do
      if ch.action == "delete" then assert.are.same({ "wide-0", "wide-1", "wide-2", "wide-3" }, ch.pods) end
      if ch.action == "complete" then
        assert.are.equal("duration", ch.cause)
        assert.are.same({ "short-0" }, ch.pods)
      end
    end
    assert.are.same({ "cordon n1" }, (changes_at(out, 30)))
    -- the uncordon at 35 and the node added at 40 both take effect at 40
    assert.are.same({ "uncordon n1", "add_node n3" }, (changes_at(out, 40)))
    local c40 = select(2, changes_at(out, 40))
    assert.are.same({}, c40[1].pods)
    assert.are.same({ "agent-n3" }, c40[2].pods)
    local c50 = select(2, changes_at(out, 50))
    assert.are.equal("remove_node", c50[1].action)
    assert.are.same({ "agent-n2" }, c50[1].pods)
    assert.are.same({ "submit late" }, (changes_at(out, 60)))
    local c70 = select(2, changes_at(out, 70))
    assert.are.equal("timeline", c70[1].cause)
    assert.are.same({ "late-0" }, c70[1].pods)
    -- a cycle without changes has an empty list, not a missing one
    assert.are.same({}, (changes_at(out, 10)))
  end)

  -- A pod that terminates holds its room for its grace period, then leaves:
  -- the cycle where it is gone says so, whatever made it terminate.
  it("name the pods that leave once their grace period ends", function()
    local out = H.run({
      name = "leave", cycle_interval = 10, horizon = 60,
      nodes = { H.node("n1", 8) },
      queues = { H.queue("team", 8), H.bg_queue() },
      workloads = {
        { name = "svc", queue = "team", replicas = 2, min_member = 1, requests = { gpu = 1 },
          termination_grace = 15 },
        H.bg("burn", { replicas = 8, min_member = 1, requests = { gpu = 1 } }),
        { name = "train", queue = "team", replicas = 1, requests = { gpu = 2 }, submit_at = 10 },
      },
      timeline = { { at = 20, action = "delete", workload = "svc" } },
    })
    -- train evicts two burn pods at 10 (grace 5): they leave at 20
    local evicted = {}
    for _, d in ipairs(H.decisions(out, function(d) return d.op == "evict" end)) do
      evicted[#evicted + 1] = d.pod
    end
    table.sort(evicted)
    assert.are.equal(2, #evicted)
    local list, c20 = changes_at(out, 20)
    assert.are.same({ "delete svc", "leave burn" }, list)
    local left = c20[2].pods
    table.sort(left)
    assert.are.same(evicted, left)
    -- svc's pods terminate at 20 with a grace of 15: they leave at 40
    assert.are.same({}, (changes_at(out, 30)))
    local _, c40 = changes_at(out, 40)
    assert.are.equal("leave", c40[1].action)
    assert.are.equal("svc", c40[1].workload)
    assert.are.same({ "svc-0", "svc-1" }, c40[1].pods)
    -- and none of them is in the cluster afterwards
    for _, p in ipairs(out.final.pods) do assert.are_not.equal("svc", p.workload) end
  end)

  -- Random clusters and timelines: every timeline entry that does something
  -- is a change of the first cycle at or after its time, and no pod is
  -- decided about, or left at the end, without a change that brought it.
  it("leave no pod and no timeline entry out, on random timelines", function()
    for seed = 1, 25 do
      local r = rng(seed)
      local nodes, workloads, timeline = {}, {}, {}
      for i = 1, r(1, 3) do nodes[i] = H.node("n" .. i, 8) end
      local node_names = {}
      for i = 1, #nodes do node_names[i] = nodes[i].name end
      for i = 1, r(1, 4) do
        workloads[i] = { name = "w" .. i, queue = "team", replicas = r(1, 4), min_member = 1,
                         requests = { gpu = r(1, 8) }, submit_at = 10 * r(0, 3) }
        if r(1, 3) == 1 then workloads[i].duration = 10 * r(1, 3) end
      end
      workloads[#workloads + 1] = H.bg("agent", { controller = "daemonset", requests = { cpu = "100m" } })
      local extra = 0
      for _ = 1, r(1, 6) do
        local at, kind = 10 * r(0, 6) + r(0, 9), r(1, 6)
        if kind == 1 then
          timeline[#timeline + 1] = { at = at, action = "delete", workload = "w" .. r(1, #workloads - 1) }
        elseif kind == 2 then
          timeline[#timeline + 1] = { at = at, action = "complete", workload = "w" .. r(1, #workloads - 1) }
        elseif kind == 3 then
          extra = extra + 1
          timeline[#timeline + 1] = { at = at, action = "add_node", node = H.node("x" .. extra, 8) }
        elseif kind == 4 then
          timeline[#timeline + 1] = { at = at, action = "remove_node", node = node_names[r(1, #node_names)] }
        elseif kind == 5 then
          timeline[#timeline + 1] = { at = at, action = "cordon", node = node_names[r(1, #node_names)] }
        else
          timeline[#timeline + 1] = { at = at, action = "uncordon", node = node_names[r(1, #node_names)] }
        end
      end
      local out = H.run({ name = "random " .. seed, cycle_interval = 10, horizon = 90,
                          nodes = nodes, queues = { H.queue("team", 24), H.bg_queue() },
                          workloads = workloads, timeline = timeline })
      -- every pod mentioned was brought by a change no later than that
      local known = {}
      local function mention(pod, where)
        assert.is_true(known[pod] ~= nil, "seed " .. seed .. ": " .. pod .. " appears in " .. where ..
          " without a change that brought it")
      end
      local deleted = {}
      for _, c in ipairs(out.cycles) do
        for _, ch in ipairs(c.changes) do
          if ch.action == "submit" or ch.action == "add_node" then
            for _, p in ipairs(ch.pods) do known[p] = true end
          end
          if ch.action == "delete" then deleted[ch.workload] = true end
        end
        for _, d in ipairs(c.decisions) do mention(d.pod, "cycle " .. c.cycle) end
      end
      for _, p in ipairs(out.final.pods) do
        mention(p.name, "the final pods")
        assert.is_false(deleted[p.workload] and p.state ~= "releasing" or false,
          "seed " .. seed .. ": " .. p.name .. " of a deleted workload is " .. p.state)
      end
      -- every node action is a change of the first cycle at or after it
      for _, e in ipairs(timeline) do
        if e.node then
          local name = type(e.node) == "table" and e.node.name or e.node
          local t = math.ceil(e.at / 10) * 10
          local found = false
          for _, s in ipairs((changes_at(out, t))) do
            if s == e.action .. " " .. name then found = true end
          end
          assert.is_true(found, "seed " .. seed .. ": " .. e.action .. " " .. name .. " at " .. e.at)
        end
      end
    end
  end)

  it("leave deleted workloads out of the readable header's count", function()
    local sc = {
      name = "header", cycle_interval = 10, horizon = 20,
      nodes = { H.node("n1", 8) }, queues = { H.queue("team", 8) },
      workloads = { { name = "a", queue = "team", requests = { gpu = 1 } },
                    { name = "b", queue = "team", requests = { gpu = 1 } } },
      timeline = { { at = 10, action = "delete", workload = "b" } },
    }
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(H.understory.json_encode(sc))
    f:close()
    local p = assert(io.popen("'" .. os.getenv("UNDERSTORY") .. "' simulate '" .. path .. "' --policies policies"))
    local text = p:read("a")
    p:close()
    os.remove(path)
    assert.matches("1 node, 1 queue, 1 workload at the end", text)
    assert.matches("\n  delete      b  1 pod: b%-0\n", text)
  end)
end)
