-- scheduling_spec.lua — AI scheduling as the engine does it: gangs, queue
-- order, quota and limit, reclaim, preemption, devices, nodes over time.
local H = require "tests.spec.helper"

local function cluster(nodes, queues, workloads, extra)
  local sc = { name = "spec", cycle_interval = 10, horizon = 60,
               nodes = nodes, queues = queues, workloads = workloads }
  for k, v in pairs(extra or {}) do sc[k] = v end
  return sc
end

local function binds(out, prefix)
  return H.decisions(out, function(d)
    return (d.op == "bind" or d.op == "pipeline") and d.pod:sub(1, #prefix) == prefix and d.action
  end)
end

describe("gang scheduling", function()
  it("places a gang all or nothing", function()
    -- 3 pods of 8 GPUs, min_member 3, on two 8-GPU nodes: nothing is placed
    local out = H.run(cluster({ H.node("n1"), H.node("n2") }, { H.queue("ml", 16) }, {
      { name = "big", queue = "ml", replicas = 3, min_member = 3, requests = { gpu = 8 } },
    }))
    assert.are.equal(0, #binds(out, "big"))
    assert.are.equal(3, out.summary.ai_pods_pending)
    local ev = H.events(out, function(e) return e.object == "big" end)
    assert.are.equal("Unschedulable", ev[1].reason)
  end)

  it("places elastic pods beyond min_member one at a time", function()
    local out = H.run(cluster({ H.node("n1"), H.node("n2") }, { H.queue("ml", 16) }, {
      { name = "el", queue = "ml", replicas = 3, min_member = 1, requests = { gpu = 8 } },
    }))
    assert.are.equal(2, #binds(out, "el"))
    assert.are.equal(1, out.summary.ai_pods_pending)
  end)

  it("completes after its duration and frees its resources", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 8) }, {
      { name = "a", queue = "ml", requests = { gpu = 8 }, duration = 20 },
      { name = "b", queue = "ml", requests = { gpu = 8 }, submit_at = 0 },
    }))
    local b = binds(out, "b-")
    assert.are.equal(1, #b)
    assert.are.equal(20, b[1].time)
    assert.are.equal("completed", H.final_pod(out, "a-0").state)
  end)
end)

