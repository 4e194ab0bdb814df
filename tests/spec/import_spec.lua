-- import_spec.lua — `understory import FILE`: a `kubectl get
-- nodes,pods,namespaces,queues,podgroups,priorityclasses -A -o json` List
-- becomes a scenario document (kube/objects.c does the mapping).
--
-- The fixture tests/fixtures/kubectl-seed-story.json was captured from a
-- real control plane (tests/fixtures/README.md says how): the seed story's
-- objects (examples/kubernetes/), the burn-in and health checks bound where
-- the simulator's seed story puts them at t=0, serve-1 bound to n1, the
-- training gang still pending, and three kube-system pods of the default
-- scheduler (one running, one terminating, one unbound).
local H = require "tests.spec.helper"
local understory = H.understory

local FIXTURE = "tests/fixtures/kubectl-seed-story.json"

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run `understory import path [args]`: the decoded document (or nil), the
-- stderr text and the exit status.
local function import(path, args)
  local err = os.tmpname()
  local p = assert(io.popen(sh_quote(os.getenv("UNDERSTORY")) .. " import " .. sh_quote(path) ..
                            " " .. (args or "") .. " 2>" .. sh_quote(err)))
  local out = p:read("a")
  local _, _, status = p:close()
  local f = assert(io.open(err, "rb"))
  local e = f:read("a")
  f:close()
  os.remove(err)
  return status == 0 and understory.json_decode(out) or nil, e, status, out
end

-- import a List given as a Lua table
local function import_list(items, args)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(type(items) == "string" and items or understory.json_encode({ apiVersion = "v1", kind = "List", items = items }))
  f:close()
  local doc, err, status, text = import(path, args)
  os.remove(path)
  return doc, err, status, text
end

local function by_name(list)
  local t = {}
  for _, x in ipairs(list) do t[x.name] = x end
  return t
end

local function count_nodes(pods)
  local c = {}
  for _, p in ipairs(pods or {}) do c[p.node] = (c[p.node] or 0) + 1 end
  return c
end

