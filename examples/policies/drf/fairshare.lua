--[[
fairshare.lua (DRF) — how much of a node pool each queue deserves, by
dominant-resource fairness.

WHAT IT DECIDES
  A fair share for every queue and every resource (gpu, cpu, memory) of one
  node pool, like the default policies/fairshare.lua.  The default divides
  each resource on its own; this one divides them together.

THE ALGORITHM (weighted dominant-resource fairness, on top of quotas)
  A queue's dominant share is the largest fraction it holds of any one
  resource of the amount being divided: a queue with 4 of 16 GPUs and 8 of
  128 cores has a dominant share of 1/4 (GPU is its dominant resource).
  DRF gives every queue the same dominant share, weighted, growing each
  queue's allocation in proportion to what it asks for, until resources run
  out.  A GPU-hungry queue and a CPU-hungry queue then each get most of the
  resource they need, instead of each resource being split by weight
  regardless of who needs it.

  The pool's capacity is divided among the top-level queues; each queue's
  share is then divided among its children the same way, down to the
  leaves.  Dividing an amount A (a vector) among sibling queues:
    1. Quota first, as in the default: each sibling gets min(quota, demand),
       never above its limit, per resource; if those do not fit, each gets
       the same fraction of its amount.
    2. The rest by DRF, one queue-priority level at a time (highest first;
       what a level cannot use goes to the next).  Inside a level, each
       queue wants want = min(demand, limit) - what it has, and grows along
       that vector.  Its level is (its dominant share) / weight, where the
       weight is its largest over-quota weight among the resources it
       wants (0: nothing beyond quota).  The lowest levels are raised
       together until a queue has all it wants or a resource runs out;
       queues that need a resource that ran out stop, the others go on.
  Siblings are taken in name order and every loop runs over lists, so the
  result is the same on every run.

CALLED AS
  compute(view) -> shares
  The view is that of policies/fairshare.lua (see docs/policies.md): gpu in
  devices, cpu in millicores, memory in bytes.

RETURNS
  { [queue name] = {gpu=, cpu=, memory=} } for every queue of view.queues.
]]

local M = {}

local RESOURCES = { "gpu", "cpu", "memory" }
local UNLIMITED = -1 -- quota -1: the queue is guaranteed all it asks for
local NO_LIMIT = -1  -- limit -1: no hard cap
local TINY = 1e-12   -- below this (relative), an amount counts as used up

-- The most a queue can usefully receive of resource r.
local function ceiling(queue, r)
  local most = queue.demand[r]
  if queue.limit[r] ~= NO_LIMIT then
    most = math.min(most, queue.limit[r])
  end
  return math.max(most, 0)
end

-- Its quota, but no more than it asks for and never above its limit.
local function deserved(queue, r)
  local amount = ceiling(queue, r)
  if queue.quota[r] ~= UNLIMITED then
    amount = math.min(queue.quota[r], amount)
  end
  return math.max(amount, 0)
end

-- The weight of a queue in DRF: its largest over-quota weight among the
-- resources it still wants.
local function weight_of(queue, want)
  local w = 0
  for _, r in ipairs(RESOURCES) do
    if want[r] > 0 then
      w = math.max(w, queue.over_quota_weight[r])
    end
  end
  return w
end

