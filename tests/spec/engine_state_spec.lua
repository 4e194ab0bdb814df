-- engine_state_spec.lua — what the Lua engine object reads of the engine
-- beside its lists: the state as a scenario (e:state_json), GPU use now
-- (e:gpu_use), why workloads wait (workloads()[i].pending_reason), the
-- last cycle's phases (e:cycle_phases), cycles run (e:cycle_count), log
-- lines left out (run_cycle's log_dropped) and the full_cycles option.
-- The seed story is driven through the engine the way the simulator runs
-- it (tests/embed/drive.lua) and each figure is checked against what the
-- command line reports for the same scenario at the same cycle.
local H = require "tests.spec.helper"
local understory = H.understory
local system = require "system" -- luasystem, busted's own dependency: a wall clock

local drive = dofile("tests/embed/drive.lua")
local SEED = "examples/seed-story.json"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The command line's output document for path (the binary the suite runs,
-- else ./understory).
local function cli_output(path)
  local bin = os.getenv("UNDERSTORY") or "./understory"
  local p = assert(io.popen(bin .. " simulate " .. path .. " --json --policies policies 2>&1"))
  local text = p:read("a")
  assert(p:close(), text)
  return understory.json_decode(text)
end

-- Drive path through a new engine; each(e, t, r, i) after cycle i.
local function drive_file(path, each, opts)
  local e = understory.engine(opts or { policies = "policies" })
  local i = 0
  drive(e, understory.json_decode(read(path)), path, function(t, r)
    i = i + 1
    each(e, t, r, i)
  end)
  return e
end

-- A state document fed to a fresh engine through the module: nodes,
-- queues, workloads (less their pods) and their running pods.  Only a
-- state whose pods all run is fed this way (a fresh engine cannot be told
-- a pod is pipelined); the caller checks that.  An empty JSON array
-- decodes to an empty table, which encodes as an object: the empty
-- arrays (taints, tolerations: both default to none) are left out.
local function load_back(text)
  local doc = understory.json_decode(text)
  local e = understory.engine { policies = "policies" }
  for _, n in ipairs(doc.nodes or {}) do
    if next(n.taints) == nil then n.taints = nil end
    e:upsert_node(n)
  end
  for _, q in ipairs(doc.queues or {}) do e:upsert_queue(q) end
  for _, w in ipairs(doc.workloads or {}) do
    local pods = w.pods
    w.pods = nil
    if next(w.tolerations) == nil then w.tolerations = nil end
    e:upsert_workload(w, 0)
    for _, p in ipairs(pods or {}) do
      e:upsert_pod { name = p.name, workload = w.name, node = p.node }
    end
  end
  return e
end

-- The document with each workload's pods in name order: pods reported to
-- an engine take the places of its pending pods, so a state fed back
-- lists the same pods in another order (loaded as a scenario, the order is
-- kept: tests/c/test_statejson.c compares that byte for byte).
local function by_pod_name(text)
  local doc = understory.json_decode(text)
  for _, w in ipairs(doc.workloads or {}) do
    table.sort(w.pods or {}, function(a, b) return a.name < b.name end)
  end
  return doc
end

local function all_running(text)
  for _, w in ipairs(understory.json_decode(text).workloads or {}) do
    for _, p in ipairs(w.pods or {}) do
      if p.state ~= "running" then return false end
    end
  end
  return true
end

