-- taints_spec.lua — node taints and workload tolerations from Lua: the
-- engine object and the simulator take them in the scenario format's
-- shape (Kubernetes'), place pods only on nodes whose NoSchedule and
-- NoExecute taints they tolerate, and name the field of a bad one.
local H = require "tests.spec.helper"
local understory = H.understory

local gpu_taint = { key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" }

local function nodes_of(decisions, workload)
  local set = {}
  for _, d in ipairs(decisions) do
    if d.workload == workload and d.op == "bind" then set[d.node] = (set[d.node] or 0) + 1 end
  end
  return set
end

describe("taints and tolerations", function()
  it("keep pods that do not tolerate a node off it, in the engine object", function()
    local e <close> = understory.engine({ policies = "policies" })
    e:upsert_node(H.node("gpu-a", 8, { taints = { gpu_taint } }))
    e:upsert_node(H.node("gpu-b", 8, { taints = { gpu_taint, { key = "spot", effect = "PreferNoSchedule" } } }))
    e:upsert_node(H.node("cpu", 8))
    e:upsert_queue(H.queue("team", 24))
    e:upsert_workload({ name = "train", queue = "team", replicas = 2, requests = { gpu = 8 },
                        tolerations = { { key = "nvidia.com/gpu", operator = "Exists" } } }, 0)
    e:upsert_workload({ name = "plain", queue = "team", replicas = 2, requests = { gpu = 1 } }, 0)
    local r = e:run_cycle(0)
    -- the two tainted nodes take the tolerating gang; PreferNoSchedule does not block
    assert.are.same({ ["gpu-a"] = 1, ["gpu-b"] = 1 }, nodes_of(r.decisions, "train"))
    -- the plain pods tolerate neither GPU node: both went to cpu
    assert.are.same({ cpu = 2 }, nodes_of(r.decisions, "plain"))
  end)

  it("leave a pod that tolerates no node pending, with an Unschedulable event", function()
    local e <close> = understory.engine({ policies = "policies" })
    e:upsert_node(H.node("gpu-a", 8, { taints = { gpu_taint } }))
    e:upsert_queue(H.queue("team", 8))
    e:upsert_workload({ name = "w", queue = "team", requests = { gpu = 1 },
                        tolerations = { { key = "nvidia.com/gpu", value = "absent" } } }, 0)
    local r = e:run_cycle(0)
    assert.are.same({}, r.decisions)
    assert.are.equal("pending", e:pods()[1].state)
    local ev = r.events[1]
    assert.are.equal("Unschedulable", ev.reason)
    assert.are.equal("w", ev.object)
    -- it says what keeps the pod off, not that room is short
    assert.are.equal('1 pod(s) pending: every node of pool "default" has a taint the pod does not '
                     .. 'tolerate ("gpu-a": nvidia.com/gpu=present:NoSchedule)', ev.message)
    assert.are.equal("untolerated-taint", ev.annotations["pending-reason"])
  end)

  it("hold in the simulator's scenario documents", function()
    local out = H.run({
      name = "taints",
      nodes = { H.node("gpu-a", 8, { taints = { gpu_taint } }), H.node("z-cpu", 8) },
      queues = { H.queue("team", 16) },
      workloads = {
        { name = "a-gpu", queue = "team", requests = { gpu = 4 },
          tolerations = { { operator = "Exists" } } },
        { name = "b-any", queue = "team", replicas = 2, requests = { gpu = 4 } },
        { name = "c-any", queue = "team", requests = { gpu = 4 } },
      },
    })
    local binds = {}
    for _, d in ipairs(H.decisions(out, function(d) return d.op == "bind" end)) do
      local w = d.pod:gsub("%-%d+$", "") -- the simulator's decisions name pods <workload>-<i>
      binds[w] = binds[w] or {}
      binds[w][d.node] = (binds[w][d.node] or 0) + 1
    end
    assert.are.same({ ["gpu-a"] = 1 }, binds["a-gpu"])
    assert.are.same({ ["z-cpu"] = 2 }, binds["b-any"])
    -- four GPUs stay free on gpu-a, but c-any does not tolerate it
    assert.is_nil(binds["c-any"])
    assert.are.equal("pending", H.final_pod(out, "c-any-0").state)
  end)

  it("name the field of a bad one", function()
    local e <close> = understory.engine()
    local ok, err = pcall(e.upsert_node, e, H.node("n", 8, { taints = { { key = "k", effect = "Never" } } }))
    assert.is_false(ok)
    -- JSON paths count from 0, as in scenario documents
    assert.matches('node.taints[0].effect: "Never" is not NoSchedule, PreferNoSchedule or NoExecute',
                   tostring(err), nil, true)
    assert.are.same({}, e:nodes())
  end)
end)
