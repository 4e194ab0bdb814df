-- external_spec.lua — workloads the engine does not schedule ("external":
-- true: kube-system pods, pods of another scheduler).  Their pods hold room
-- on their nodes in every view (AI planning, background re-offer, the
-- physical view of terminating pods), are never victims of reclaim,
-- preemption or background eviction, are never placed nor reported
-- pending, and appear in the final pods with their state.
local H = require "tests.spec.helper"
local understory = H.understory

-- An external workload with pods on the given nodes.
local function ext(name, gpu, nodes, extra)
  local pods = {}
  for i, n in ipairs(nodes) do pods[i] = { name = name .. "-" .. n, node = n, state = "running" } end
  local w = { name = name, external = true, replicas = #nodes, requests = { gpu = gpu }, pods = pods }
  for k, v in pairs(extra or {}) do w[k] = v end
  return w
end

local function ops(out, pred)
  local list = {}
  for _, d in ipairs(H.decisions(out, pred)) do list[#list + 1] = d.op .. " " .. d.pod end
  table.sort(list)
  return list
end

local function external_untouched(out, name, nodes)
  -- no decision of the whole run names one of its pods
  assert.are.same({}, ops(out, function(d) return d.pod:sub(1, #name + 1) == name .. "-" end))
  for _, n in ipairs(nodes) do
    local p = H.final_pod(out, name .. "-" .. n)
    assert.is_table(p, name .. "-" .. n)
    assert.are.equal("running", p.state)
    assert.are.equal(n, p.node)
    assert.is_true(p.external)
    assert.is_false(p.background)
  end
end

describe("external workloads", function()
  it("hold room an AI gang cannot take: no reclaim, preemption or eviction moves them", function()
    local out = H.run({
      name = "external holds room",
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("team", 16), H.queue("other", 0) },
      workloads = {
        -- priority 10 and preemptible by default: any victim search would
        -- take these first if they were AI pods
        ext("kube-system/driver", 4, { "n1", "n2" }, { priority = 10 }),
        { name = "train", queue = "team", priority = "inference", replicas = 2,
          requests = { gpu = 8 }, submit_at = 10 },
        { name = "small", queue = "team", priority = "inference", requests = { gpu = 4 }, submit_at = 10 },
      },
      horizon = 40,
    })
    -- the gang of two 8-GPU pods fits nowhere: each node has 4 GPUs left
    for _, p in ipairs(H.final_pods(out, "train")) do assert.are.equal("pending", p.state) end
    -- what does fit beside the external pods is placed there
    assert.are.same({ "bind small-0" }, ops(out))
    assert.are.equal("running", H.final_pod(out, "small-0").state)
    external_untouched(out, "kube-system/driver", { "n1", "n2" })
    assert.are.equal(0, out.summary.preemptions)
    assert.are.equal(0, out.summary.reclaims)
    assert.are.equal(2, out.summary.ai_pods_pending)
  end)

  it("would let the gang run if they were not there (the test above can fail)", function()
    local out = H.run({
      name = "no external",
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("team", 16) },
      workloads = {
        { name = "train", queue = "team", priority = "inference", replicas = 2, requests = { gpu = 8 } },
      },
      horizon = 10,
    })
    assert.are.same({ "bind train-0", "bind train-1" }, ops(out))
  end)

  it("are never evicted for an AI pod, while background pods beside them are", function()
    local out = H.run({
      name = "external beside background",
      nodes = { H.node("n1", 8) },
      queues = { H.queue("team", 8), H.bg_queue() },
      workloads = {
        ext("kube-system/agent", 2, { "n1" }),
        H.bg("burn", { controller = "deployment", replicas = 6, requests = { gpu = 1 } }),
        { name = "train", queue = "team", requests = { gpu = 6 }, submit_at = 10 },
      },
      horizon = 60,
    })
    -- burn filled the 6 GPUs the agent left, never more
    assert.are.equal(6, #H.decisions(out, function(d) return d.time == 0 and d.op == "bind" end))
    -- train needs all 6: every burn pod goes, the agent stays
    assert.are.equal(6, #H.decisions(out, function(d) return d.op == "evict" end))
    assert.are.equal("running", H.final_pod(out, "train-0").state)
    external_untouched(out, "kube-system/agent", { "n1" })
    for _, p in ipairs(H.final_pods(out, "burn")) do assert.are.equal("pending", p.state) end
  end)

  it("count in the background re-offer: background pods take only what they leave", function()
    local out = H.run({
      name = "external and re-offer",
      nodes = { H.node("n1", 8) },
      queues = { H.bg_queue() },
      workloads = {
        ext("kube-system/agent", 6, { "n1" }),
        H.bg("burn", { controller = "deployment", replicas = 4, requests = { gpu = 1 } }),
      },
      horizon = 20,
    })
    local running, pending = 0, 0
    for _, p in ipairs(H.final_pods(out, "burn")) do
      if p.state == "running" then running = running + 1 else pending = pending + 1 end
    end
    assert.are.same({ 2, 2 }, { running, pending })
    external_untouched(out, "kube-system/agent", { "n1" })
  end)

  it("hold their room while they terminate: an AI pod is pipelined behind one", function()
    local out = H.run({
      name = "external terminating",
      nodes = { H.node("n1", 8) },
      queues = { H.queue("team", 8) },
      workloads = {
        { name = "old", external = true, replicas = 1, requests = { gpu = 8 },
          pods = { { name = "old-0", node = "n1", state = "releasing", release_at = 25 } } },
        { name = "train", queue = "team", requests = { gpu = 8 } },
      },
      horizon = 40,
    })
    local d = H.decisions(out)
    assert.are.equal("pipeline", d[1].op)
    assert.are.same({ "old-0" }, d[1].waits_for)
    assert.are.equal(0, d[1].time)
    assert.are.equal("bind", d[2].op)
    assert.are.equal(30, d[2].time) -- the first cycle after old-0 released its room
  end)

  it("are never placed nor reported pending", function()
    local out = H.run({
      name = "external pending",
      nodes = { H.node("n1", 8) },
      queues = { H.queue("team", 8) },
      workloads = {
        { name = "unbound", external = true, replicas = 2, requests = { gpu = 1 },
          pods = { { name = "unbound-a", node = "n1", state = "running" } } },
      },
      horizon = 20,
    })
    assert.are.same({}, H.decisions(out))
    local states = {}
    for _, p in ipairs(H.final_pods(out, "unbound")) do states[#states + 1] = p.state end
    table.sort(states)
    assert.are.same({ "pending", "running" }, states)
    assert.are.same({}, H.events(out, function(e) return e.object == "unbound" end))
    assert.are.equal(0, out.summary.ai_pods_pending)
    assert.are.equal(0, out.cycles[#out.cycles].pools[1].pending_ai)
  end)

  it("take no queue, and a queue on one is an error naming the field", function()
    local ok, err = pcall(understory.simulate, {
      name = "bad", nodes = { H.node("n1", 8) }, queues = { H.queue("team", 8) },
      workloads = { { name = "x", external = true, queue = "team", requests = { gpu = 1 } } },
    }, {})
    assert.is_false(ok)
    assert.matches("workloads%[0%]%.queue: an external workload is in no queue", err)
    ok, err = pcall(understory.simulate, {
      name = "bad", nodes = { H.node("n1", 8) }, queues = { H.queue("team", 8) },
      workloads = { { name = "x", external = "yes", requests = { gpu = 1 } } },
    }, {})
    assert.is_false(ok)
    assert.matches("workloads%[0%]%.external: must be true or false", err)
  end)

  it("work the same in the engine object: reported pods hold room, nothing moves them", function()
    local e <close> = understory.engine({ policies = "policies", check_invariants = true })
    e:upsert_node(H.node("n1", 8))
    e:upsert_node(H.node("n2", 8))
    e:upsert_queue(H.queue("team", 16))
    e:upsert_workload({ name = "kube-system/dns", external = true, replicas = 2,
                        requests = { gpu = 4 } }, 0)
    e:upsert_pod { name = "kube-system/dns-a", workload = "kube-system/dns", node = "n1" }
    e:upsert_pod { name = "kube-system/dns-b", workload = "kube-system/dns", node = "n2" }
    e:upsert_workload({ name = "train", queue = "team", priority = "inference", replicas = 2,
                        requests = { gpu = 8 } }, 0)
    local r = e:run_cycle(0)
    assert.are.same({}, r.decisions)
    local seen = {}
    for _, p in ipairs(e:pods()) do
      seen[p.name] = p.state .. (p.node and (" " .. p.node) or "") .. (p.external and " external" or "")
    end
    assert.are.same({ ["kube-system/dns-a"] = "running n1 external",
                      ["kube-system/dns-b"] = "running n2 external",
                      ["train-0"] = "pending", ["train-1"] = "pending" }, seen)
    for _, w in ipairs(e:workloads()) do
      assert.are.equal(w.name == "kube-system/dns", w.external)
      if w.external then assert.is_nil(w.queue) end
    end
    -- no pending status for the external workload, one for train
    for _, ev in ipairs(r.events) do assert.are_not.equal("kube-system/dns", ev.object) end
  end)
end)
