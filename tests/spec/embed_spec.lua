-- embed_spec.lua — the Lua module's engine object (understory.engine): the
-- embedding API the Lua way.  Tables in, tables out, errors raised as Lua
-- errors with the engine's message; and the same decisions as the
-- simulator on the same cluster.
local H = require "tests.spec.helper"
local understory = H.understory

local function find(list, pred)
  for _, x in ipairs(list) do
    if pred(x) then return x end
  end
end

local function named(list, name)
  return find(list, function(x) return x.name == name end)
end

-- Two 8-GPU nodes, a team queue, a background queue.
local function small_cluster(opts)
  local e = understory.engine(opts or { policies = "policies" })
  e:upsert_node(H.node("n1"))
  e:upsert_node(H.node("n2"))
  e:upsert_queue(H.queue("team", 16))
  e:upsert_queue(H.bg_queue())
  return e
end

describe("understory.engine", function()
  it("takes tables and gives tables back", function()
    local e <close> = small_cluster()
    e:upsert_workload(H.bg("burn", { controller = "deployment", replicas = 4, requests = { gpu = 1 } }), 0)
    local r = e:run_cycle(0)
    assert.are.equal(4, #r.decisions)
    local d = r.decisions[1]
    assert.are.equal("bind", d.op)
    assert.are.equal("burn", d.workload)
    assert.are.equal("backgroundpods", d.action)
    assert.is_string(d.node)
    assert.are.same({}, r.events)

    e:upsert_workload({ name = "train", queue = "team", replicas = 2, requests = { gpu = 8 } }, 10)
    r = e:run_cycle(10)
    local evict = find(r.decisions, function(x) return x.op == "evict" end)
    assert.are.equal("train", evict.evictor)
    local pipe = find(r.decisions, function(x) return x.op == "pipeline" end)
    assert.is_table(pipe.waits_for)
    assert.is_true(#pipe.waits_for >= 1)
    local ev = find(r.events, function(x) return x.reason == "Evict" end)
    assert.are.equal("backgroundpods", ev.annotations["evictor-action-type"])
    assert.are.equal("train", ev.annotations["evictor-pod-group-name"])

    local q = named(e:queues(), "team")
    assert.are.same({ gpu = 16, cpu = 0, memory = 0 }, q.allocated)
    assert.are.equal(16, q.fair_share.gpu)
    local p = named(e:pods(), pipe.pod)
    assert.are.equal("pipelined", p.state)
    assert.are.equal("train", p.workload)
    assert.is_false(p.background)
    local n = named(e:nodes(), "n1")
    assert.are.equal(8, n.capacity.gpu)
    assert.are.equal(64000, n.capacity.cpu)
    -- the same node read by name; a name not in the cluster is nil
    assert.are.same(n, e:node("n1"))
    assert.is_nil(e:node("n9"))
    local w = named(e:workloads(), "train")
    assert.are.equal("active", w.state)
    assert.is_nil(w.running_since)
    e:run_cycle(20)
    assert.are.equal(20, named(e:workloads(), "train").running_since)
    assert.are.equal(20, e:time())
  end)

  it("accepts the same objects as JSON text", function()
    local e <close> = understory.engine()
    e:upsert_node('{"name": "n1", "gpu": 8}')
    e:upsert_queue('{"name": "q", "resources": {"gpu": {"quota": 8}}}')
    e:upsert_workload('{"name": "w", "queue": "q", "requests": {"gpu": 2}}', 0)
    local r = e:run_cycle(0)
    assert.are.same({ op = "bind", pod = "w-0", workload = "w", node = "n1", action = "allocate" },
                    r.decisions[1])
  end)

  it("raises the engine's errors as Lua errors, changing nothing", function()
    local e <close> = small_cluster()
    e:upsert_workload({ name = "w", queue = "team", requests = { gpu = 1 } }, 5)
    local before = e:pods()
    assert.has_error(function() e:upsert_node { name = "n3", gpus = 8 } end,
                     'node.gpus: unknown field (did you mean "gpu"?)')
    assert.has_error(function() e:upsert_workload({ name = "x", queue = "team-z" }) end,
                     'workload.queue: "team-z" is not a queue')
    assert.has_error(function() e:upsert_workload({ name = "x", queue = "team", duration = 5 }) end,
                     "workload.duration: a simulator field, not used here: the caller completes a "
                     .. "workload with us_engine_complete_workload")
    assert.has_error(function() e:remove_queue("team") end, 'queue "team" holds workload "w"')
    assert.has_error(function() e:remove_node("n9") end, 'node "n9" is not in the cluster')
    assert.has_error(function() e:run_cycle(1) end,
                     "now: 1 is before the engine's time 5 (time never goes back)")
    assert.has_error(function() e:upsert_node { name = "n3", labels = { zone = print } } end,
                     "node.labels.zone: a function cannot be converted to JSON")
    assert.has_error(function() e:upsert_node(42) end, "node: expected a table or JSON text")
    assert.has_error(function() e:upsert_pod { name = "ghost", node = "n1" } end,
                     'pod.workload: pod "ghost" is unknown; name its workload to add it')
    assert.are.same(before, e:pods())
  end)

  it("refuses unknown options", function()
    assert.has_error(function() understory.engine { polices = "policies" } end)
    assert.has_error(function() understory.engine { policies = "/nonexistent" } end)
  end)

  it("hears what the cluster did: pods running, gone, failed binds", function()
    local e <close> = small_cluster()
    e:upsert_workload({ name = "w", queue = "team", controller = "deployment", replicas = 2,
                        requests = { gpu = 4 } }, 0)
    -- at start-up a pod already runs under the cluster's own name
    e:upsert_pod { name = "w-7f9c", workload = "w", node = "n2" }
    assert.are.equal("running", named(e:pods(), "w-7f9c").state)
    local r = e:run_cycle(0)
    assert.are.equal(1, #r.decisions)
    -- its bind failed: pending again, placed again next cycle
    e:upsert_pod { name = r.decisions[1].pod }
    assert.are.equal("pending", named(e:pods(), r.decisions[1].pod).state)
    -- a pod vanished: its controller recreates it
    e:remove_pod "w-7f9c"
    assert.are.equal("pending", named(e:pods(), "w-7f9c").state)
    r = e:run_cycle(10)
    assert.are.equal(2, #r.decisions)
    e:complete_workload("w", 20)
    assert.are.same({}, e:pods())
    assert.are.same({}, e:workloads())
  end)

  it("with reported_pods, places only the pods the cluster reported", function()
    local e <close> = small_cluster { policies = "policies", reported_pods = true }
    e:upsert_workload({ name = "train", queue = "team", replicas = 2, min_member = 2,
                        requests = { gpu = 4 } }, 0)
    e:upsert_workload(H.bg("burn", { controller = "deployment", replicas = 2, requests = { gpu = 1 } }), 0)
    -- one pod of the gang and one burn-in pod exist so far
    e:upsert_pod { name = "train-a1", workload = "train" }
    e:upsert_pod { name = "burn-x1", workload = "burn" }
    local r = e:run_cycle(0)
    -- the burn-in pod binds; no pod the cluster does not have is placed,
    -- and the gang waits for its second pod
    assert.are.equal(1, #r.decisions)
    assert.are.same({ "bind", "burn-x1" }, { r.decisions[1].op, r.decisions[1].pod })
    local train
    for _, w in ipairs(e:workloads()) do if w.name == "train" then train = w end end
    assert.are.equal("not-created", train.pending_reason)
    -- the second pod appears: the gang binds whole
    e:upsert_pod { name = "train-b2", workload = "train" }
    r = e:run_cycle(1)
    local bound = {}
    for _, d in ipairs(r.decisions) do if d.op == "bind" then bound[#bound + 1] = d.pod end end
    table.sort(bound)
    assert.are.same({ "train-a1", "train-b2" }, bound)
    -- the simulator names its own pods: the option is the engine's only
    assert.has_error(function() understory.simulate("examples/seed-story.json", { reported_pods = true }) end,
                     "opts.reported_pods: only for understory.engine (a simulation reports no pods)")
  end)

  it("calls on_event once per event, after the cycle", function()
    local e <close> = small_cluster()
    local seen = {}
    e:on_event(function(ev) seen[#seen + 1] = ev.reason end)
    e:upsert_workload({ name = "big", queue = "team", replicas = 3, requests = { gpu = 8 } }, 0)
    local r = e:run_cycle(0)
    assert.are.equal(#r.events, #seen)
    assert.are.equal("Unschedulable", seen[1])
    e:on_event(function() error("callback broke") end)
    e:upsert_workload({ name = "b2", queue = "team", replicas = 3, requests = { gpu = 8 } }, 10)
    assert.has_error(function() e:run_cycle(10) end, "callback broke")
    assert.matches("2 cycles", tostring(e)) -- the cycle itself ran
    e:on_event(nil)
    e:run_cycle(20)
  end)

  it("reloads only policies that pass their check", function()
    local e <close> = small_cluster {}
    assert.are.equal("builtin", e:policy_id())
    assert.has_error(function() e:reload_policies "/nonexistent" end)
    assert.are.equal("builtin", e:policy_id())
    e:reload_policies "policies"
    assert.are_not.equal("builtin", e:policy_id())
    e:load_policies(nil)
    assert.are.equal("builtin", e:policy_id())
  end)

  it("is unusable once closed, and close is idempotent", function()
    local e = understory.engine()
    e:close()
    e:close()
    assert.has_error(function() e:pods() end, "understory engine: used after close")
    assert.matches("closed", tostring(e))
  end)

  it("decides what the simulator decides", function()
    local sc = {
      name = "same", cycle_interval = 10, horizon = 30,
      nodes = { H.node("n1"), H.node("n2") },
      queues = { H.queue("team", 16), H.bg_queue() },
      workloads = {
        H.bg("agent", { controller = "daemonset", requests = { cpu = "100m" } }),
        H.bg("burn", { controller = "deployment", replicas = 14, requests = { gpu = 1 } }),
        { name = "train", queue = "team", replicas = 2, requests = { gpu = 8 }, submit_at = 10 },
      },
    }
    local out = H.run(sc)
    local e <close> = understory.engine { policies = "policies" }
    for _, n in ipairs(sc.nodes) do e:upsert_node(n) end
    for _, q in ipairs(sc.queues) do e:upsert_queue(q) end
    local mine = {}
    for c = 0, 3 do
      local t = c * 10
      for _, w in ipairs(sc.workloads) do
        if (w.submit_at or 0) == t then
          local copy = {}
          for k, v in pairs(w) do copy[k] = v end
          copy.submit_at = nil
          e:upsert_workload(copy, t)
        end
      end
      for _, d in ipairs(e:run_cycle(t).decisions) do
        d.workload = nil -- the simulator's document has no such field
        mine[#mine + 1] = d
      end
    end
    local theirs = {}
    for _, d in ipairs(H.decisions(out)) do
      d.cycle, d.time = nil, nil
      theirs[#theirs + 1] = d
    end
    assert.is_true(#theirs > 10)
    assert.are.same(theirs, mine)
  end)
end)

describe("understory.json_decode and json_encode", function()
  it("round-trip tables", function()
    local t = { name = "n1", gpu = 8, labels = { zone = "a" }, list = { 1, 2, 3 } }
    assert.are.same(t, understory.json_decode(understory.json_encode(t)))
    assert.are.equal('{"a":1,"b":[true,"x"]}', understory.json_encode { b = { true, "x" }, a = 1 })
  end)

  it("name the place of a syntax error", function()
    assert.has_error(function() understory.json_decode('{\n "a": }') end,
                     "invalid JSON at line 2, column 7")
  end)
end)