describe("understory import", function()
  local doc, _, _, text = import(FIXTURE)

  it("maps the captured nodes: allocatable, labels, readiness, pool", function()
    assert.is_table(doc)
    local nodes = by_name(doc.nodes)
    for _, n in ipairs({ "n1", "n2", "n3", "n4" }) do
      local x = nodes[n]
      assert.are.same({ name = n, pool = "default", cpu = "64000m", memory = "549755813888", gpu = 8,
                        labels = { ["kubernetes.io/hostname"] = n, type = "kwok",
                                   zone = (n == "n1" or n == "n2") and "a" or "b" },
                        unschedulable = false, taints = x.taints }, x)
      -- as captured: the node lifecycle controller had marked n2
      -- unreachable for a moment (pods tolerate that for 300 s by default)
      assert.are.same(n == "n2" and { { key = "node.kubernetes.io/unreachable", effect = "NoExecute" } } or {},
                      x.taints)
    end
    assert.are.equal(4, #doc.nodes)
  end)

  it("maps KAI queues in KAI's units", function()
    local q = by_name(doc.queues)
    assert.are.same({ "infra-bg", "research", "team-a", "team-b" },
                    { doc.queues[1].name, doc.queues[2].name, doc.queues[3].name, doc.queues[4].name })
    assert.are.same({ quota = 16, over_quota_weight = 2, limit = -1 }, q["team-a"].resources.gpu)
    assert.are.equal("research", q["team-a"].parent)
    assert.is_nil(q.research.parent)
    assert.are.equal(0, q.research.priority)
    assert.are.same({ quota = "0m", over_quota_weight = 0, limit = -1 }, q["infra-bg"].resources.cpu)
    assert.are.same({ quota = "0", over_quota_weight = 0, limit = -1 }, q["infra-bg"].resources.memory)
  end)

  it("groups pods into workloads with their queue, priority, controller and requests", function()
    local w = by_name(doc.workloads)
    local burn = w["infra/gpu-burn"]       -- ReplicaSet -> Deployment by pod-template-hash
    assert.are.equal("infra-bg", burn.queue) -- the namespace's kai.scheduler/queue label
    assert.are.equal("deployment", burn.controller)
    assert.are.equal(28, burn.replicas)
    assert.are.equal(1, burn.min_member)
    assert.are.same({ ["kai.scheduler/background"] = "true" }, burn.labels)
    assert.are.equal(5, burn.termination_grace)
    assert.are.same({ gpu = 1, cpu = "2000m", memory = tostring(8 * 2 ^ 30):gsub("%.0$", "") }, burn.requests)
    assert.are.same({ n1 = 7, n2 = 8, n3 = 8, n4 = 5 }, count_nodes(burn.pods))
    for _, p in ipairs(burn.pods) do
      assert.are.equal("running", p.state)
      assert.matches("^infra/gpu%-burn%-", p.name)
    end

    local check = w["infra/node-check"]
    assert.are.equal("daemonset", check.controller)
    assert.is_nil(check.replicas)
    assert.are.same({ gpu = 0, cpu = "100m", memory = "67108864" }, check.requests)
    assert.are.same({ n1 = 1, n2 = 1, n3 = 1, n4 = 1 }, count_nodes(check.pods))

    local serve = w["team-a/serve-1"]      -- a pod alone
    assert.are.equal("team-a", serve.queue)
    assert.are.equal(125, serve.priority)  -- spec.priority, from class inference
    assert.are.equal("none", serve.controller)
    assert.are.same({ { name = "team-a/serve-1", node = "n1", state = "running" } }, serve.pods)

    local train = w["team-a/train-1"]      -- a PodGroup
    assert.are.equal("team-a", train.queue)
    assert.are.equal(50, train.priority)
    assert.are.equal("job", train.controller)
    assert.are.same({ 2, 2 }, { train.replicas, train.min_member })
    assert.are.same({ gpu = 8, cpu = "32000m", memory = "274877906944" }, train.requests)
    assert.are.same({}, train.pods)
  end)

  it("makes pods of other schedulers external workloads, in their state", function()
    local w = by_name(doc.workloads)
    local drv = w["kube-system/gpu-driver-n1"]
    assert.is_true(drv.external)
    assert.is_nil(drv.queue)
    assert.are.same({ { name = "kube-system/gpu-driver-n1", node = "n1", state = "running" } }, drv.pods)
    assert.are.same({ gpu = 0, cpu = "200m", memory = "134217728" }, drv.requests)
    local old = w["kube-system/old-agent-n2"] -- deletionTimestamp set: releasing
    assert.is_true(old.external)
    assert.are.equal(0, old.replicas)
    assert.are.same({ { name = "kube-system/old-agent-n2", node = "n2", state = "releasing" } }, old.pods)
    assert.are.equal(15, old.termination_grace)
    local waiting = w["kube-system/waiting"]  -- unbound: waits for its own scheduler
    assert.is_true(waiting.external)
    assert.are.same({ 1, 0 }, { waiting.replicas, #waiting.pods })
    assert.are.equal(7, #doc.workloads)
  end)

  it("gives a document the simulator runs to the seed story's outcome", function()
    local out = H.run(text) -- the text: empty arrays stay arrays
    local final = {}
    for _, p in ipairs(out.final.pods) do
      if p.state ~= "releasing" then
        final[p.workload] = final[p.workload] or {}
        table.insert(final[p.workload], p)
      end
    end
    -- training: pipelined at t=0 behind evicted burn-in pods, bound at t=10,
    -- two pods on two whole nodes that are not serve-1's
    local places = H.decisions(out, function(d) return d.pod:match("^team%-a/train%-1") end)
    assert.are.same({ "pipeline", "pipeline", "bind", "bind" },
                    { places[1].op, places[2].op, places[3].op, places[4].op })
    assert.are.same({ 0, 0, 10, 10 }, { places[1].time, places[2].time, places[3].time, places[4].time })
    assert.are_not.equal(places[1].node, places[2].node)
    for _, d in ipairs(places) do assert.are_not.equal("n1", d.node) end
    -- only burn-in pods are evicted, for training, as background pods
    for _, d in ipairs(H.decisions(out, function(d) return d.op == "evict" end)) do
      assert.matches("^infra/gpu%-burn%-", d.pod)
      assert.are.same({ "backgroundpods", "team-a/train-1" }, { d.action, d.evictor })
    end
    -- what the seed story itself ends with once training runs (t=50)
    local seed = understory.json_decode(H.read("examples/seed-story.json"))
    seed.horizon = 50
    local ref = H.run(seed)
    local function running(o, wl)
      local n = 0
      for _, p in ipairs(o.final.pods) do
        if p.workload == wl and p.state == "running" then n = n + 1 end
      end
      return n
    end
    assert.are.same({ running(ref, "gpu-burn"), running(ref, "node-check"), running(ref, "train-1"),
                      running(ref, "serve-1") },
                    { running(out, "infra/gpu-burn"), running(out, "infra/node-check"),
                      running(out, "team-a/train-1"), running(out, "team-a/serve-1") })
    assert.are.equal(15, running(out, "infra/gpu-burn"))
    -- as many burn-in pods evicted as in the seed story: the fewest that
    -- free two whole nodes (the captured layout has 8 on n2 and 5 on n4)
    assert.are.equal(ref.summary.background_evictions, out.summary.background_evictions)
    assert.are.equal(13, out.summary.background_evictions)
    assert.are.equal("n1", final["team-a/serve-1"][1].node)
    -- the external pods: untouched where they ran; the unbound one never placed
    assert.are.same({ "n1", "running", true },
                    { final["kube-system/gpu-driver-n1"][1].node, final["kube-system/gpu-driver-n1"][1].state,
                      final["kube-system/gpu-driver-n1"][1].external })
    assert.are.equal("pending", final["kube-system/waiting"][1].state)
  end)

  it("is deterministic: the same List gives the same bytes", function()
    local _, _, _, a = import(FIXTURE)
    local _, _, _, b = import(FIXTURE)
    assert.are.equal(a, b)
  end)
end)

-- Small Lists, one rule each.
local function node(name, extra)
  local n = { apiVersion = "v1", kind = "Node", metadata = { name = name, labels = {} },
              status = { allocatable = { cpu = "8", memory = "32Gi", ["nvidia.com/gpu"] = "4", pods = "110" },
                         conditions = { { type = "Ready", status = "True" } } } }
  for k, v in pairs(extra or {}) do n[k] = v end
  return n
end
local function ns(name, queue)
  return { apiVersion = "v1", kind = "Namespace",
           metadata = { name = name, labels = queue and { ["kai.scheduler/queue"] = queue } or nil } }
end
local function queue(name, spec)
  return { apiVersion = "scheduling.run.ai/v2", kind = "Queue", metadata = { name = name }, spec = spec or {} }
end
local function pod(nsname, name, spec, md)
  local p = { apiVersion = "v1", kind = "Pod", metadata = { name = name, namespace = nsname },
              spec = { schedulerName = "understory",
                       containers = { { name = "c", resources = { requests = { cpu = "1" } } } } },
              status = { phase = "Pending" } }
  for k, v in pairs(spec or {}) do p.spec[k] = v end
  for k, v in pairs(md or {}) do p.metadata[k] = v end
  return p
end
local function workload(doc, name)
  for _, w in ipairs(doc.workloads) do if w.name == name then return w end end
end

describe("the Kubernetes object mapping", function()
  it("computes effective requests: containers, init containers, sidecars, overhead", function()
    local doc, err = import_list({ node("n1"), ns("t", "q"), queue("q"),
      pod("t", "p", {
        containers = { { name = "a", resources = { requests = { cpu = "1", memory = "1Gi" } } },
                       { name = "b", resources = { requests = { cpu = "500m", ["nvidia.com/gpu"] = "1" } } } },
        initContainers = { { name = "big", resources = { requests = { cpu = "3", memory = "512Mi" } } },
                           { name = "side", restartPolicy = "Always", resources = { requests = { memory = "1Gi" } } } },
        overhead = { cpu = "250m" } }) })
    assert.is_table(doc, err)
    -- cpu max(1.5, 3) + 0.25; memory 1Gi + 1Gi sidecar (> 512Mi init); gpu 1
    assert.are.same({ gpu = 1, cpu = "3250m", memory = tostring(2 * 2 ^ 30):gsub("%.0$", "") },
                    workload(doc, "t/p").requests)
  end)

  it("reads the queue from the pod, else its PodGroup, else its namespace", function()
    local pg = { apiVersion = "scheduling.run.ai/v2alpha2", kind = "PodGroup",
                 metadata = { name = "g", namespace = "t" }, spec = { minMember = 1, queue = "from-pg" } }
    local doc, err = import_list({ node("n1"), ns("t", "from-ns"), queue("from-ns"), queue("from-pg"),
      queue("from-pod"), pg,
      pod("t", "a", nil, { labels = { ["kai.scheduler/queue"] = "from-pod" } }),
      pod("t", "b", nil, { annotations = { ["pod-group-name"] = "g" } }),
      pod("t", "c") })
    assert.is_table(doc, err)
    assert.are.same({ "from-pod", "from-pg", "from-ns" },
                    { workload(doc, "t/a").queue, workload(doc, "t/g").queue, workload(doc, "t/c").queue })
  end)

  it("maps node selectors, DaemonSet pins, tolerations, fractions and taints", function()
    local doc, err = import_list({
      node("n1", { spec = { taints = { { key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" } } },
                   metadata = { name = "n1", labels = { ["kai.scheduler/node-pool"] = "gpu" } } }),
      node("n2", { spec = { unschedulable = true } }),
      node("n3", { status = { allocatable = { cpu = "8", memory = "32Gi" },
                              conditions = { { type = "Ready", status = "False" } } } }),
      ns("t", "q"), queue("q"),
      pod("t", "sel", { nodeSelector = { zone = "a" },
        affinity = { nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = {
          { matchExpressions = { { key = "disk", operator = "In", values = { "ssd" } } } } } } } },
        tolerations = { { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule", tolerationSeconds = 5 } } }),
      pod("t", "frac", nil, { annotations = { ["gpu-fraction"] = "0.5" } }),
    })
    assert.is_table(doc, err)
    local n = by_name(doc.nodes)
    assert.are.same({ "gpu", false, { { key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" } } },
                    { n.n1.pool, n.n1.unschedulable, n.n1.taints })
    assert.is_true(n.n2.unschedulable) -- cordoned
    assert.is_true(n.n3.unschedulable) -- not Ready
    assert.are.equal(0, n.n3.gpu)
    local sel = workload(doc, "t/sel")
    assert.are.same({ zone = "a", disk = "ssd" }, sel.node_selector)
    assert.are.same({ { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" } }, sel.tolerations)
    assert.are.equal(0.5, workload(doc, "t/frac").requests.gpu)
  end)

  it("keeps KAI labels as they are, skips finished pods, reads a PodGroup's class and preemptibility", function()
    local pg = { apiVersion = "scheduling.run.ai/v2alpha2", kind = "PodGroup",
                 metadata = { name = "g", namespace = "t", labels = { ["kai.scheduler/background"] = "True", app = "x" } },
                 spec = { minMember = 3, priorityClassName = "build", preemptibility = "semi-preemptible" } }
    local pc = { apiVersion = "scheduling.k8s.io/v1", kind = "PriorityClass", metadata = { name = "build" }, value = 100 }
    local doc, err = import_list({ node("n1"), ns("t", "q"), queue("q"), pg, pc,
      pod("t", "a", nil, { annotations = { ["pod-group-name"] = "g" },
                           ownerReferences = { { kind = "StatefulSet", name = "s", controller = true } } }) })
    assert.is_table(doc, err)
    local w = workload(doc, "t/g")
    -- the typo is kept, so the engine's Warning names it
    assert.are.same({ ["kai.scheduler/background"] = "True" }, w.labels)
    assert.are.same({ 100, "semi-preemptible", "deployment", 3, 3 },
                    { w.priority, w.preemptibility, w.controller, w.replicas, w.min_member })
    -- finished: no room held, no workload (100 cores would not fit n1)
    local finished = pod("t", "done", { nodeName = "n1",
      containers = { { name = "c", resources = { requests = { cpu = "100" } } } } })
    finished.status.phase = "Succeeded"
    doc, err = import_list({ node("n1"), ns("t", "q"), queue("q"), finished })
    assert.is_table(doc, err)
    assert.are.same({}, doc.workloads)
  end)

  it("orders jobs of equal priority by creation time, as KAI does", function()
    -- room for one 4-GPU pod; "b-old" was created first and gets it,
    -- though "a-new" comes first by name
    local function timed(name, ts)
      return pod("t", name, { containers = { { name = "c", resources = { requests = { ["nvidia.com/gpu"] = "4" } } } } },
                 { creationTimestamp = ts })
    end
    local doc, err, _, text = import_list({ node("n1"), ns("t", "q"), queue("q"),
      timed("a-new", "2026-12-01T03:00:00Z"), timed("b-old", "2026-12-01T00:59:58.5+02:00") })
    assert.is_table(doc, err)
    -- 00:59:58.5 at +02:00 is 22:59:58.5Z the day before: 4 h 1.5 s earlier
    assert.are.same({ 0, -14401.5 }, { workload(doc, "t/a-new").created_at, workload(doc, "t/b-old").created_at })
    local out = H.run(text)
    assert.are.same({ "bind t/b-old-0 n1" }, (function()
      local l = {}
      for _, d in ipairs(H.decisions(out)) do l[#l + 1] = d.op .. " " .. d.pod .. " " .. d.node end
      return l
    end)())
    local _, err2, status = import_list({ node("n1"), ns("t", "q"), queue("q"), timed("x", "yesterday") })
    assert.are.equal(2, status)
    assert.truthy(err2:find('items[3].metadata.creationTimestamp (Pod "t/x"): "yesterday" is not an RFC 3339 time', 1, true), err2)
  end)

  it("gives pods of another scheduler name their own scheduler (--scheduler-name)", function()
    local list = { node("n1"), ns("t", "q"), queue("q"), pod("t", "a", { schedulerName = "kai-scheduler" }) }
    local doc = import_list(list)
    assert.is_true(workload(doc, "t/a").external)
    doc = import_list(list, "--scheduler-name kai-scheduler")
    assert.is_nil(workload(doc, "t/a").external)
    assert.are.equal("q", workload(doc, "t/a").queue)
  end)

  -- each: the List, then what the message must say
  local bad = {
    { '{"kind": "PodList"', "not JSON" },
    { understory.json_encode({ kind = "Pod", items = {} }), 'kind: must be "List"' },
    { { node("n1"), { kind = "Node", metadata = { labels = {} }, status = { allocatable = {} } } },
      "items[1].metadata.name (Node): required field is missing" },
    { { node("n1", { status = { allocatable = { cpu = "8", memory = "lots" } } }) },
      'items[0].status.allocatable["memory"] (Node "n1"): "lots" is not a memory quantity' },
    { { node("n1"), ns("t", "q"), queue("q"),
        pod("t", "p", { containers = { { name = "c", resources = { requests = { cpu = "1x" } } } } }) },
      'items[3].spec.containers[0].resources.requests["cpu"] (Pod "t/p"): "1x" is not a cpu quantity' },
    { { node("n1"), ns("t", "q"), queue("q"),
        pod("t", "p", { containers = { { name = "c", resources = { requests = { ["amd.com/gpu"] = "1" } } } } }) },
      'resource "amd.com/gpu" cannot be mapped' },
    { { node("n1"), ns("t"), pod("t", "p") }, 'items[2].metadata.labels (Pod "t/p"): no queue' },
    { { node("n1"), ns("t", "q"), queue("q"), pod("t", "p", nil, { annotations = { ["pod-group-name"] = "g" } }) },
      'PodGroup "t/g" is not in the input' },
    { { node("n1"), ns("t", "q"), queue("q"),
        pod("t", "p", { affinity = { podAntiAffinity = { requiredDuringSchedulingIgnoredDuringExecution = {} } } }) },
      "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution (Pod \"t/p\"): cannot be mapped" },
    { { node("n1"), ns("t", "q"), queue("q"), pod("t", "p", { nodeName = "n9" }) },
      'items[3].spec.nodeName (Pod "t/p"): node "n9" is not in the input' },
    { { queue("q", { resources = { memory = { quota = -5 } } }) },
      'items[0].spec.resources.memory.quota (Queue "q"): -5 is out of range' },
    { { node("n1"), ns("t", "q"), queue("q"),
        pod("t", "a", nil, { ownerReferences = { { kind = "Job", name = "j", controller = true } } }),
        pod("t", "b", { containers = { { name = "c", resources = { requests = { cpu = "2" } } } } },
            { ownerReferences = { { kind = "Job", name = "j", controller = true } } }) },
      'items[4] (Pod "t/b"): differs from pod "t/a" (items[3]) in requests' },
    { { { kind = "Deployment", metadata = { name = "d" } } }, 'items[0].kind: "Deployment" is not a kind' },
    -- a Deployment "web" and a lone pod "web" would both be workload t/web
    { { node("n1"), ns("t", "q"), queue("q"),
        pod("t", "web-5d8f-x", nil, { labels = { ["pod-template-hash"] = "5d8f" },
                                      ownerReferences = { { kind = "ReplicaSet", name = "web-5d8f", controller = true } } }),
        pod("t", "aaa", nil, { ownerReferences = { { kind = "Job", name = "j", controller = true } } }),
        pod("t", "web") },
      'forms workload "t/web", and so does pod "t/web-5d8f-x" (items[3]) of another owner' },
    { { node("n1"), queue("q", { priority = "high" }) }, 'items[1].spec.priority (Queue "q"): must be a whole number' },
    -- priorities are Kubernetes' int32: nothing wider or fractional reaches the engine
    -- (a fuzz finding: 6.7e86 was converted to int, undefined behaviour)
    { { node("n1"), ns("t", "q"), queue("q"), pod("t", "p", { priority = 6.7e86 }) },
      'items[3].spec.priority (Pod "t/p"): must be a whole number within int32' },
    { { node("n1"), ns("t", "q"), queue("q"), pod("t", "p", { priority = 50.5 }) },
      'items[3].spec.priority (Pod "t/p"): must be a whole number within int32' },
    { { node("n1"), ns("t", "q"), queue("q"),
        { apiVersion = "scheduling.k8s.io/v1", kind = "PriorityClass", metadata = { name = "huge" }, value = 3e9 },
        pod("t", "p", { priorityClassName = "huge" }) },
      'priority class "huge" has no value that is a whole number within int32' },
  }
  for i, case in ipairs(bad) do
    it("refuses bad input " .. i .. " with exit 2 and the JSON path: " .. case[2], function()
      local doc, err, status = import_list(case[1])
      assert.is_nil(doc)
      assert.are.equal(2, status)
      assert.truthy(err:find(case[2], 1, true), err)
    end)
  end
end)
