-- kai_parity_spec.lua — the queue semantics of the KAI scheduler, rule by
-- rule: queue order, reclaim between siblings and for a queue under its
-- quota, victim order, fair share in whole GPUs, quotas that add up to more
-- than the pool, and scenarios that start mid-transition.  Cases marked
-- "KAI:" are written after KAI's own integration tests
-- (pkg/scheduler/actions/integration_tests/reclaim in its repository).
local H = require "tests.spec.helper"

local function cluster(nodes, queues, workloads, extra)
  local sc = { name = "kai parity", cycle_interval = 10, horizon = 40,
               nodes = nodes, queues = queues, workloads = workloads }
  for k, v in pairs(extra or {}) do sc[k] = v end
  return sc
end

-- A queue: gpu quota and weight; cpu and memory as given (default: the
-- engine's quota 0).
local function q(name, quota, weight, extra)
  local x = { name = name, resources = { gpu = { quota = quota, over_quota_weight = weight or 1 } } }
  for k, v in pairs(extra or {}) do x[k] = v end
  return x
end

-- n running pods on node.
local function on(node, n)
  local pods = {}
  for _ = 1, n do pods[#pods + 1] = { node = node, state = "running" } end
  return pods
end

local function placed(out, prefix)
  return H.decisions(out, function(d)
    return (d.op == "bind" or d.op == "pipeline") and d.pod:sub(1, #prefix) == prefix and d.action
  end)
end

local function evicted(out)
  return H.decisions(out, function(d) return d.op == "evict" end)
end

-- "pod>action" for each eviction, in decision order.
local function eviction_list(out)
  local list = {}
  for _, d in ipairs(evicted(out)) do list[#list + 1] = d.pod .. ">" .. d.action end
  return list
end

describe("KAI parity: reclaim between sibling queues", function()
  -- examples/reclaim-siblings.json: team-a and team-b under one parent of
  -- quota 16, the whole pool.  The parent is at its fair share, but the
  -- victims come from inside it: team-b takes back its quota.
  local function siblings(with_parent)
    local a, b = q("team-a", 8), q("team-b", 8)
    local queues = { a, b }
    if with_parent then
      a.parent, b.parent = "org", "org"
      queues = { q("org", 16), a, b }
    end
    return cluster({ H.node("n1"), H.node("n2") }, queues, {
      { name = "borrower", queue = "team-a", controller = "deployment", replicas = 16,
        requests = { gpu = 1 }, termination_grace = 0 },
      { name = "owner", queue = "team-b", replicas = 4, min_member = 4, requests = { gpu = 2 },
        submit_at = 30 },
    }, { horizon = 80 })
  end

  it("reclaims under a parent at its fair share as it does without the parent", function()
    local flat, nested = H.run(siblings(false)), H.run(siblings(true))
    assert.are.equal(8, flat.summary.reclaims)
    assert.are.equal(8, nested.summary.reclaims)
    assert.are.same(eviction_list(flat), eviction_list(nested))
    assert.are.equal(4, #placed(nested, "owner"))
    assert.are.equal(8, H.queue_figures(nested, "team-b").allocated.gpu)
    assert.are.equal(16, H.queue_figures(nested, "org").allocated.gpu)
  end)

  -- The class: putting every queue of a pool under one parent whose quota
  -- is the sum of theirs changes no decision, on random clusters.
  it("decides the same under a common parent, on random clusters", function()
    local function random_scenario(seed, with_parent)
      local rng = seed
      local function rand(n) -- deterministic, the same for both runs
        rng = (rng * 1103515245 + 12345) % 2147483648
        return rng % n
      end
      local nodes, free = {}, {}
      for i = 1, 2 + rand(3) do
        nodes[#nodes + 1] = H.node("n" .. i, 8)
        free[#free + 1] = 8
      end
      local queues, workloads, total = {}, {}, 0
      for i = 1, 2 + rand(2) do
        local name = "q" .. i
        local quota = rand(9)
        total = total + quota
        queues[#queues + 1] = q(name, quota, 1 + rand(2), { parent = with_parent and "org" or nil })
        -- running elastic pods, packed onto the nodes in order
        local pods = {}
        for _ = 1, rand(10) do
          for k = 1, #free do
            if free[k] > 0 then
              free[k] = free[k] - 1
              pods[#pods + 1] = { node = "n" .. k, state = "running" }
              break
            end
          end
        end
        if #pods > 0 then
          workloads[#workloads + 1] = { name = name .. "-run", queue = name, controller = "deployment",
            replicas = #pods, requests = { gpu = 1 }, termination_grace = 0, pods = pods }
        end
        local size = 1 + rand(4)
        workloads[#workloads + 1] = { name = name .. "-gang", queue = name, replicas = size,
          min_member = size, requests = { gpu = 1 + rand(2) }, submit_at = 10 }
      end
      if with_parent then table.insert(queues, 1, q("org", total)) end
      return cluster(nodes, queues, workloads, { horizon = 30 })
    end
    local function decisions(out)
      local list = {}
      for _, d in ipairs(H.decisions(out)) do
        list[#list + 1] = string.format("%g %s %s %s %s", d.time, d.op, d.pod, d.node or "-", d.action or "-")
      end
      return list
    end
    local reclaims = 0
    for seed = 1, 40 do
      local flat = H.run(random_scenario(seed, false))
      local nested = H.run(random_scenario(seed, true))
      assert.are.same(decisions(flat), decisions(nested), "seed " .. seed)
      reclaims = reclaims + nested.summary.reclaims
    end
    assert.is_true(reclaims > 0, "the random clusters exercise reclaim")
  end)
end)

describe("KAI parity: reclaim", function()
  it("KAI: takes the newest job of the queue over its fair share", function()
    -- node0 and node1, 2 GPUs each; queue0 and queue1 deserve 2 each.
    -- queue1 holds 3, queue0 1 and wants 1 more: queue1's newest job goes.
    local out = H.run(cluster({ H.node("node0", 2), H.node("node1", 2) },
      { q("queue0", 2, 2), q("queue1", 2, 2) }, {
        { name = "running-job0", queue = "queue0", requests = { gpu = 1 }, pods = on("node0", 1) },
        { name = "running-job1", queue = "queue1", requests = { gpu = 2 }, pods = on("node1", 1) },
        { name = "running-job2", queue = "queue1", requests = { gpu = 1 }, termination_grace = 0,
          pods = on("node0", 1) },
        { name = "pending-job0", queue = "queue0", requests = { gpu = 1 } },
      }, { horizon = 0 }))
    assert.are.same({ "running-job2-0>reclaim" }, eviction_list(out))
    assert.are.equal("node0", placed(out, "pending-job0")[1].node)
  end)

  it("KAI: does not reclaim for a queue that would pass its fair share", function()
    -- queue1 deserves 1 and holds 1; queue0 (2, weight 2) holds 3 of the
    -- 4 GPUs.  The GPU over the quotas goes to queue0 whole (its 2/3 is the
    -- larger part of a unit): fair shares 3 and 1, nothing to reclaim.
    local out = H.run(cluster({ H.node("node0", 2), H.node("node1", 2) },
      { q("queue0", 2, 2), q("queue1", 1, 1) }, {
        { name = "running-job0", queue = "queue0", requests = { gpu = 1 }, pods = on("node1", 1) },
        { name = "running-job1", queue = "queue0", requests = { gpu = 2 }, pods = on("node0", 1) },
        { name = "running-job2", queue = "queue1", requests = { gpu = 1 }, pods = on("node1", 1) },
        { name = "pending-job0", queue = "queue1", requests = { gpu = 1 } },
      }, { horizon = 0 }))
    assert.are.same({}, eviction_list(out))
    assert.are.equal(3, H.queue_figures(out, "queue0").fair_share.gpu)
    assert.are.equal(1, H.queue_figures(out, "queue1").fair_share.gpu)
    assert.are.equal("pending", H.final_pod(out, "pending-job0-0").state)
  end)

  it("lets a queue under its quota take from a queue over its quota but within its fair share", function()
    -- 3 nodes of 4 GPUs.  b (quota 4) holds 8 = its fair share (a asks only
    -- its quota), spread 2 + 2 + 4; a's 4-GPU pod finds no whole node.  b is
    -- over its quota, a stays within its own: a takes one node (b's newest
    -- pods, on n3), and b's pods run again in the room a did not need.
    local function scenario(cpu_quota)
      local a = q("a", 4, 1, { resources = { gpu = { quota = 4 }, cpu = { quota = cpu_quota } } })
      local b = q("b", 4, 1, { resources = { gpu = { quota = 4 }, cpu = { quota = cpu_quota } } })
      local pods = on("n1", 2)
      for _, p in ipairs(on("n2", 2)) do pods[#pods + 1] = p end
      for _, p in ipairs(on("n3", 4)) do pods[#pods + 1] = p end
      return cluster({ H.node("n1", 4), H.node("n2", 4), H.node("n3", 4) }, { a, b }, {
        { name = "spread", queue = "b", controller = "deployment", replicas = 8,
          requests = { gpu = 1, cpu = "1" }, termination_grace = 0, pods = pods },
        { name = "whole", queue = "a", requests = { gpu = 4, cpu = "1" }, submit_at = 10 },
      }, { horizon = 20 })
    end
    -- cpu quota -1: unlimited, so a cpu request keeps a within its quota
    local out = H.run(scenario(-1))
    assert.are.equal(8, H.queue_figures(out, "b").fair_share.gpu)
    local ev = evicted(out)
    assert.are.equal(4, #ev)
    for _, d in ipairs(ev) do
      assert.are.equal("reclaim", d.action)
      assert.are.equal("whole", d.evictor)
      assert.are.equal("n3", d.node)  -- one node's worth, nothing in vain
    end
    assert.are.equal("n3", placed(out, "whole")[1].node)
    assert.are.equal(4, H.queue_figures(out, "a").allocated.gpu)
    assert.are.equal(8, H.queue_figures(out, "b").allocated.gpu)
    -- cpu quota 0 (the default): the job's cpu puts a over its quota, so the
    -- guarantee does not apply and b, within its fair share, keeps its pods
    local capped = H.run(scenario(0))
    assert.are.equal(0, capped.summary.reclaims)
    assert.are.equal("pending", H.final_pod(capped, "whole-0").state)
  end)
end)

describe("KAI parity: queue order", function()
  -- One node; each queue's next job fills what is free, so the queue served
  -- first is the one whose job runs.
  local function first_served(queues, workloads, free_gpus)
    local out = H.run(cluster({ H.node("n1", free_gpus) }, queues, workloads, { horizon = 0 }))
    local names = {}
    for _, d in ipairs(H.decisions(out, function(d) return d.op == "bind" and d.action end)) do
      names[#names + 1] = d.pod
    end
    return names, out
  end

  it("serves queues not over their fair share before higher queue priority", function()
    -- hi (priority 10) is over its fair share of 0; lo is not
    local hi = q("hi", 0, 0, { priority = 10 })
    local names = first_served({ hi, q("lo", 4) }, {
      { name = "h-run", queue = "hi", requests = { gpu = 2 }, pods = on("n1", 1) },
      { name = "h", queue = "hi", requests = { gpu = 4 } },
      { name = "l", queue = "lo", requests = { gpu = 4 } },
    }, 6)
    assert.are.same({ "l-0" }, names)
  end)

  it("serves a queue within its quota with the job before one beyond it", function()
    -- a has no quota (its job is beyond it), b's job fits its quota; by
    -- name, or by allocated / fair share (0 for both), a would go first
    local names = first_served({ q("a", 0), q("b", 4) }, {
      { name = "ja", queue = "a", requests = { gpu = 8 } },
      { name = "jb", queue = "b", requests = { gpu = 4 } },
    }, 8)
    assert.are.same({ "jb-0" }, names)
  end)

  it("serves higher queue priority first among queues alike on the rules before", function()
    -- both under their fair share and beyond their quota; hi already holds
    -- more of its share than lo does, and still goes first
    local hi = q("hi", 0, 1, { priority = 10 })
    local names = first_served({ hi, q("lo", 0) }, {
      { name = "h-run", queue = "hi", requests = { gpu = 2 }, pods = on("n1", 1) },
      { name = "h", queue = "hi", requests = { gpu = 4 } },
      { name = "l", queue = "lo", requests = { gpu = 4 } },
    }, 8)
    assert.are.same({ "h-0" }, names)
  end)

  it("serves a queue with a fair share before one that would hold what it has no share of", function()
    -- a-zero has weight 0 and no quota: a fair share of 0
    local names = first_served({ q("a-zero", 0, 0), q("b", 0) }, {
      { name = "z", queue = "a-zero", requests = { gpu = 8 } },
      { name = "w", queue = "b", requests = { gpu = 8 } },
    }, 8)
    assert.are.same({ "w-0" }, names)
  end)

  it("serves the smaller dominant share with the job before the smaller share without it", function()
    -- fair shares 4 and 4 (weight 0: quotas only, 8 of 9 GPUs).  a holds 1
    -- and asks 6 (7/4 with the job), b holds 2 and asks 3 (5/4): b first,
    -- though a holds less (1/4 against 2/4)
    local names = first_served({ q("a", 4, 0), q("b", 4, 0) }, {
      { name = "a-run", queue = "a", requests = { gpu = 1 }, pods = on("n1", 1) },
      { name = "b-run", queue = "b", requests = { gpu = 2 }, pods = on("n1", 1) },
      { name = "ja", queue = "a", requests = { gpu = 6 } },
      { name = "jb", queue = "b", requests = { gpu = 3 } },
    }, 9)
    assert.are.same({ "jb-0" }, names)
  end)

  it("serves the queue created first among queues alike on every other rule", function()
    local names = first_served({ q("a", 4, 1, { created_at = 50 }), q("b", 4, 1, { created_at = -100 }) }, {
      { name = "ja", queue = "a", requests = { gpu = 8 } },
      { name = "jb", queue = "b", requests = { gpu = 8 } },
    }, 8)
    assert.are.same({ "jb-0" }, names)
  end)

  it("orders the queues of a subtree through the queues that decide between them", function()
    -- x and y are under dept (priority 5), analytics is a root of priority
    -- 0: x's and y's jobs come first, though analytics comes first by name
    -- and every leaf holds nothing
    local dept = q("dept", 4, 1, { priority = 5 })
    local names = first_served({ dept, q("x", 2, 1, { parent = "dept" }), q("y", 2, 1, { parent = "dept" }),
                                 q("analytics", 8) }, {
      { name = "jx", queue = "x", requests = { gpu = 2 } },
      { name = "jy", queue = "y", requests = { gpu = 2 } },
      { name = "jz", queue = "analytics", requests = { gpu = 8 } },
    }, 8)
    assert.are.same({ "jx-0", "jy-0" }, names)
  end)
end)

describe("KAI parity: victim order", function()
  it("takes from the lower-priority queue first", function()
    -- 16 GPUs, all held.  r (no quota) needs 2.  hi (priority 5, no quota,
    -- weight 0: a fair share of 0) holds 6; lo (quota 2) holds 10 over its
    -- fair share of 8 (t, whose 8-GPU job cannot run, shares the rest).
    -- Both may give; hi is the furthest over its share, but lo has the
    -- lower priority: lo gives both pods.
    local hi = q("hi", 0, 0, { priority = 5 })
    local lo_pods = on("n1", 2)
    for _, x in ipairs(on("n2", 8)) do lo_pods[#lo_pods + 1] = x end
    local out = H.run(cluster({ H.node("n1"), H.node("n2") }, { hi, q("lo", 2), q("r", 0), q("t", 0) }, {
      { name = "hw", queue = "hi", controller = "deployment", replicas = 6, requests = { gpu = 1 },
        termination_grace = 0, pods = on("n1", 6) },
      { name = "lw", queue = "lo", controller = "deployment", replicas = 10, requests = { gpu = 1 },
        termination_grace = 0, pods = lo_pods },
      { name = "tw", queue = "t", requests = { gpu = 8 } },
      { name = "rw", queue = "r", replicas = 2, min_member = 2, requests = { gpu = 1 }, submit_at = 10 },
    }, { horizon = 10 }))
    assert.are.equal(8, H.queue_figures(out, "lo").fair_share.gpu)
    assert.are.equal(0, H.queue_figures(out, "hi").fair_share.gpu)
    local ev = evicted(out)
    assert.are.equal(2, #ev)
    for _, d in ipairs(ev) do
      assert.are.equal("reclaim", d.action)
      assert.truthy(d.pod:match("^lw%-"), d.pod .. " taken before the lower-priority queue's pods")
    end
    assert.are.equal(8, H.queue_figures(out, "lo").allocated.gpu)
    assert.are.equal(6, H.queue_figures(out, "hi").allocated.gpu)
    assert.are.equal(2, #placed(out, "rw"))
  end)
end)

describe("KAI parity: fair share", function()
  local function shares(policies)
    local out = H.run(cluster({ H.node("n1", 10) },
      { q("a", 0), q("b", 0), q("c", 0, 1, { created_at = -1 }), q("d", 0, 3) }, {
        { name = "wa", queue = "a", requests = { gpu = 10 } },
        { name = "wb", queue = "b", requests = { gpu = 10 } },
        { name = "wc", queue = "c", requests = { gpu = 10 } },
        { name = "wd", queue = "d", requests = { gpu = 0.5 } },
      }, { horizon = 0 }), { policies = policies })
    local t = {}
    for _, name in ipairs({ "a", "b", "c", "d" }) do t[name] = H.queue_figures(out, name).fair_share.gpu end
    return t
  end

  it("hands out over-quota GPUs whole, the units left by largest remainder, in Lua and C alike", function()
    -- 10 GPUs by weight 1:1:1:3: d needs only 0.5 of its 5; a, b and c
    -- take 1 each of their 1.67, then 2 each of the 6.5 left (2.17 each),
    -- and the half GPU left goes to the queue created first (c), not by name
    local lua, builtin = shares(nil), shares(false)
    assert.are.same({ a = 3, b = 3, c = 3.5, d = 0.5 }, lua)
    assert.are.same(lua, builtin)
  end)

  it("gives every queue its quota when the quotas add up to more than the pool", function()
    -- 12 GPUs; a and b have quota 8 each.  b holds all 12; a's elastic
    -- pods reclaim until b is back at its quota of 8, and no further: both
    -- are promised 8, and the pool cannot keep both promises.
    local out = H.run(cluster({ H.node("n1", 12) }, { q("a", 8), q("b", 8) }, {
      { name = "bw", queue = "b", controller = "deployment", replicas = 12, requests = { gpu = 1 },
        termination_grace = 0, pods = on("n1", 12) },
      { name = "aw", queue = "a", controller = "deployment", replicas = 8, requests = { gpu = 1 },
        submit_at = 10 },
    }, { horizon = 30 }))
    assert.are.equal(8, H.queue_figures(out, "a").fair_share.gpu)
    assert.are.equal(8, H.queue_figures(out, "b").fair_share.gpu)
    assert.are.equal(4, out.summary.reclaims)
    assert.are.equal(4, H.queue_figures(out, "a").allocated.gpu)
    assert.are.equal(8, H.queue_figures(out, "b").allocated.gpu)
  end)
end)

describe("KAI parity: the fair-share check", function()
  -- 12 GPUs; a and b have quota 8 each and ask for 12 and 8
  local function run_with(shares_of)
    local dir = H.policy_dir({ ["fairshare.lua"] = string.format([[
      local M = {}
      function M.compute(view)
        local out = {}
        for _, q in ipairs(view.queues) do
          out[q.name] = { gpu = (%s)(q), cpu = 0, memory = 0 }
        end
        return out
      end
      return M
    ]], shares_of) })
    local out = H.run(cluster({ H.node("n1", 12) }, { q("a", 8), q("b", 8) }, {
      { name = "aw", queue = "a", controller = "deployment", replicas = 12, requests = { gpu = 1 } },
      { name = "bw", queue = "b", controller = "deployment", replicas = 8, requests = { gpu = 1 } },
    }, { horizon = 0 }), { policies = dir })
    H.remove_dir(dir)
    return out, H.events(out, function(e) return e.reason == "PolicyRejected" end)
  end

  it("accepts quotas given in full beyond the pool", function()
    local out, rejected = run_with("function(q) return math.min(q.quota.gpu, q.demand.gpu) end")
    assert.are.same({}, rejected)
    assert.are.equal(8, H.queue_figures(out, "a").fair_share.gpu)
    assert.are.equal(8, H.queue_figures(out, "b").fair_share.gpu)
  end)

  it("rejects more than the quotas guarantee, naming the rule", function()
    local out, rejected = run_with("function(q) return math.min(q.quota.gpu, q.demand.gpu) + 1 end")
    assert.are.equal(1, #rejected)
    assert.truthy(rejected[1].message:find("top-level queues share out more gpu than pool", 1, true),
      rejected[1].message)
    -- the built-in policy decides instead: the same quotas in full
    assert.are.equal(8, H.queue_figures(out, "a").fair_share.gpu)
  end)
end)

describe("KAI parity: scenarios that start mid-transition", function()
  it("start with a releasing pod and the pipelined pod that waits for its room", function()
    local out = H.run(cluster({ H.node("n1") }, { q("a", 8), q("b", 8) }, {
      { name = "old", queue = "a", requests = { gpu = 8 }, termination_grace = 30,
        pods = { { node = "n1", state = "releasing", release_at = 15 } } },
      { name = "new", queue = "b", requests = { gpu = 8 },
        pods = { { node = "n1", state = "pipelined" } } },
    }, { horizon = 30 }))
    -- new binds at the first cycle after old's room is free (t=20)
    local binds = H.decisions(out, function(d) return d.op == "bind" and d.pod == "new-0" end)
    assert.are.equal(1, #binds)
    assert.are.equal(20, binds[1].time)
    assert.are.equal("running", H.final_pod(out, "new-0").state)
    -- old's controller replaced the releasing pod: the replacement waits
    assert.are.equal("pending", H.final_pod(out, "old-0").state)
  end)

  it("KAI: pipelines a pending job onto the room a releasing pod still holds", function()
    -- the releasing pod's workload is being deleted: nothing replaces it
    local out = H.run(cluster({ H.node("n1", 4) }, { q("a", 4), q("b", 4) }, {
      { name = "leaving", queue = "a", requests = { gpu = 4 },
        pods = { { node = "n1", state = "releasing", release_at = 25 } } },
      { name = "next", queue = "b", requests = { gpu = 4 } },
    }, { horizon = 40, timeline = { { at = 0, action = "delete", workload = "leaving" } } }))
    local pipe = H.decisions(out, function(d) return d.op == "pipeline" and d.pod == "next-0" end)
    assert.are.equal(1, #pipe)
    assert.are.equal(0, pipe[1].time)
    assert.are.same({ "leaving-0" }, pipe[1].waits_for)
    local bind = H.decisions(out, function(d) return d.op == "bind" and d.pod == "next-0" end)
    assert.are.equal(30, bind[1].time)
  end)
end)

describe("KAI parity: creation times through the embedding API", function()
  it("order queues and jobs as in a scenario", function()
    -- one 8-GPU node, two queues alike but for their creation times, one
    -- 8-GPU job each: the queue created first is served, not the first name
    local e <close> = H.understory.engine({ policies = "policies" })
    e:upsert_node(H.node("n1"))
    e:upsert_queue(q("a", 4, 1, { created_at = 100 }))
    e:upsert_queue(q("b", 4, 1, { created_at = 5 }))
    e:upsert_workload({ name = "ja", queue = "a", requests = { gpu = 8 } }, 0)
    e:upsert_workload({ name = "jb", queue = "b", requests = { gpu = 8 } }, 0)
    local r = e:run_cycle(0)
    assert.are.equal(1, #r.decisions)
    assert.are.equal("jb", r.decisions[1].workload)

    -- within one queue: the job created first goes first, whatever its name
    local f <close> = H.understory.engine({ policies = "policies" })
    f:upsert_node(H.node("n1"))
    f:upsert_queue(q("a", 8))
    f:upsert_workload({ name = "early", queue = "a", requests = { gpu = 8 }, created_at = 50 }, 0)
    f:upsert_workload({ name = "earlier", queue = "a", requests = { gpu = 8 }, created_at = -50 }, 0)
    r = f:run_cycle(0)
    assert.are.equal(1, #r.decisions)
    assert.are.equal("earlier", r.decisions[1].workload)
  end)
end)