describe("queues", function()
  it("serve the queue with the lowest allocated/fair-share ratio first", function()
    -- one free node; team-a already uses 8 GPUs, team-b nothing
    local out = H.run(cluster({ H.node("n1"), H.node("n2") },
      { H.queue("team-a", 8), H.queue("team-b", 8) }, {
        { name = "a-run", queue = "team-a", requests = { gpu = 8 },
          pods = { { node = "n1", state = "running" } } },
        { name = "a-next", queue = "team-a", requests = { gpu = 8 }, submit_at = 10 },
        { name = "b-next", queue = "team-b", requests = { gpu = 8 }, submit_at = 10 },
      }))
    assert.are.equal(1, #binds(out, "b-next"))
    assert.are.equal(0, #binds(out, "a-next"))
  end)

  it("never let a queue exceed its limit", function()
    local q = H.queue("ml", 4)
    q.resources.gpu.limit = 6
    local out = H.run(cluster({ H.node("n1") }, { q }, {
      { name = "w", queue = "ml", controller = "deployment", replicas = 8, requests = { gpu = 1 } },
    }))
    assert.are.equal(6, #binds(out, "w"))
    assert.are.equal(6, H.queue_figures(out, "ml").allocated.gpu)
  end)

  it("give non-preemptible work in-quota resources only", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 2) }, {
      { name = "svc", queue = "ml", priority = "inference", controller = "deployment",
        replicas = 4, requests = { gpu = 1 } },
    }))
    assert.are.equal(2, #binds(out, "svc"))
  end)

  it("compute KAI fair share: quota first, the rest by over-quota weight, capped by demand", function()
    local a = H.queue("a", 2); a.resources.gpu.over_quota_weight = 3
    local b = H.queue("b", 2); b.resources.gpu.over_quota_weight = 1
    local c = H.queue("c", 2)
    local out = H.run(cluster({ H.node("n1", 16) }, { a, b, c }, {
      { name = "wa", queue = "a", controller = "deployment", replicas = 16, requests = { gpu = 1 } },
      { name = "wb", queue = "b", controller = "deployment", replicas = 16, requests = { gpu = 1 } },
      { name = "wc", queue = "c", controller = "deployment", replicas = 1, requests = { gpu = 1 } },
    }, { horizon = 0 }))
    -- 16 GPUs: quota a 2, b 2, c min(2, demand 1) = 1; 11 left split 3:1 between a and b,
    -- in whole GPUs as KAI does: 8.25 -> 8 and 2.75 -> 2, and the GPU left to the larger
    -- part not given (b's 0.75)
    assert.are.equal(2 + 8, H.queue_figures(out, "a").fair_share.gpu)
    assert.are.equal(2 + 2 + 1, H.queue_figures(out, "b").fair_share.gpu)
    assert.are.equal(1, H.queue_figures(out, "c").fair_share.gpu)
  end)

  it("split over-quota by queue priority first", function()
    local hi = H.queue("hi", 0, { priority = 10 })
    local lo = H.queue("lo", 0)
    local out = H.run(cluster({ H.node("n1", 8) }, { hi, lo }, {
      { name = "h", queue = "hi", controller = "deployment", replicas = 6, requests = { gpu = 1 } },
      { name = "l", queue = "lo", controller = "deployment", replicas = 6, requests = { gpu = 1 } },
    }, { horizon = 0 }))
    assert.are.equal(6, H.queue_figures(out, "hi").fair_share.gpu)
    assert.are.equal(2, H.queue_figures(out, "lo").fair_share.gpu)
  end)

  it("share down the queue tree", function()
    local out = H.run(cluster({ H.node("n1", 8) }, {
      H.queue("org", 8), H.queue("x", 2, { parent = "org" }), H.queue("y", 2, { parent = "org" }),
    }, {
      { name = "wx", queue = "x", controller = "deployment", replicas = 8, requests = { gpu = 1 } },
      { name = "wy", queue = "y", controller = "deployment", replicas = 8, requests = { gpu = 1 } },
    }, { horizon = 0 }))
    assert.are.equal(8, H.queue_figures(out, "org").fair_share.gpu)
    assert.are.equal(4, H.queue_figures(out, "x").fair_share.gpu)
    assert.are.equal(4, H.queue_figures(out, "y").fair_share.gpu)
  end)
end)

describe("reclaim", function()
  it("lets a queue under its fair share take from a queue over its own", function()
    local out = H.run(cluster({ H.node("n1"), H.node("n2") },
      { H.queue("team-a", 8), H.queue("team-b", 8) }, {
        { name = "borrow", queue = "team-a", controller = "deployment", replicas = 16,
          requests = { gpu = 1 }, termination_grace = 0 },
        { name = "own", queue = "team-b", replicas = 4, min_member = 4, requests = { gpu = 2 },
          submit_at = 10 },
      }))
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    assert.are.equal(8, #ev)
    for _, d in ipairs(ev) do
      assert.are.equal("reclaim", d.action)
      assert.are.equal("own", d.evictor)
      assert.truthy(d.pod:match("^borrow"))
    end
    assert.are.equal(8, out.summary.reclaims)
    assert.are.equal(4, #binds(out, "own"))
    local e = H.events(out, function(e) return e.reason == "Evict" end)[1]
    assert.are.equal("reclaim", e.annotations["evictor-action-type"])
    assert.are.equal("8", e.annotations["num-evicted-pods"])
    -- borrow keeps its own quota: 8 GPUs
    assert.are.equal(8, H.queue_figures(out, "team-a").allocated.gpu)
  end)

  it("does not take from a queue within its fair share", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("team-a", 8), H.queue("team-b", 8) }, {
      { name = "mine", queue = "team-a", controller = "deployment", replicas = 8, requests = { gpu = 1 } },
      { name = "greedy", queue = "team-b", replicas = 1, requests = { gpu = 8 }, submit_at = 10 },
    }))
    -- fair share: 8 GPUs split 4/4 by demand... team-a holds 8 > its fair share 4, so
    -- team-b may reclaim only up to its own fair share of 4: a gang of 8 never fits
    assert.are.equal(0, out.summary.reclaims)
  end)
  it("does not take from a queue whose parent is under its own fair share", function()
    -- org-a holds 8 of the 10 GPUs it deserves, all of them in a-one (over
    -- its share of 1: a-two, which cannot run, deserves the rest); org-b's
    -- b-one holds 16 of its 10.  c-one reclaims 4 GPUs: they come from b-one,
    -- never from a-one, though a-one is the furthest over its own share.
    local function q(name, parent, quota)
      return { name = name, parent = parent, resources = { gpu = { quota = quota, over_quota_weight = 1 } } }
    end
    local function on(node, n)
      local pods = {}
      for _ = 1, n do pods[#pods + 1] = { node = node, state = "running" } end
      return pods
    end
    local b_pods = on("n2", 8)
    for _, p in ipairs(on("n3", 8)) do b_pods[#b_pods + 1] = p end
    local out = H.run({
      name = "tree reclaim", cycle_interval = 10, horizon = 20,
      nodes = { H.node("n1"), H.node("n2"), H.node("n3") },
      queues = { q("org-a", nil, 8), q("a-one", "org-a", 0), q("a-two", "org-a", 8),
                 q("org-b", nil, 8), q("b-one", "org-b", 8),
                 q("org-c", nil, 8), q("c-one", "org-c", 8) },
      workloads = {
        { name = "aw", queue = "a-one", controller = "deployment", replicas = 8,
          requests = { gpu = 1 }, termination_grace = 0, pods = on("n1", 8) },
        { name = "bw", queue = "b-one", controller = "deployment", replicas = 16,
          requests = { gpu = 1 }, termination_grace = 0, pods = b_pods },
        { name = "a2w", queue = "a-two", replicas = 16, min_member = 16, requests = { gpu = 1 } },
        { name = "cw", queue = "c-one", replicas = 4, min_member = 4, requests = { gpu = 1 },
          submit_at = 10 },
      },
    })
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    assert.are.equal(4, #ev)
    for _, d in ipairs(ev) do
      assert.are.equal("reclaim", d.action)
      assert.truthy(d.pod:match("^bw%-"), d.pod .. " taken from a queue whose parent is under its share")
    end
    assert.are.equal(4, #binds(out, "cw-"))
  end)
end)

describe("preemption", function()
  it("lets higher priority evict preemptible lower priority inside one queue", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 8) }, {
      { name = "low", queue = "ml", priority = "train", replicas = 4, min_member = 4,
        requests = { gpu = 2 }, termination_grace = 10 },
      { name = "high", queue = "ml", priority = "build-preemptible", requests = { gpu = 4 },
        submit_at = 10 },
    }))
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    -- taking any pod breaks low's gang of 4: the whole gang goes back to pending
    assert.are.equal(4, #ev)
    for _, d in ipairs(ev) do assert.are.equal("preempt", d.action) end
    assert.are.equal(4, out.summary.preemptions)
    local p = H.decisions(out, function(d) return d.pod == "high-0" end)
    assert.are.equal("pipeline", p[1].op)
    assert.are.equal("bind", p[2].op)
    assert.are.equal(20, p[2].time)
  end)

  it("takes only elastic pods when they are enough", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 8) }, {
      { name = "low", queue = "ml", controller = "deployment", replicas = 4, min_member = 1,
        requests = { gpu = 2 }, termination_grace = 0 },
      { name = "high", queue = "ml", priority = "build-preemptible", requests = { gpu = 4 },
        submit_at = 10 },
    }))
    assert.are.equal(2, out.summary.preemptions)
  end)

  it("never evicts non-preemptible work", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 8) }, {
      { name = "svc", queue = "ml", priority = "build", requests = { gpu = 8 } },
      { name = "top", queue = "ml", priority = "inference", requests = { gpu = 8 }, submit_at = 10 },
    }))
    assert.are.equal(0, out.summary.preemptions)
  end)