local function priorities_high_to_low(siblings)
  local seen, list = {}, {}
  for _, queue in ipairs(siblings) do
    if not seen[queue.priority] then
      seen[queue.priority] = true
      list[#list + 1] = queue.priority
    end
  end
  table.sort(list, function(a, b) return a > b end)
  return list
end

-- One queue taking part in a DRF round: how far it has got (its dominant
-- share, over the weight) and in which direction it grows.
-- A queue that still wants a resource that is used up takes no further
-- part: it grows in proportion to all it asks for, or not at all.
local function runner(queue, share, amount, left)
  local want, dominant_now, dominant_want = {}, 0, 0
  for _, r in ipairs(RESOURCES) do
    want[r] = 0
    if amount[r] > 0 then
      want[r] = math.max(ceiling(queue, r) - share[r], 0)
      if want[r] > TINY * amount[r] and left[r] <= TINY * amount[r] then
        return nil
      end
      dominant_now = math.max(dominant_now, share[r] / amount[r])
      dominant_want = math.max(dominant_want, want[r] / amount[r])
    end
  end
  local weight = weight_of(queue, want)
  if dominant_want <= 0 or weight <= 0 then
    return nil
  end
  return {
    queue = queue,
    weight = weight,
    start = dominant_now / weight,                  -- its level now
    stop = (dominant_now + dominant_want) / weight, -- its level when it has all it wants
    -- per unit of dominant share: `want` scaled so its dominant part is 1
    step = {
      gpu = want.gpu / dominant_want,
      cpu = want.cpu / dominant_want,
      memory = want.memory / dominant_want,
    },
    dominant_want = dominant_want,
  }
end

-- How much dominant share a runner has gained when the level is `level`.
local function gained(run, level)
  if level <= run.start then
    return 0
  end
  return math.min((level - run.start) * run.weight, run.dominant_want)
end

-- Raise the runners' level as far as the resources left allow; returns the
-- level reached.  Between two breakpoints (a runner starting or stopping)
-- every use grows linearly, so the highest level that fits is exact.
local function highest_level(runners, left)
  local points = {}
  for _, run in ipairs(runners) do
    points[#points + 1] = run.start
    points[#points + 1] = run.stop
  end
  table.sort(points)
  local function use(level, r)
    local total = 0
    for _, run in ipairs(runners) do
      total = total + gained(run, level) * run.step[r]
    end
    return total
  end
  local level = points[1]
  for i = 2, #points do
    local next_level = points[i]
    local fits = true
    for _, r in ipairs(RESOURCES) do
      if use(next_level, r) > left[r] then
        fits = false
      end
    end
    if not fits then
      -- inside this segment: the first resource to run out sets the level
      local best = next_level
      for _, r in ipairs(RESOURCES) do
        local slope = 0
        for _, run in ipairs(runners) do
          if level >= run.start and level < run.stop then
            slope = slope + run.weight * run.step[r]
          end
        end
        if slope > 0 then
          best = math.min(best, level + (left[r] - use(level, r)) / slope)
        end
      end
      return math.max(best, level)
    end
    level = next_level
  end
  return level
end

-- DRF among the members of one priority level, starting from `share` (a
-- table of per-queue vectors) with `left` of `amount` still to give.
local function share_by_drf(members, share, amount, left)
  -- each round ends with every runner satisfied or some resource used up;
  -- there are three resources, so a few rounds always finish
  for _ = 1, 2 * #RESOURCES + 2 do
    local runners = {}
    for _, queue in ipairs(members) do
      local run = runner(queue, share[queue.name], amount, left)
      if run then
        runners[#runners + 1] = run
      end
    end
    if #runners == 0 then
      return
    end
    local level = highest_level(runners, left)
    for _, run in ipairs(runners) do
      local g = gained(run, level)
      local s = share[run.queue.name]
      for _, r in ipairs(RESOURCES) do
        local give = math.min(g * run.step[r], left[r])
        if g >= run.dominant_want then
          -- land exactly on the ceiling (adding could miss it by a rounding)
          give = math.min(math.max(ceiling(run.queue, r) - s[r], 0), left[r])
        end
        s[r] = s[r] + give
        left[r] = math.max(left[r] - give, 0)
      end
    end
  end
end

local function children_of(queue, queues_by_name)
  local list = {}
  for _, name in ipairs(queue.children) do
    list[#list + 1] = queues_by_name[name]
  end
  return list
end

-- Divide `amount` (a vector) among sibling queues sorted by name, then each
-- sibling's share among its own children.
local function divide(siblings, amount, share, queues_by_name)
  -- 1. quotas first, each resource on its own
  local left = {}
  for _, r in ipairs(RESOURCES) do
    local total = 0
    for _, queue in ipairs(siblings) do
      total = total + deserved(queue, r)
    end
    local scale = 1
    if total > amount[r] and total > 0 then
      scale = amount[r] / total
    end
    for _, queue in ipairs(siblings) do
      share[queue.name][r] = deserved(queue, r) * scale
    end
    left[r] = math.max(amount[r] - total * scale, 0)
  end

  -- 2. the rest by DRF, one priority level at a time
  for _, priority in ipairs(priorities_high_to_low(siblings)) do
    local members = {}
    for _, queue in ipairs(siblings) do
      if queue.priority == priority then
        members[#members + 1] = queue
      end
    end
    share_by_drf(members, share, amount, left)
  end

  -- 3. down the tree
  for _, queue in ipairs(siblings) do
    if #queue.children > 0 then
      local own = share[queue.name]
      divide(children_of(queue, queues_by_name),
             { gpu = own.gpu, cpu = own.cpu, memory = own.memory }, share, queues_by_name)
    end
  end
end

function M.compute(view)
  local share = {}
  for _, queue in ipairs(view.queues) do
    share[queue.name] = { gpu = 0, cpu = 0, memory = 0 }
  end
  local roots = {}
  for _, queue in ipairs(view.queues) do
    if queue.parent == nil then
      roots[#roots + 1] = queue
    end
  end
  table.sort(roots, function(a, b) return a.name < b.name end)
  divide(roots, { gpu = view.capacity.gpu, cpu = view.capacity.cpu, memory = view.capacity.memory },
         share, view.queues_by_name)
  return share
end

return M
