-- harvest_spec.lua — the harvest and disturbance figures (docs/scenario.md,
-- "Figures") on scenarios whose figures are worked out by hand below, and
-- the invariants that hold for every run.
local H = require "tests.spec.helper"

-- Two 8-GPU nodes in zones a and b.  burn-a (6 pods, zone a) and burn-b
-- (6 pods, zone b) hold 12 GPUs from t=0; huge (9 GPUs) never fits any
-- node; train (one 8-GPU pod) arrives at t=10.  Train has to clear a whole
-- node: it evicts the 6 burn pods of n1 (the tie between n1 and n2 goes to
-- the name), although pooled capacity says 4 would have been enough.
local function fragmented()
  return {
    name = "fragmented", cycle_interval = 10, horizon = 30,
    nodes = { H.node("n1", 8, { labels = { zone = "a" } }), H.node("n2", 8, { labels = { zone = "b" } }) },
    queues = { H.queue("ml", 16), H.bg_queue() },
    workloads = {
      H.bg("burn-a", { controller = "deployment", replicas = 6, requests = { gpu = 1 },
                       node_selector = { zone = "a" } }),
      H.bg("burn-b", { controller = "deployment", replicas = 6, requests = { gpu = 1 },
                       node_selector = { zone = "b" } }),
      { name = "huge", queue = "ml", requests = { gpu = 9 } },
      { name = "train", queue = "ml", requests = { gpu = 8 }, submit_at = 10 },
    },
  }
end

-- Two pools of one 4-GPU node each; in each, 4 background pods fill the
-- node and a 4-GPU AI pod arrives at t=10.  Pool p1's background grace is
-- 5 s, pool p2's 15 s: the AI pod of p1 binds at t=20 (waited 10 s), the
-- one of p2 at t=30 (waited 20 s).
local function two_pools()
  return {
    name = "two pools", cycle_interval = 10, horizon = 40,
    nodes = { H.node("a1", 4, { pool = "p1" }), H.node("b1", 4, { pool = "p2" }) },
    queues = { H.queue("ml", 8), H.bg_queue() },
    workloads = {
      H.bg("burn1", { pool = "p1", controller = "deployment", replicas = 4, requests = { gpu = 1 } }),
      H.bg("burn2", { pool = "p2", controller = "deployment", replicas = 4, requests = { gpu = 1 },
                      termination_grace = 15 }),
      { name = "t1", queue = "ml", pool = "p1", requests = { gpu = 4 }, submit_at = 10 },
      { name = "t2", queue = "ml", pool = "p2", requests = { gpu = 4 }, submit_at = 10 },
    },
  }
end

local function pool_rows(out, pool)
  local rows = {}
  for _, c in ipairs(out.cycles) do
    for _, p in ipairs(c.pools) do
      if p.pool == pool then
        rows[#rows + 1] = { p.gpus, p.ai, p.background, p.idle, p.pending_ai, p.pending_background,
                            p.background_evictions, p.background_evictions_needed }
      end
    end
  end
  return rows
end

local function summary_pool(out, pool)
  for _, p in ipairs(out.summary.harvest.pools) do
    if p.pool == pool then return p end
  end
end

