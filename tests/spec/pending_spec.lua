-- pending_spec.lua — a pending pod's report says what really blocks it, and
-- a background label that is not exactly "true" is named in a Warning and
-- never turns background work into AI work.
local H = require "tests.spec.helper"

local function rng(seed)
  local s = seed
  return function(lo, hi)
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + s % (hi - lo + 1)
  end
end

-- The last pending report of workload w, or nil.
local function report(out, w)
  local last
  for _, e in ipairs(H.events(out, function(e) return e.object == w end)) do
    if e.reason == "Unschedulable" or e.reason == "NotScheduled" or
       e.reason == "WaitingForIdleResources" then
      last = e
    end
  end
  return last
end

local function matches(labels, selector)
  for k, v in pairs(selector or {}) do
    if (labels or {})[k] ~= v then return false end
  end
  return true
end

-- Pods of w that fit on node n when it is empty.
local function pods_on_empty(n, w)
  local k = math.huge
  local g = w.requests.gpu or 0
  if g > 0 and g < 1 then k = n.gpu * math.floor(1 / g)
  elseif g >= 1 then k = n.gpu // g end
  return math.min(k, n.cpu_cores // w.cpu_cores)
end

-- What can never place a gang of w (all its pods pending: min_member of
-- them at once), computed from the scenario alone.
local function expected_blocker(sc, w)
  local pool = w.pool or "default"
  local need = w.min_member or 1
  local in_pool, matching, tolerated, large, room_all, room_open = 0, 0, 0, 0, 0, 0
  for _, n in ipairs(sc.nodes) do
    if (n.pool or "default") == pool then
      in_pool = in_pool + 1
      if matches(n.labels, w.node_selector) then
        matching = matching + 1
      end
      if matches(n.labels, w.node_selector) and (not n.taints or w.tolerations) then
        tolerated = tolerated + 1
        local g = w.requests.gpu or 0
        local gpu_ok = (g == 0) or (g < 1 and n.gpu >= 1) or (g >= 1 and g <= n.gpu)
        if gpu_ok and w.cpu_cores <= n.cpu_cores then
          large = large + 1
          room_all = room_all + pods_on_empty(n, w)
          if not n.unschedulable then room_open = room_open + pods_on_empty(n, w) end
        end
      end
    end
  end
  if in_pool == 0 then return "no-node-in-pool" end
  if matching == 0 then return "node-selector" end
  if tolerated == 0 then return "untolerated-taint" end
  if large == 0 then return "request-too-large" end
  if room_all < need then return "gang-too-large" end
  if room_open < need then return "cordoned" end
  return nil
end

describe("a pending pod's report", function()

  it("names a selector that matches no node, a request larger than any node, a cordon", function()
    local out = H.run({
      name = "blockers", horizon = 0,
      nodes = { H.node("n1", 8, { labels = { zone = "a" } }),
                H.node("n2", 8, { labels = { zone = "b" }, unschedulable = true }),
                H.node("n3", 8, { labels = { zone = "t" },
                                  taints = { { key = "dedicated", value = "infer", effect = "NoSchedule" } } }) },
      queues = { H.queue("q", 24) },
      workloads = {
        { name = "sel", queue = "q", node_selector = { zone = "c" }, requests = { gpu = 1 } },
        { name = "big", queue = "q", requests = { gpu = 16 } },
        { name = "cord", queue = "q", node_selector = { zone = "b" }, requests = { gpu = 1 } },
        { name = "hog", queue = "q", priority = "inference", requests = { gpu = 8 } },
        { name = "busy", queue = "q", requests = { gpu = 8 } },
        { name = "gang", queue = "q", replicas = 3, min_member = 3, requests = { gpu = 8 } },
        { name = "tainted", queue = "q", node_selector = { zone = "t" }, requests = { gpu = 1 } },
      },
    })
    local tainted = report(out, "tainted")
    assert.are.equal("untolerated-taint", tainted.annotations["pending-reason"])
    assert.matches('has a taint the pod does not tolerate %("n3": dedicated=infer:NoSchedule%)', tainted.message)
    local sel, big, cord, busy = report(out, "sel"), report(out, "big"), report(out, "cord"), report(out, "busy")
    assert.are.equal("node-selector", sel.annotations["pending-reason"])
    assert.matches('no node of pool "default" matches the node selector %(zone=c%)', sel.message)
    assert.are.equal("request-too-large", big.annotations["pending-reason"])
    assert.matches("asks 16 GPU, the largest has 8 GPU", big.message)
    assert.are.equal("cordoned", cord.annotations["pending-reason"])
    -- n1 alone is open: it holds one of the gang's pods, n2 (cordoned) one more
    local gang = report(out, "gang")
    assert.are.equal("gang-too-large", gang.annotations["pending-reason"])
    assert.matches("the gang needs 3 pods at once, and the nodes of pool \"default\" hold at most 2", gang.message)
    -- room, not a static cause: the old wording stays for it
    assert.are.equal("resources", busy.annotations["pending-reason"])
    assert.matches("not enough free resources for the pod", busy.message)
    for _, e in ipairs({ sel, big, cord }) do
      assert.is_nil(e.message:match("not enough free resources"))
    end
  end)

  it("of background work blocked for good is a Warning, not the normal waiting report", function()
    local out = H.run({
      name = "background blockers", horizon = 0,
      nodes = { H.node("n1", 8, { labels = { zone = "a" } }), H.node("n2", 8) },
      queues = { H.bg_queue() },
      workloads = {
        -- a daemonset pod on each node, each larger than its node
        H.bg("fat-agent", { controller = "daemonset", requests = { cpu = "65" } }),
        H.bg("lost", { node_selector = { zone = "z" }, requests = { gpu = 1 } }),
        H.bg("idle", { requests = { gpu = 1 } }),
      },
    })
    local fat, lost = report(out, "fat-agent"), report(out, "lost")
    assert.are.equal("Warning", fat.type)
    assert.are.equal("NotScheduled", fat.reason)
    assert.are.equal("request-too-large", fat.annotations["pending-reason"])
    assert.matches("2 pod%(s%) pending: the pod's request is larger than its node holds %(\"n%d\": it asks 65 CPU cores, the node has 64 CPU cores%)", fat.message)
    assert.are.equal("NotScheduled", lost.reason)
    assert.are.equal("node-selector", lost.annotations["pending-reason"])
    -- what runs is not touched: the one that fits runs
    assert.are.equal("running", H.final_pods(out, "idle")[1].state)
  end)

  -- On random clusters (pools, zone labels, sizes, cordons) every pending
  -- AI workload's report names a static cause exactly when one exists.
  it("names a static cause exactly when the cluster's nodes give one", function()
    for seed = 1, 60 do
      local r = rng(seed)
      local zones, pools = { "a", "b", "c" }, { "default", "default", "p2" }
      local sc = { name = "random blockers " .. seed, horizon = 0, nodes = {}, workloads = {},
                   queues = { H.queue("q", 64) } }
      for i = 1, r(0, 5) do
        local n = { name = "n" .. i, gpu = r(0, 8), cpu_cores = r(1, 16), memory = "64Gi",
                    pool = pools[r(1, 3)], labels = { zone = zones[r(1, 3)] },
                    unschedulable = r(1, 4) == 1 }
        n.cpu = tostring(n.cpu_cores)
        if r(1, 4) == 1 then n.taints = { { key = "gpu", effect = "NoSchedule" } } end
        sc.nodes[i] = n
      end
      for i = 1, r(1, 6) do
        local g = ({ 0, 0.5, 1, 4, 8, 12 })[r(1, 6)]
        local w = { name = "w" .. i, queue = "q", pool = pools[r(1, 3)], cpu_cores = r(1, 20),
                    requests = { gpu = g }, replicas = r(1, 3) }
        w.min_member = w.replicas
        w.requests.cpu = tostring(w.cpu_cores)
        if r(1, 2) == 1 then w.node_selector = { zone = zones[r(1, 3)] } end
        if r(1, 3) == 1 then w.tolerations = { { key = "gpu", operator = "Exists" } } end
        sc.workloads[i] = w
      end
      -- the loader is strict: strip the helper fields before loading
      local function strip(list)
        local copy = {}
        for i, o in ipairs(list) do
          copy[i] = {}
          for k, v in pairs(o) do
            if k ~= "cpu_cores" then copy[i][k] = v end
          end
        end
        return #copy > 0 and copy or nil
      end
      local out = H.run({ name = sc.name, horizon = 0, queues = sc.queues,
                          nodes = strip(sc.nodes), workloads = strip(sc.workloads) })
      for _, w in ipairs(sc.workloads) do
        local want = expected_blocker(sc, w)
        local got = report(out, w.name)
        if want then
          assert.is_not_nil(got, "seed " .. seed .. ": " .. w.name .. " has no report")
          assert.are.equal(want, got.annotations["pending-reason"], "seed " .. seed .. ": " .. w.name)
        elseif got then
          local code = got.annotations["pending-reason"]
          assert.is_true(code == "resources" or code == "queue-limit" or code == "quota",
            "seed " .. seed .. ": " .. w.name .. " reported " .. tostring(code))
        end
      end
    end
  end)
end)

describe("the background label", function()

  local function labelled(value)
    return {
      name = "label " .. value, cycle_interval = 10, horizon = 30,
      nodes = { H.node("n1", 8) },
      queues = { H.queue("team", 8), H.bg_queue() },
      workloads = {
        { name = "serve", queue = "team", replicas = 4, min_member = 1, requests = { gpu = 1 } },
        H.bg("burn", { labels = { ["kai.scheduler/background"] = value },
                       replicas = 8, min_member = 1, requests = { gpu = 1 }, submit_at = 10 }),
      },
    }
  end

  it("other than \"true\" or \"false\" is named in a Warning, and the workload never runs", function()
    for _, value in ipairs({ "True", "TRUE", "yes", "1", "", " true" }) do
      local out = H.run(labelled(value))
      local warn = H.events(out, function(e) return e.object == "burn" and e.type == "Warning" end)
      assert.are.equal(1, #warn, "value " .. value)
      assert.are.equal("NotScheduled", warn[1].reason)
      assert.are.equal(value, warn[1].annotations.value)
      assert.matches('is "' .. value:gsub("%p", "%%%0") .. '", not "true"', warn[1].message)
      for _, p in ipairs(H.final_pods(out, "burn")) do
        assert.are.equal("pending", p.state, "value " .. value)
      end
      -- what it did instead: the AI team kept its pods, nothing was evicted
      assert.are.equal(0, #H.decisions(out, function(d) return d.op == "evict" end))
      assert.are.equal(4, #H.final_pods(out, "serve"))
    end
  end)

  it("\"false\" is named in a Warning and the workload is AI work", function()
    local sc = labelled("false")
    sc.workloads[2].queue = "team"
    local out = H.run(sc)
    local warn = H.events(out, function(e) return e.object == "burn" and e.type == "Warning" end)
    assert.are.equal("BackgroundLabel", warn[1].reason)
    assert.matches("the workload is AI work", warn[1].message)
    local running = 0
    for _, p in ipairs(H.final_pods(out, "burn")) do
      assert.is_false(p.background)
      if p.state == "running" then running = running + 1 end
    end
    assert.are.equal(4, running)
  end)

  it("\"true\" draws no label Warning", function()
    local out = H.run(labelled("true"))
    assert.are.equal(0, #H.events(out, function(e) return e.object == "burn" and e.type == "Warning" end))
  end)
end)
