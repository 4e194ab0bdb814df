--[[
fairshare.lua — how much of a node pool each queue deserves.

WHAT IT DECIDES
  A fair share for every queue and every resource (gpu, cpu, memory) of one
  node pool.  The scheduler serves queues not over their fair share first
  (docs/scheduling.md has the whole queue order) and reclaims resources for
  a queue that stays within its share from queues that are above theirs.  A
  fair share is a target, not a reservation: nothing is held for a queue
  that asks for nothing.

THE ALGORITHM (KAI scheduler semantics)
  Each resource is divided on its own.  The pool's capacity is divided among
  the top-level queues; each queue's share is then divided among its
  children the same way, down to the leaves.  Dividing an amount among
  sibling queues:
    1. Quota first.  Each sibling gets min(quota, demand), never above its
       limit (quota -1 means unlimited: it gets its demand, up to the amount
       being divided).  Quotas are given in full even when they add up to
       more than the amount, as KAI does: a quota is a promise the pool may
       not keep for everyone at once, never a smaller share for all.
    2. The rest by priority.  What is left goes to the highest queue
       priority first.  Inside one priority, it is shared by over-quota
       weight ("water-filling"), in whole units as KAI does: each sibling is
       offered remaining * weight / total weight; one that needs no more
       takes what it needs (up to its demand and limit) and what it leaves
       is offered again; the others take the whole units of their offer.
       The units those floors leave go one at a time to the siblings with
       the largest part of a unit not given (then the queue created first,
       then name).  A unit is one GPU, one millicore, one byte.  Siblings of
       weight 0 get nothing beyond their quota.  What a priority level
       cannot use goes to the next lower one.
  Siblings are always taken in name order, so the result is the same on
  every run.  engine/builtin.c is the same algorithm in C, operation for
  operation: the engine falls back to it if this policy fails, and tests
  check that both give identical numbers.  If you change one, change both.

CALLED AS
  compute(view) -> shares

  view.pool               name of the node pool (string)
  view.capacity           {gpu=, cpu=, memory=}: schedulable capacity of the pool
  view.queues             every queue, in the order they were declared; each:
    .name                 string
    .parent               name of the parent queue; nil for a top-level queue
    .priority             integer: higher priorities get leftovers first
    .created_at           number, seconds: breaks ties for a unit left over
    .quota                {gpu=, cpu=, memory=}: guaranteed amount; -1 = unlimited
    .limit                {gpu=, cpu=, memory=}: hard cap; -1 = no limit
    .over_quota_weight    {gpu=, cpu=, memory=}: relative claim on leftovers (numbers >= 0)
    .demand               {gpu=, cpu=, memory=}: what its AI pods request,
                          pending and placed; for a parent, the sum of its children
    .allocated            {gpu=, cpu=, memory=}: what its AI pods hold now;
                          for a parent, the sum of its children
    .children             names of its child queues, sorted by name ({} for a leaf)
  view.queues_by_name     the same queue tables, keyed by name

  Units everywhere: gpu in devices (a number: 0.5 is half a device), cpu in
  millicores and memory in bytes (integers).  Background pods appear in none
  of these numbers: they are never entitled to anything.

RETURNS
  { [queue name] = {gpu=, cpu=, memory=} } for every queue of view.queues,
  in the same units.  A missing queue or a value that is not a finite number
  makes the engine reject the result and use the built-in policy instead.

  The view is a fresh table on each call: changing it changes nothing.  The
  order of pairs() over string keys differs from run to run; iterate lists
  (view.queues, .children) when order matters, as here.
]]

local M = {}

local RESOURCES = { "gpu", "cpu", "memory" }
local UNLIMITED = -1   -- quota -1: the queue is guaranteed all it asks for
local NO_LIMIT = -1    -- limit -1: no hard cap

-- What a queue is guaranteed before anything is shared: its quota, but no
-- more than it asks for (quota it does not use would be wasted) and never
-- above its limit.  An unlimited quota guarantees what it asks for, up to
-- the amount being divided.
local function deserved(queue, r, amount)
  local demand = queue.demand[r]
  local want = math.min(amount, demand)
  if queue.quota[r] ~= UNLIMITED then
    want = math.min(queue.quota[r], demand)
  end
  if queue.limit[r] ~= NO_LIMIT then
    want = math.min(want, queue.limit[r])
  end
  if want < 0 then
    want = 0
  end
  return want
end

-- The most a queue can usefully receive: its demand, capped by its limit.
local function ceiling(queue, r)
  local most = queue.demand[r]
  if queue.limit[r] ~= NO_LIMIT then
    most = math.min(most, queue.limit[r])
  end
  return most
end

-- The distinct priorities among siblings, highest first: leftovers go to
-- the most important queues before the others.
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