describe("the engine object's state readers", function()
  it("state_json: the seed story's state loads back as a scenario and writes itself again", function()
    local compared, loaded = 0, 0
    local e <close> = drive_file(SEED, function(e, t, _, i)
      local text = e:state_json()
      local doc = understory.json_decode(text)
      assert.are.equal("engine state", doc.name)
      assert.are.equal(4, #doc.nodes)
      -- a scenario the simulator runs (the first few cycles suffice: the
      -- rest are the same run again)
      if i <= 4 then
        local out = understory.simulate(text, { policies = "policies" })
        assert.is_true(#out.cycles >= 1)
        loaded = loaded + 1
      end
      if all_running(text) then
        local back <close> = load_back(text)
        assert.are.same(by_pod_name(text), by_pod_name(back:state_json()),
                        string.format("cycle %d (t=%s)", i, t))
        compared = compared + 1
      end
    end)
    assert.are.equal(4, loaded)
    -- most cycles of the story have every placed pod running
    assert.is_true(compared >= 20, "compared only " .. compared .. " states")
  end)

  it("state_json: a pod pipelined or releasing is written with its state", function()
    local seen = {}
    local e <close> = drive_file(SEED, function(e)
      for _, w in ipairs(understory.json_decode(e:state_json()).workloads) do
        for _, p in ipairs(w.pods or {}) do seen[p.state] = (seen[p.state] or 0) + 1 end
      end
    end)
    assert.is_true((seen.pipelined or 0) > 0)
    assert.is_true((seen.releasing or 0) > 0)
    assert.is_nil(seen.pending) -- replicas stand for pending pods
  end)

  it("state_json: a pending pod pinned to a node is simulated there, not on the node ties pick", function()
    -- two empty nodes: an unpinned pod goes to n1 (ties by name); w-a was
    -- reported pending and pinned to n2, as a pod lost off n2 would be
    local function engine(pin)
      local e = understory.engine { policies = "policies" }
      e:upsert_node(H.node("n1", 8))
      e:upsert_node(H.node("n2", 8))
      e:upsert_queue(H.queue("ml", 16))
      e:upsert_workload({ name = "w", queue = "ml", replicas = 1, requests = { gpu = 4 } }, 0)
      e:upsert_pod { name = "w-a", workload = "w", pin = pin }
      return e
    end
    local function simulated(e)
      local path = os.tmpname()
      local f = assert(io.open(path, "wb"))
      f:write(e:state_json())
      f:close()
      local out = cli_output(path .. " --plain-ties")
      os.remove(path)
      local pods = H.final_pods(out, "w")
      assert.are.equal(1, #pods)
      return pods[1]
    end
    local pinned <close> = engine("n2")
    local doc = understory.json_decode(pinned:state_json())
    assert.are.same({ { name = "w-a", pin = "n2" } }, doc.workloads[1].pinned_pending)
    local p = simulated(pinned)
    assert.are.same({ "w-a", "running", "n2" }, { p.name, p.state, p.node })
    -- the same pod unpinned: nothing is written for it (replicas stand
    -- for it, created as w-0), and ties place it on n1
    local free <close> = engine(nil)
    assert.is_nil(understory.json_decode(free:state_json()).workloads[1].pinned_pending)
    p = simulated(free)
    assert.are.same({ "w-0", "running", "n1" }, { p.name, p.state, p.node })
  end)

  it("gpu_use: equal, cycle by cycle, to the pools the command line reports", function()
    local cli = cli_output(SEED)
    local n = 0
    local e <close> = drive_file(SEED, function(e, t, _, i)
      local c = cli.cycles[i]
      assert.are.equal(t, c.time)
      local want = { capacity = 0, ai = 0, background = 0, external = 0, idle = 0 }
      for _, p in ipairs(c.pools) do
        want.capacity = want.capacity + p.gpus
        want.ai = want.ai + p.ai
        want.background = want.background + p.background
        want.idle = want.idle + p.idle
      end
      assert.are.same(want, e:gpu_use(), string.format("cycle %d (t=%s)", i, t))
      n = n + 1
    end)
    assert.are.equal(#cli.cycles, n)
    assert.are.same({ capacity = 32, ai = 1, background = 28, external = 0, idle = 3 },
                    { capacity = cli.cycles[1].pools[1].gpus, ai = cli.cycles[1].pools[1].ai,
                      background = cli.cycles[1].pools[1].background, external = 0,
                      idle = cli.cycles[1].pools[1].idle })
  end)

  it("pending_reason: set exactly while the command line counts the workload's kind pending", function()
    local cli = cli_output(SEED)
    local waited = 0
    local e <close> = drive_file(SEED, function(e, t, _, i)
      local bg, ai = false, false
      for _, w in ipairs(e:workloads()) do
        if w.pending_reason then
          if w.background then
            assert.are.equal("idle-resources", w.pending_reason)
            bg = true
          else
            ai = true
          end
        end
      end
      local p = cli.cycles[i].pools[1]
      local where = string.format("cycle %d (t=%s)", i, t)
      assert.are.equal(p.pending_background > 0, bg, where)
      assert.are.equal(p.pending_ai > 0, ai, where)
      if bg then waited = waited + 1 end
    end)
    assert.is_true(waited > 0)
    -- before any cycle no workload waits
    local f <close> = understory.engine { policies = "policies" }
    f:upsert_node(H.node("n1", 1))
    f:upsert_queue(H.bg_queue())
    f:upsert_workload(H.bg("burn", { replicas = 2, controller = "deployment", requests = { gpu = 1 } }), 0)
    assert.is_nil(f:workloads()[1].pending_reason)
    f:run_cycle(0)
    assert.are.equal("idle-resources", f:workloads()[1].pending_reason)
  end)

  it("cycle_phases: the cycle's seven phases, named, none negative, within the cycle's time", function()
    local e <close> = understory.engine { policies = "policies" }
    local names = {}
    for _, ph in ipairs(e:cycle_phases()) do
      names[#names + 1] = ph.name
      assert.are.equal(0, ph.seconds) -- before the first cycle
    end
    assert.are.same({ "snapshot", "eviction", "fairshare", "allocate", "victims", "reoffer", "commit" },
                    names)
    for i = 1, 4 do e:upsert_node(H.node("n" .. i)) end
    e:upsert_queue(H.queue("team", 32))
    e:upsert_queue(H.bg_queue())
    e:upsert_workload(H.bg("burn", { controller = "deployment", replicas = 28, requests = { gpu = 1 } }), 0)
    e:upsert_workload({ name = "train", queue = "team", replicas = 2, requests = { gpu = 8 } }, 0)
    local t0 = system.monotime()
    e:run_cycle(0)
    local wall = system.monotime() - t0
    local sum = 0
    for k, ph in ipairs(e:cycle_phases()) do
      assert.are.equal(names[k], ph.name)
      assert.is_true(ph.seconds >= 0)
      sum = sum + ph.seconds
    end
    assert.is_true(sum > 0)
    assert.is_true(sum <= wall, string.format("phases %.6fs > the cycle's %.6fs", sum, wall))
  end)

  it("cycle_reuse: what the last cycle kept from the one before", function()
    -- the same steps on an engine that keeps what cycles leave, and on
    -- one that works everything out each cycle
    local reuse = {}
    for _, full in ipairs { false, true } do
      local e <close> = understory.engine { policies = "policies", full_cycles = full }
      assert.are.same({ policy_calls = 0, nodes_classed = 0, nodes_class_kept = 0, scores_kept = 0 },
                      e:cycle_reuse())
      for i = 1, 3 do e:upsert_node(H.node("n" .. i)) end
      e:upsert_queue(H.queue("team", 24))
      e:upsert_workload({ name = "a", queue = "team", replicas = 2, requests = { gpu = 2 } }, 0)
      assert.are.equal(2, #e:run_cycle(0).decisions)
      local first = e:cycle_reuse()
      -- the same kind of pod again, on nodes that did not change
      e:upsert_workload({ name = "b", queue = "team", replicas = 2, requests = { gpu = 2 } }, 10)
      assert.are.equal(2, #e:run_cycle(10).decisions)
      reuse[full] = { first, e:cycle_reuse() }
    end
    local first, second = reuse[false][1], reuse[false][2]
    assert.are.equal(3, first.nodes_classed)
    assert.are.equal(0, first.nodes_class_kept) -- nothing before the first cycle
    assert.are.equal(0, first.scores_kept)
    assert.is_true(first.policy_calls > 0)
    assert.are.equal(3, second.nodes_class_kept)
    assert.is_true(second.scores_kept > 0)
    for _, r in ipairs(reuse[true]) do -- full cycles keep nothing, and are asked as often
      assert.are.equal(3, r.nodes_classed)
      assert.are.equal(0, r.nodes_class_kept)
      assert.are.equal(0, r.scores_kept)
    end
    assert.are.equal(first.policy_calls, reuse[true][1].policy_calls)
  end)

  it("cycle_count and log_dropped", function()
    local e <close> = understory.engine { policies = "policies" }
    assert.are.equal(0, e:cycle_count())
    local r = e:run_cycle(0)
    e:run_cycle(10)
    assert.are.equal(2, e:cycle_count())
    assert.are.equal(0, r.log_dropped)
    assert.are.same({}, r.log)
  end)

  it("full_cycles decides as the default does, for simulate and the engine", function()
    local a = H.run(SEED)
    local b = H.run(SEED, { full_cycles = true })
    assert.are.same(a, b)
    local function decisions(opts)
      local out = {}
      local e <close> = drive_file(SEED, function(_, t, r)
        for _, d in ipairs(r.decisions) do out[#out + 1] = t .. " " .. d.op .. " " .. d.pod end
      end, opts)
      return out
    end
    local full = decisions { policies = "policies", full_cycles = true }
    assert.is_true(#full > 40)
    assert.are.same(decisions(), full)
    assert.has_error(function() understory.engine { full_cycles = 1 } end,
                     "opts.full_cycles: expected a boolean")
  end)
end)