end)

describe("devices and nodes", function()
  it("shares one device among fractional-GPU pods, up to a whole", function()
    local out = H.run(cluster({ H.node("n1", 1) }, { H.queue("ml", 1) }, {
      { name = "f", queue = "ml", controller = "deployment", replicas = 3, requests = { gpu = 0.5 } },
    }))
    assert.are.equal(2, #binds(out, "f"))
  end)

  it("does not give a whole-GPU pod a device in fractional use", function()
    local out = H.run(cluster({ H.node("n1", 2) }, { H.queue("ml", 2) }, {
      { name = "f", queue = "ml", requests = { gpu = 0.25 } },
      { name = "w", queue = "ml", requests = { gpu = 2 }, submit_at = 10 },
    }))
    assert.are.equal(0, #binds(out, "w"))
  end)

  it("honours node selectors and cordons", function()
    local out = H.run(cluster({
      H.node("a1", 8, { labels = { zone = "a" } }),
      H.node("b1", 8, { labels = { zone = "b" }, unschedulable = true }),
      H.node("b2", 8, { labels = { zone = "b" } }),
    }, { H.queue("ml", 24) }, {
      { name = "zb", queue = "ml", controller = "deployment", replicas = 2,
        node_selector = { zone = "b" }, requests = { gpu = 8 } },
    }))
    local b = binds(out, "zb")
    assert.are.equal(1, #b)
    assert.are.equal("b2", b[1].node)
  end)

  it("recreates the pods of a removed node and restarts a gang that lost a member", function()
    local out = H.run(cluster({ H.node("n1"), H.node("n2"), H.node("n3") }, { H.queue("ml", 24) }, {
      { name = "g", queue = "ml", replicas = 2, min_member = 2, requests = { gpu = 8 },
        termination_grace = 0 },
    }, { timeline = { { at = 20, action = "remove_node", node = "n1" } } }))
    -- g-0 on n1 dies with the node; g-1 goes back to pending; both come back on n2, n3
    local final = H.final_pods(out, "g")
    assert.are.equal(2, #final)
    for _, p in ipairs(final) do
      assert.are.equal("running", p.state)
      assert.are_not.equal("n1", p.node)
    end
  end)

  it("runs a DaemonSet pod on a node that joins", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 8), H.bg_queue() }, {
      H.bg("agent", { controller = "daemonset", requests = { cpu = "100m" } }),
    }, { timeline = { { at = 20, action = "add_node", node = { name = "n9", gpu = 8, cpu = "8" } } } }))
    local p = H.final_pod(out, "agent-n9")
    assert.are.equal("running", p.state)
    assert.are.equal("n9", p.node)
  end)
end)