local function with_priority(siblings, priority)
  local members = {}
  for _, queue in ipairs(siblings) do
    if queue.priority == priority then
      members[#members + 1] = queue
    end
  end
  return members
end

-- Does queue a come before b for a unit left over?  The larger part of a
-- unit it was offered and not given, then the queue created first, then
-- the name.
local function rest_before(a, b, rest)
  if rest[a.name] ~= rest[b.name] then
    return rest[a.name] > rest[b.name]
  end
  if a.created_at ~= b.created_at then
    return a.created_at < b.created_at
  end
  return a.name < b.name
end

-- Water-filling inside one priority level, in whole units as KAI does.
-- Each round, every member that still wants more and has a positive weight
-- is offered its weighted part of what remains: a member that needs no more
-- than its offer takes what it needs (and what it leaves is offered again
-- in the next round); the others take the whole units of their offer
-- (math.floor).  The units the floors leave go one at a time to the
-- members with the largest part of a unit not given, never past a ceiling.
-- Returns what is left for the lower priorities.
local function share_by_weight(members, share, r, remaining)
  local rest = {}
  while true do
    local hungry, total_weight = {}, 0
    for _, queue in ipairs(members) do
      local weight = queue.over_quota_weight[r]
      if weight > 0 and ceiling(queue, r) - share[queue.name] > 0 then
        hungry[#hungry + 1] = queue
        total_weight = total_weight + weight
      end
    end
    if #hungry == 0 or remaining <= 0 then
      break
    end

    local given, again = 0, false
    for _, queue in ipairs(hungry) do
      local room = ceiling(queue, r) - share[queue.name]
      local portion = remaining * queue.over_quota_weight[r] / total_weight
      if room <= portion then
        -- land exactly on the ceiling (adding could miss it by a rounding)
        share[queue.name] = ceiling(queue, r)
        given = given + room
        rest[queue.name] = nil
        if room < portion then
          again = true
        end
      else
        local whole = math.floor(portion)
        share[queue.name] = share[queue.name] + whole
        given = given + whole
        if portion - whole > 0 then
          rest[queue.name] = portion - whole
        end
      end
    end
    remaining = remaining - given
    -- nobody needed less than offered: another round would give nothing
    if not again then
      break
    end
  end

  while remaining > 0 do
    local best
    for _, queue in ipairs(members) do
      if rest[queue.name] and (best == nil or rest_before(queue, best, rest)) then
        best = queue
      end
    end
    if best == nil then
      break
    end
    local unit = math.min(math.min(1, remaining), ceiling(best, r) - share[best.name])
    share[best.name] = share[best.name] + unit
    remaining = remaining - unit
    rest[best.name] = nil
  end
  return remaining
end

local function children_of(queue, queues_by_name)
  local list = {}
  for _, name in ipairs(queue.children) do
    list[#list + 1] = queues_by_name[name]
  end
  return list
end

-- Divide `amount` of resource r among sibling queues (sorted by name), then
-- each sibling's share among its own children.
local function divide(siblings, amount, r, share, queues_by_name)
  -- 1. quotas first, in full even when they add up to more than the amount
  --    (KAI does not scale a quota down: the pool cannot keep every promise
  --    at once, and the engine accepts such shares)
  local total = 0
  for _, queue in ipairs(siblings) do
    share[queue.name] = deserved(queue, r, amount)
    total = total + share[queue.name]
  end
  local remaining = amount - total

  -- 2. the rest, one priority level at a time
  for _, priority in ipairs(priorities_high_to_low(siblings)) do
    if remaining <= 0 then
      break
    end
    remaining = share_by_weight(with_priority(siblings, priority), share, r, remaining)
  end

  -- 3. down the tree
  for _, queue in ipairs(siblings) do
    if #queue.children > 0 then
      divide(children_of(queue, queues_by_name), share[queue.name], r, share, queues_by_name)
    end
  end
end

local function top_level_queues(view)
  local roots = {}
  for _, queue in ipairs(view.queues) do
    if queue.parent == nil then
      roots[#roots + 1] = queue
    end
  end
  table.sort(roots, function(a, b) return a.name < b.name end)
  return roots
end

function M.compute(view)
  local result = {}
  for _, queue in ipairs(view.queues) do
    result[queue.name] = { gpu = 0, cpu = 0, memory = 0 }
  end
  local roots = top_level_queues(view)
  for _, r in ipairs(RESOURCES) do
    local share = {}
    for _, queue in ipairs(view.queues) do
      share[queue.name] = 0
    end
    divide(roots, view.capacity[r], r, share, view.queues_by_name)
    for _, queue in ipairs(view.queues) do
      result[queue.name][r] = share[queue.name]
    end
  end
  return result
end

return M
