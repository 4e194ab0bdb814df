-- background_spec.lua — every background-workload rule of DESIGN.md, end to
-- end through the real engine and the default Lua policies.
local H = require "tests.spec.helper"

-- Two 8-GPU nodes; gpu-burn fills every GPU at t=0; train (two 8-GPU pods)
-- arrives at t=10.
local function burn_and_train(opts)
  opts = opts or {}
  local workloads = {
    { name = "train", queue = "ml", replicas = 2, min_member = 2,
      requests = { gpu = 8, cpu = "8", memory = "64Gi" }, submit_at = 10 },
  }
  if not opts.no_background then
    workloads[#workloads + 1] = H.bg("gpu-burn", {
      controller = "deployment", replicas = opts.burn_replicas or 16,
      requests = { gpu = 1 }, termination_grace = opts.grace or 5 })
  end
  return {
    name = "burn and train", cycle_interval = 10, horizon = opts.horizon or 60,
    nodes = { H.node("n1", 8), H.node("n2", 8), H.node("n3", 8) },
    queues = { H.queue("ml", 24), H.bg_queue() },
    workloads = workloads,
  }
end

describe("background workloads", function()

  it("are invisible to planning: AI placements and fair share are the same without them", function()
    local with = H.run(burn_and_train(), { plain_ties = true })
    local without = H.run(burn_and_train({ no_background = true }), { plain_ties = true })
    local a, b = H.ai_placements(with, { "train" }), H.ai_placements(without, { "train" })
    assert.are.same(b, a)
    assert.are.equal(2, #a)
    assert.are.same(H.queue_figures(without, "ml"), H.queue_figures(with, "ml"))
  end)

  it("run in the gaps and keep running where they still fit", function()
    -- 24 GPUs, 16 burn pods: at t=0 all run; train needs 16 GPUs at t=10
    local out = H.run(burn_and_train())
    local first = H.decisions(out, function(d) return d.time == 0 and d.op == "bind" end)
    assert.are.equal(16, #first)
    -- train takes two whole nodes; burn pods on the third stay undisturbed
    local evicted = H.decisions(out, function(d) return d.op == "evict" end)
    local train_nodes = {}
    for _, d in ipairs(H.decisions(out, function(d) return d.pod:match("^train") end)) do
      train_nodes[d.node] = true
    end
    for _, d in ipairs(evicted) do
      assert.is_true(train_nodes[d.node], d.pod .. " evicted from a node train does not use")
    end
    -- every burn pod that was on the node train did not take is still running there
    local kept = 0
    for _, d in ipairs(first) do
      if not train_nodes[d.node] then
        local p = H.final_pod(out, d.pod)
        -- same name, still on the same node, running, never evicted
        for _, e in ipairs(evicted) do assert.are_not.equal(d.pod, e.pod) end
        if p.node == d.node and p.state == "running" then kept = kept + 1 end
      end
    end
    assert.is_true(kept >= 1)
  end)

  it("are evicted with an Evict event carrying the backgroundpods annotations", function()
    local out = H.run(burn_and_train())
    local evicts = H.decisions(out, function(d) return d.op == "evict" end)
    assert.is_true(#evicts > 0)
    for _, d in ipairs(evicts) do
      assert.are.equal("backgroundpods", d.action)
      assert.are.equal("train", d.evictor)
    end
    local events = H.events(out, function(e) return e.reason == "Evict" end)
    assert.are.equal(1, #events)
    local e = events[1]
    assert.are.equal("Normal", e.type)
    assert.are.equal("gpu-burn", e.object)
    assert.are.equal("backgroundpods", e.annotations["evictor-action-type"])
    assert.are.equal(tostring(#evicts), e.annotations["num-evicted-pods"])
    assert.are.equal("train", e.annotations["evictor-pod-group-name"])
    assert.are.equal(#evicts, out.summary.background_evictions)
  end)

  it("never count toward a queue's usage, demand or fair share", function()
    local out = H.run(burn_and_train({ horizon = 0 }))
    local bg = H.queue_figures(out, "infra-bg")
    assert.are.same({ gpu = 0, cpu = 0, memory = 0 }, bg.allocated)
    assert.are.same({ gpu = 0, cpu = 0, memory = 0 }, bg.fair_share)
    -- 16 burn pods run, yet ml (nothing submitted yet) sees a quiet cluster
    local ml = H.queue_figures(out, "ml")
    assert.are.equal(0, ml.allocated.gpu)
  end)

  it("never cause reclaim or preemption", function()
    -- borrower holds 12 of 16 GPUs over a quota of 8; pending background
    -- work waits instead of reclaiming
    local out = H.run({
      name = "no reclaim", cycle_interval = 10, horizon = 50,
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("team-a", 8), H.queue("team-b", 8), H.bg_queue() },
      workloads = {
        { name = "borrower", queue = "team-a", controller = "deployment", replicas = 16,
          requests = { gpu = 1 } },
        H.bg("burn", { controller = "deployment", replicas = 8, requests = { gpu = 1 },
                       submit_at = 10 }),
      },
    })
    assert.are.equal(0, out.summary.reclaims)
    assert.are.equal(0, out.summary.preemptions)
    assert.are.equal(0, #H.decisions(out, function(d) return d.op == "evict" end))
    for _, p in ipairs(H.final_pods(out, "burn")) do assert.are.equal("pending", p.state) end
  end)

  local function violation(fields, needle)
    local w = H.bg("bad", { requests = { gpu = 1 } })
    for k, v in pairs(fields) do w[k] = v end
    local out = H.run({
      name = "rule", cycle_interval = 10, horizon = 30,
      nodes = { H.node("n1", 8) },
      queues = { H.queue("ml", 8), H.bg_queue() },
      workloads = { w },
    })
    local warns = H.events(out, function(e) return e.type == "Warning" and e.object == "bad" end)
    assert.are.equal(1, #warns)
    assert.truthy(warns[1].message:find(needle, 1, true), warns[1].message)
    assert.are.equal(0, #H.decisions(out, function(d) return d.pod:match("^bad") end))
    for _, p in ipairs(H.final_pods(out, "bad")) do assert.are.equal("pending", p.state) end
  end

  it("in a queue with quota are never scheduled, with a Warning that says why", function()
    violation({ queue = "ml" }, "quota")
  end)

  it("that are non-preemptible are never scheduled, with a Warning", function()
    violation({ preemptibility = "non-preemptible" }, "non-preemptible")
  end)

  it("that are non-preemptible by priority class are never scheduled", function()
    violation({ priority = "build" }, "non-preemptible")
  end)

  it("that are semi-preemptible are never scheduled, with a Warning", function()
    violation({ preemptibility = "semi-preemptible" }, "semi-preemptible")
  end)

  it("that take preemptibility from the label are judged by it", function()
    violation({ labels = { ["kai.scheduler/background"] = "true",
                           ["kai.scheduler/preemptibility"] = "non-preemptible" } },
              "non-preemptible")
  end)

  it("with a fractional GPU request are never scheduled, with a Warning", function()
    violation({ requests = { gpu = 0.5 } }, "whole GPUs")
  end)

  it("pipeline the AI pod onto their resources until their grace period ends", function()
    local out = H.run(burn_and_train({ grace = 25, burn_replicas = 24 }))
    local pipes = H.decisions(out, function(d) return d.op == "pipeline" end)
    assert.are.equal(2, #pipes)
    for _, d in ipairs(pipes) do
      assert.are.equal(10, d.time)
      assert.is_true(#d.waits_for > 0)
      for _, w in ipairs(d.waits_for) do assert.truthy(w:match("^gpu%-burn%-")) end
    end
    -- evicted at t=10 with 25 s grace: resources free at t=35, bound at t=40
    local binds = H.decisions(out, function(d) return d.op == "bind" and d.pod:match("^train") end)
    assert.are.equal(2, #binds)
    for _, d in ipairs(binds) do assert.are.equal(40, d.time) end
  end)

  it("with a short grace period let the AI pod bind at the next cycle", function()
    local out = H.run(burn_and_train({ grace = 5, burn_replicas = 24 }))
    local binds = H.decisions(out, function(d) return d.op == "bind" and d.pod:match("^train") end)
    for _, d in ipairs(binds) do assert.are.equal(20, d.time) end
  end)

  it("with a grace period of 0 free their room at once", function()
    local out = H.run(burn_and_train({ grace = 0, burn_replicas = 24 }))
    assert.are.equal(0, #H.decisions(out, function(d) return d.op == "pipeline" end))
    local binds = H.decisions(out, function(d) return d.op == "bind" and d.pod:match("^train") end)
    assert.are.equal(2, #binds)
    for _, d in ipairs(binds) do assert.are.equal(10, d.time) end
  end)

  it("with a long grace period draw a warning, and a short one does not", function()
    local long = H.run(burn_and_train({ grace = 60 }))
    local w = H.events(long, function(e) return e.reason == "LongTerminationGrace" end)
    assert.are.equal(1, #w)
    assert.are.equal("Warning", w[1].type)
    assert.are.equal("gpu-burn", w[1].object)
    local short = H.run(burn_and_train({ grace = 30 }))
    assert.are.equal(0, #H.events(short, function(e) return e.reason == "LongTerminationGrace" end))
    -- the threshold is configurable
    local strict = H.run(burn_and_train({ grace = 30 }), { long_grace = 10 })
    assert.are.equal(1, #H.events(strict, function(e) return e.reason == "LongTerminationGrace" end))
  end)

  it("from a DaemonSet are recreated pending, pinned to their node", function()
    -- each node runs one agent using 4 GPUs; train needs all 8 GPUs of one node
    local out = H.run({
      name = "daemonset", cycle_interval = 10, horizon = 100,
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("ml", 16), H.bg_queue() },
      workloads = {
        H.bg("agent", { controller = "daemonset", requests = { gpu = 4 } }),
        { name = "train", queue = "ml", requests = { gpu = 8 }, submit_at = 10, duration = 30 },
      },
    })
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    assert.are.equal(1, #ev)
    local victim, node = ev[1].pod, ev[1].node
    assert.are.equal("agent-" .. node, victim)
    -- it comes back under the same name, on the same node, once train is done
    local binds = H.decisions(out, function(d) return d.op == "bind" and d.pod == victim end)
    assert.are.equal(2, #binds)
    for _, d in ipairs(binds) do assert.are.equal(node, d.node) end
    assert.is_true(binds[2].time > ev[1].time)
    -- while train ran, it stayed pending, though the other node had room
    local p = H.final_pod(out, victim)
    assert.are.equal(node, p.node)
    assert.are.equal("running", p.state)
  end)

  it("from a Deployment are recreated pending and may run anywhere", function()
    local out = H.run({
      name = "deployment", cycle_interval = 10, horizon = 60,
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("ml", 16), H.bg_queue() },
      workloads = {
        H.bg("burn", { controller = "deployment", replicas = 2, requests = { gpu = 4 },
                       pods = { { name = "burn-0", node = "n1", state = "running" },
                                { name = "burn-1", node = "n2", state = "running" } } }),
        { name = "train", queue = "ml", requests = { gpu = 6 }, submit_at = 10 },
      },
    }, { plain_ties = true })
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    assert.are.equal(1, #ev)
    -- evicted from one node, it runs again on the other, under the same name
    local again = H.decisions(out, function(d)
      return d.op == "bind" and d.pod == ev[1].pod and d.time > ev[1].time end)
    assert.are.equal(1, #again)
    assert.are_not.equal(ev[1].node, again[1].node)
  end)

  it("report pending as the normal steady state, not as an error", function()
    local out = H.run({
      name = "full", cycle_interval = 10, horizon = 40,
      nodes = { H.node("n1", 8) },
      queues = { H.queue("ml", 8), H.bg_queue() },
      workloads = {
        { name = "train", queue = "ml", requests = { gpu = 8 } },
        H.bg("burn", { controller = "deployment", replicas = 2, requests = { gpu = 1 } }),
      },
    })
    for _, p in ipairs(H.final_pods(out, "burn")) do assert.are.equal("pending", p.state) end
    local evs = H.events(out, function(e) return e.object == "burn" end)
    assert.are.equal(1, #evs)  -- reported once, not every cycle
    assert.are.equal("Normal", evs[1].type)
    assert.are.equal("WaitingForIdleResources", evs[1].reason)
    assert.truthy(evs[1].message:find("waiting for idle resources", 1, true))
    -- and it does not count as pending AI work
    assert.are.equal(0, out.summary.ai_pods_pending)
  end)
end)