describe("harvest figures", function()

  it("per cycle: GPUs held by AI, background and idle, pending pods, evictions and the bound", function()
    local out = H.run(fragmented())
    -- {gpus, ai, background, idle, pending AI, pending background, evictions, needed}
    assert.are.same({
      { 16, 0, 12, 4, 1, 0, 0, 0 },  -- t=0: burn holds 12, huge pending
      { 16, 0, 12, 4, 1, 6, 6, 4 },  -- t=10: 6 evicted (releasing until 15, still held), train pipelined
      { 16, 8, 6, 2, 1, 6, 0, 0 },   -- t=20: train runs on n1; burn-a's 6 wait for zone a
      { 16, 8, 6, 2, 1, 6, 0, 0 },   -- t=30
    }, pool_rows(out, "default"))
  end)

  it("per cycle: each queue's allocated, fair share and quota", function()
    local out = H.run(fragmented())
    local ml
    for _, q in ipairs(out.cycles[3].queues) do
      if q.name == "ml" then ml = q end
    end
    assert.are.equal(8, ml.allocated.gpu)
    assert.are.equal(16, ml.quota.gpu)
    -- ml asks for 8 + 9 GPUs of 16; its fair share is all of them
    assert.are.equal(16, ml.fair_share.gpu)
    local bg = out.cycles[3].queues[2]
    assert.are.equal("infra-bg", bg.name)
    assert.are.same({ gpu = 0, cpu = 0, memory = 0 }, bg.allocated)
    assert.are.same({ gpu = 0, cpu = 0, memory = 0 }, bg.quota)
  end)

  it("over the run: GPU-seconds, harvest ratio, evictions against the lower bound, waits", function()
    local h = H.run(fragmented()).summary.harvest
    -- 4 cycles x 10 s: capacity 16*40; AI 8+8 cycles; background 12+12+6+6; idle 4+4+2+2
    assert.are.same({ capacity = 640, ai = 160, background = 360, idle = 120 }, h.gpu_seconds)
    -- background used 360 of the 480 GPU-seconds AI left idle
    assert.are.equal(0.75, h.harvest_ratio)
    assert.are.equal(6, h.background_evictions)
    assert.are.equal(4, h.background_evictions_needed)
    -- train pipelined at t=10, bound at t=20
    assert.are.same({ pods = 1, total = 10, p50 = 10, p99 = 10 }, h.ai_wait_on_grace)
    assert.are.same(h.gpu_seconds, summary_pool({ summary = { harvest = h } }, "default").gpu_seconds)
  end)

  it("per pool and overall, with waits of different lengths", function()
    local out = H.run(two_pools())
    assert.are.same({
      { 4, 0, 4, 0, 0, 0, 0, 0 },
      { 4, 0, 4, 0, 0, 4, 4, 4 },
      { 4, 4, 0, 0, 0, 4, 0, 0 },
      { 4, 4, 0, 0, 0, 4, 0, 0 },
      { 4, 4, 0, 0, 0, 4, 0, 0 },
    }, pool_rows(out, "p1"))
    assert.are.same({
      { 4, 0, 4, 0, 0, 0, 0, 0 },
      { 4, 0, 4, 0, 0, 4, 4, 4 },
      { 4, 0, 4, 0, 0, 4, 0, 0 },  -- burn2 still releasing (15 s grace)
      { 4, 4, 0, 0, 0, 4, 0, 0 },
      { 4, 4, 0, 0, 0, 4, 0, 0 },
    }, pool_rows(out, "p2"))
    local p1, p2, all = summary_pool(out, "p1"), summary_pool(out, "p2"), out.summary.harvest
    assert.are.same({ capacity = 200, ai = 120, background = 80, idle = 0 }, p1.gpu_seconds)
    assert.are.same({ capacity = 200, ai = 80, background = 120, idle = 0 }, p2.gpu_seconds)
    assert.are.same({ capacity = 400, ai = 200, background = 200, idle = 0 }, all.gpu_seconds)
    assert.are.equal(1, p1.harvest_ratio)
    assert.are.equal(1, all.harvest_ratio)
    assert.are.same({ pods = 1, total = 10, p50 = 10, p99 = 10 }, p1.ai_wait_on_grace)
    assert.are.same({ pods = 1, total = 20, p50 = 20, p99 = 20 }, p2.ai_wait_on_grace)
    -- nearest rank: p50 is the 1st of 2 sorted waits, p99 the 2nd
    assert.are.same({ pods = 2, total = 30, p50 = 10, p99 = 20 }, all.ai_wait_on_grace)
    assert.are.equal(8, all.background_evictions)
    assert.are.equal(8, all.background_evictions_needed)
  end)

  it("has no harvest ratio when AI left nothing idle", function()
    local s = {
      name = "full", cycle_interval = 10, horizon = 10,
      nodes = { H.node("n1", 4) }, queues = { H.queue("ml", 4), H.bg_queue() },
      workloads = { { name = "t", queue = "ml", requests = { gpu = 4 } },
                    H.bg("burn", { controller = "deployment", replicas = 2, requests = { gpu = 1 } }) },
    }
    local h = H.run(s).summary.harvest
    assert.are.same({ capacity = 80, ai = 80, background = 0, idle = 0 }, h.gpu_seconds)
    assert.is_nil(h.harvest_ratio) -- JSON null
  end)

  -- A background gang (min_member 2) on a 2-GPU node: AI pod a takes one
  -- of its pods at t=10; at t=20 the gang, below min_member, is evicted
  -- whole (stalegangeviction) and AI pod b is pipelined onto the room it
  -- frees.  That eviction is not one AI placement made: the bound leaves
  -- the gang out, so b needs nothing at t=20.
  it("leaves a stale gang's eviction out of the bound", function()
    local out = H.run({
      name = "stale gang", cycle_interval = 10, horizon = 40,
      nodes = { H.node("n1", 2) }, queues = { H.queue("ml", 2), H.bg_queue() },
      workloads = {
        H.bg("pair", { controller = "job", replicas = 2, min_member = 2, requests = { gpu = 1 } }),
        { name = "a", queue = "ml", requests = { gpu = 1 }, submit_at = 10 },
        { name = "b", queue = "ml", requests = { gpu = 1 }, submit_at = 20 },
      } })
    local stale = H.decisions(out, function(d) return d.action == "stalegangeviction" end)
    assert.are.equal(1, #stale)
    assert.are.equal(20, stale[1].time)
    assert.are.same({
      { 2, 0, 2, 0, 0, 0, 0, 0 },
      { 2, 0, 2, 0, 0, 1, 1, 1 },  -- t=10: a takes pair-1's GPU (1 needed of 1)
      { 2, 1, 1, 0, 0, 2, 0, 0 },  -- t=20: a runs; the stale gang's pod releases for b
      { 2, 2, 0, 0, 0, 2, 0, 0 },
      { 2, 2, 0, 0, 0, 2, 0, 0 },
    }, pool_rows(out, "default"))
    -- a waited 10 s on pair-1, b 10 s on pair-0
    assert.are.same({ pods = 2, total = 20, p50 = 10, p99 = 10 }, out.summary.harvest.ai_wait_on_grace)
  end)

  -- Invariants over every example and the scenarios above: per pool and
  -- cycle the GPUs split exactly into AI, background and idle; the bound
  -- never exceeds the evictions; the run's figures are the cycles' sums;
  -- the evictions are the summary's background evictions.
  it("hold for every run: the split, the bound, the sums", function()
    local runs = { H.run(fragmented()), H.run(two_pools()) }
    for _, f in ipairs({ "seed-story", "controllers", "keep-if-fits", "preempt", "reclaim", "tie-break" }) do
      runs[#runs + 1] = H.run("examples/" .. f .. ".json")
    end
    for _, out in ipairs(runs) do
      local h = out.summary.harvest
      local interval = #out.cycles > 1 and (out.cycles[2].time - out.cycles[1].time) or nil
      local sums = {}
      for _, c in ipairs(out.cycles) do
        for _, p in ipairs(c.pools) do
          assert.are.equal(p.gpus, p.ai + p.background + p.idle, out.scenario .. " cycle " .. c.cycle)
          assert.is_true(p.idle >= 0 and p.ai >= 0 and p.background >= 0)
          assert.is_true(p.background_evictions_needed <= p.background_evictions,
            out.scenario .. " cycle " .. c.cycle .. " pool " .. p.pool)
          local s = sums[p.pool] or { cap = 0, ai = 0, ev = 0, need = 0 }
          s.cap, s.ai = s.cap + p.gpus, s.ai + p.ai
          s.ev, s.need = s.ev + p.background_evictions, s.need + p.background_evictions_needed
          sums[p.pool] = s
        end
      end
      local ev = 0
      for _, p in ipairs(h.pools) do
        local s = sums[p.pool]
        if interval then
          assert.are.equal(s.cap * interval, p.gpu_seconds.capacity)
          assert.are.equal(s.ai * interval, p.gpu_seconds.ai)
        end
        assert.are.equal(s.ev, p.background_evictions)
        assert.are.equal(s.need, p.background_evictions_needed)
        ev = ev + p.background_evictions
      end
      assert.are.equal(out.summary.background_evictions, ev, out.scenario)
      assert.are.equal(out.summary.background_evictions, h.background_evictions, out.scenario)
    end
  end)
end)