describe("determinism", function()
  it("gives the same output for the same input", function()
    local sc = "examples/seed-story.json"
    local a, b = H.run(sc), H.run(sc)
    assert.is_true(#a.cycles > 10)
    assert.are.same(a, b)
  end)
end)

describe("background-aware tie-breaking", function()
  it("displaces less background work than plain invisible planning, with the same AI outcome", function()
    local aware = H.run("examples/tie-break.json")
    local plain = H.run("examples/tie-break.json", { plain_ties = true })
    assert.is_true(aware.summary.background_evictions < plain.summary.background_evictions)
    assert.are.equal(plain.summary.ai_pods_pending, aware.summary.ai_pods_pending)
    assert.are.same(H.queue_figures(plain, "ml"), H.queue_figures(aware, "ml"))
    assert.are.equal(#binds(plain, "train"), #binds(aware, "train"))
  end)
end)

describe("invariant checks", function()
  it("run on request after every cycle and change nothing in the output", function()
    for _, sc in ipairs { "examples/seed-story.json", "examples/reclaim.json", "examples/preempt.json" } do
      local plain = H.run(sc)
      local checked = H.run(sc, { check_invariants = true })
      assert.are.same(plain, checked)
    end
    -- the engine takes the option too, and runs its cycles checked
    local e <close> = H.understory.engine { check_invariants = true }
    e:upsert_node { name = "n1", gpu = 8 }
    e:upsert_queue { name = "q", resources = { gpu = { quota = 8 } } }
    e:upsert_workload({ name = "w", queue = "q", replicas = 2, requests = { gpu = 4 } }, 0)
    assert.are.equal(2, #e:run_cycle(0).decisions)
  end)

  it("refuses a check_invariants that is not a boolean", function()
    assert.has_error(function() H.run("examples/seed-story.json", { check_invariants = "yes" }) end,
                     "opts.check_invariants: expected a boolean")
  end)
end)

describe("node pools", function()
  local function two_pools()
    return {
      name = "pools", cycle_interval = 10, horizon = 20,
      nodes = { H.node("a1", 8, { pool = "a100" }), H.node("h1", 8, { pool = "h100" }) },
      queues = {
        { name = "ml", resources = { gpu = { quota = 4 } },
          pools = { h100 = { gpu = { quota = 0, limit = 2 } } } },
        H.bg_queue(),
      },
      workloads = {
        { name = "ta", queue = "ml", pool = "a100", controller = "deployment", replicas = 8,
          requests = { gpu = 1 } },
        { name = "th", queue = "ml", pool = "h100", controller = "deployment", replicas = 8,
          requests = { gpu = 1 } },
        H.bg("burn", { pool = "h100", controller = "deployment", replicas = 8, requests = { gpu = 1 } }),
      },
    }
  end

  it("are scheduled independently, each with its own quota and limit", function()
    local out = H.run(two_pools())
    -- a100: no limit, all 8 run on a1; h100: the per-pool limit of 2 holds
    for _, d in ipairs(binds(out, "ta-")) do assert.are.equal("a1", d.node) end
    assert.are.equal(8, #binds(out, "ta-"))
    assert.are.equal(2, #binds(out, "th-"))
    for _, d in ipairs(binds(out, "th-")) do assert.are.equal("h1", d.node) end
    -- background work on h100 takes what the limit leaves, and only there
    local burn = H.decisions(out, function(d) return d.pod:match("^burn") and d.op == "bind" end)
    assert.are.equal(6, #burn)
    for _, d in ipairs(burn) do assert.are.equal("h1", d.node) end
    -- allocation is summed over pools
    assert.are.equal(10, H.queue_figures(out, "ml").allocated.gpu)
  end)

  it("say why AI pods stay pending: a queue at its limit", function()
    local out = H.run(two_pools())
    local ev = H.events(out, function(e) return e.object == "th" end)
    assert.are.equal(1, #ev)
    assert.are.equal("Unschedulable", ev[1].reason)
    assert.truthy(ev[1].message:find('queue "ml" would go over its limit on pool "h100"', 1, true),
                  ev[1].message)
  end)

  it("say why non-preemptible pods stay pending: quota used up", function()
    local out = H.run(cluster({ H.node("n1") }, { H.queue("ml", 2) }, {
      { name = "svc", queue = "ml", priority = "inference", controller = "deployment",
        replicas = 4, requests = { gpu = 1 } },
    }))
    local ev = H.events(out, function(e) return e.object == "svc" end)
    assert.truthy(ev[1].message:find('queue "ml" has used its quota on pool "default"', 1, true),
                  ev[1].message)
  end)

  it("say why pods stay pending: no room", function()
    -- two nodes could hold the gang, but one is taken (a gang larger than
    -- the nodes even empty has a reason of its own: pending_spec.lua)
    local out = H.run(cluster({ H.node("n1", 8), H.node("n2", 8) }, { H.queue("ml", 16) }, {
      { name = "hog", queue = "ml", priority = "inference", requests = { gpu = 8 } },
      { name = "big", queue = "ml", replicas = 2, min_member = 2, requests = { gpu = 8 } },
    }))
    local ev = H.events(out, function(e) return e.object == "big" end)
    assert.truthy(ev[1].message:find("not enough free resources for the gang", 1, true), ev[1].message)
  end)
end)
