--[[
background.lua — what background pods run, and where.

WHAT IT DECIDES
  After AI placement, what is left of the cluster is offered back to the
  background pods (health checks, burn-in, monitoring agents).  This policy
  says which running background pods keep running on their node, and where
  pending ones are placed.  A running pod it does not keep is evicted: the
  AI plan needs its resources, or there is no room for it any more.

THE RULE
  1. Running pods, in the order given (by name): a pod keeps running if it
     still fits on its own node once the AI plan ends (free_at_end: a
     releasing pod and the AI pod pipelined onto its room are not counted
     together).  Leaving a pod alone is cheaper than evicting and
     recreating it.
  2. Pending pods, in idle room only (idle: room nobody holds now; the
     running pods above hold theirs whether kept or evicted, since an
     evicted pod terminates), a group at a time: the pods of one workload
     that may go to the same nodes (workloads in name order, pods in name order).  Each
     pod goes to the fullest of the group's candidate nodes that still has
     room, scored like placement.lua (1000 * gpu fraction + cpu fraction,
     once the pod is on it); ties go to the node listed first.  Packing
     leaves whole nodes idle for the next AI gang.  The candidates are
     ranked once per group: a node that takes a pod only gets fuller, so it
     stays first while it has room.  A pod with no room anywhere stays
     pending: that is the normal state of background work on a full
     cluster.
  engine/builtin.c is the same rule in C (the fallback if this policy
  fails); tests check both give identical answers.

CALLED AS
  reoffer(view) -> { keep = {pod names}, place = {[pod name] = node name} }

  view.nodes            the nodes that matter this cycle, sorted by name:
                        those of the pods in `running` and every candidate
                        of a pod in `pending`; each:
    .name               node name
    .labels             {key = value}: the labels that matter only (those a
                        node selector names or a policy file declares in
                        `M.labels = {...}`, docs/policies.md); others are nil
    .capacity           {gpu=, cpu=, memory=}
    .free               {gpu=, cpu=, memory=}: idle once the AI plan, the
                        pods still terminating and the background pods not
                        offered in `running` are counted; the pods in
                        `running` are NOT counted: they are what this
                        policy decides about
    .free_gpus          whole devices free, same accounting (an integer)
    .free_at_end        {gpu=, cpu=, memory=}: free once the AI plan ends:
                        pipelined and new AI pods counted, every pod still
                        terminating gone, background pods not offered in
                        `running` counted, the pods in `running` NOT
                        counted.  What a running pod may keep.
    .free_gpus_at_end   whole devices, same accounting
    .idle               {gpu=, cpu=, memory=}: `free` less every pod in
                        `running` on the node (kept or not: an evicted pod
                        still holds its room while it terminates).  What a
                        pending pod may take.
    .idle_gpus          whole devices, same accounting
  view.nodes_by_name    the same node tables, keyed by name
  view.running          running background pods on the nodes the AI plan
                        changed this cycle (a placement or an eviction),
                        by name.  Pods on other nodes are not offered: what
                        they fitted in has not changed, so they stay.  Each:
    .name, .workload    pod and workload names
    .node               name of the node it is on
    .requests           {gpu=, cpu=, memory=}
    .priority           integer
    .labels             {key = value}: the workload's labels
  view.pending          background pods waiting for a node, by name; each:
    .name, .workload, .requests, .priority, .labels   as above
    .candidates         names of the nodes it may go to and that have room
                        for it (node selector, daemonset pin, cordon and
                        free resources already applied), sorted; pods that
                        may go to the same nodes share one table

  Units: gpu in devices, cpu in millicores, memory in bytes.  Background
  pods request whole GPUs.

RETURNS
  keep   a list of names of running pods that stay; every other running pod
         is evicted.
  place  pending pod name -> one of its candidate node names.  Pods not
         named stay pending.
  The engine checks the result (kept pods fit in free_at_end and a pod not
  kept does not fit there beside them, placed pods fit in idle, a kept pod
  stays on its node, a placed pod goes to a candidate); a result that breaks a rule is rejected, with a Warning event
  naming the policy and the rule, and the built-in policy is used for that
  cycle.
]]

local M = {}

-- Devices a request occupies: background pods request whole GPUs.
local function whole_gpus(gpu)
  return math.ceil(gpu)
end

-- How full a resource is: `used` out of `capacity`, 0 when there is none.
local function fraction(used, capacity)
  if capacity == 0 then
    return 0
  end
  return used / capacity
end

-- Room on the nodes, as tables we can subtract from as pods are kept or
-- placed (the view itself is left as it was given).  A node's table is made
-- the first time it is asked for, by room_made: a cycle that keeps a few
-- running pods reads a few nodes of a view of thousands.  Read it as
-- `room[name] or room_made(room, view.nodes_by_name, name, which,
-- which_gpus)`: `which` names the node field (free_at_end or idle),
-- `which_gpus` its device count.  nil for a node not in the view.
local function room_made(room, nodes_by_name, name, which, which_gpus)
  local node = nodes_by_name[name]
  if node == nil then
    return nil
  end
  local there = {
    gpu = node[which].gpu,
    cpu = node[which].cpu,
    memory = node[which].memory,
    gpus = node[which_gpus],
  }
  room[name] = there
  return there
end

local function take(request, room)
  room.gpu = room.gpu - request.gpu
  room.cpu = room.cpu - request.cpu
  room.memory = room.memory - request.memory
  room.gpus = room.gpus - whole_gpus(request.gpu)
end

-- The idle room a pending pod may take on a node, as four numbers (gpu,
-- cpu, memory, whole gpus): what the pods placed this cycle left there
-- (room[name]) or, on a node nothing was placed on yet, the view's idle
-- room as given.  Ranking reads thousands of candidates and places pods on
-- a few: no room table is made for a node only looked at.
local function idle_left(room, node)
  local there = room[node.name]
  if there ~= nil then
    return there.gpu, there.cpu, there.memory, there.gpus
  end
  local idle = node.idle
  return idle.gpu, idle.cpu, idle.memory, node.idle_gpus
end

-- The placement score of a node with gpu_left and cpu_left idle, once the
-- pod is on it: fuller is better.
local function fullness_after(node, gpu_left, cpu_left, request)
  local gpu_after = (node.capacity.gpu - gpu_left) + request.gpu
  local cpu_after = (node.capacity.cpu - cpu_left) + request.cpu
  return 1000 * fraction(gpu_after, node.capacity.gpu) + fraction(cpu_after, node.capacity.cpu)
end

-- Pending pods in groups: the pods of one workload that may go to the same
-- nodes (same candidate list).  Groups come by workload name, then by where
-- their first pod is listed; a group keeps its pods in listed order.
local function groups_of(pending)
  local groups, by_workload = {}, {}
  for index, pod in ipairs(pending) do
    local mine = by_workload[pod.workload]
    if mine == nil then
      mine = {}
      by_workload[pod.workload] = mine
    end
    -- pods of a workload share their candidate list table when they may
    -- go to the same nodes, so the table itself identifies the group
    local group = mine[pod.candidates]
    if group == nil then
      group = { workload = pod.workload, first = index, requests = pod.requests,
                candidates = pod.candidates, pods = {} }
      mine[pod.candidates] = group
      groups[#groups + 1] = group
    end
    group.pods[#group.pods + 1] = pod
  end
  table.sort(groups, function(a, b)
    if a.workload ~= b.workload then
      return a.workload < b.workload
    end
    return a.first < b.first
  end)
  return groups
end

-- The group's candidates that have room for one of its pods, best first:
-- fullest once the pod is on them, ties to the node listed first.  A group
-- places a few pods among thousands of candidates, so the candidates are
-- not sorted: they go in a binary heap (array-backed, best on top) and
-- fill() takes from the top only as far as it needs.  The heap pops them
-- in exactly the order a sort by (score, listed) would give.
local function ranked_nodes(group, room, nodes_by_name)
  local request = group.requests
  local need_gpus = whole_gpus(request.gpu)
  local names, scores = {}, {}
  local n = 0
  for _, name in ipairs(group.candidates) do
    local node = nodes_by_name[name]
    if node ~= nil then
      local gpu, cpu, memory, gpus = idle_left(room, node)
      if request.cpu <= cpu and request.memory <= memory and need_gpus <= gpus then
        n = n + 1
        names[n] = name
        scores[n] = fullness_after(node, gpu, cpu, request)
      end
    end
  end
  -- entry k was listed before entry k + 1: the tie-break is the entry's
  -- own number.  An entry goes before another when its score is higher,
  -- or equal and it was listed first; sift_down spells that comparison
  -- out (a call per comparison made the heap twice as slow).
  local heap = {}
  for k = 1, n do
    heap[k] = k
  end
  local function sift_down(at, size)
    local entry = heap[at]
    local score = scores[entry]
    while true do
      local child = 2 * at
      if child > size then
        break
      end
      -- the better of the two children
      local best, best_score = heap[child], scores[heap[child]]
      if child < size then
        local other = heap[child + 1]
        local other_score = scores[other]
        if other_score > best_score or (other_score == best_score and other < best) then
          child, best, best_score = child + 1, other, other_score
        end
      end
      if score > best_score or (score == best_score and entry < best) then
        break
      end
      heap[at] = best
      at = child
    end
    heap[at] = entry
  end
  for at = n // 2, 1, -1 do
    sift_down(at, n)
  end
  -- the ranking: top() is the best node left (nil when none), pop() drops it
  return {
    top = function()
      if n == 0 then
        return nil
      end
      return names[heap[1]]
    end,
    pop = function()
      heap[1] = heap[n]
      heap[n] = nil
      n = n - 1
      sift_down(1, n)
    end,
  }
end

-- Each pod of the group goes to the best ranked node that still has room.
-- A node that takes a pod only gets fuller, so it stays the best choice while
-- it has room: ranking once is the same as finding the fullest node for
-- every pod, at a fraction of the work.
local function fill(group, ranked, room, place, nodes_by_name)
  for _, pod in ipairs(group.pods) do
    local request = pod.requests
    local name = ranked.top()
    while name ~= nil do
      local _, cpu, memory, gpus = idle_left(room, nodes_by_name[name])
      if request.cpu <= cpu and request.memory <= memory and whole_gpus(request.gpu) <= gpus then
        break
      end
      ranked.pop()
      name = ranked.top()
    end
    if name == nil then
      return
    end
    take(request, room[name] or room_made(room, nodes_by_name, name, "idle", "idle_gpus"))
    place[pod.name] = name
  end
end

function M.reoffer(view)
  -- keeping is judged against where the AI plan ends
  -- (fits and take spelled out: a full cycle offers hundreds of
  -- thousands of running pods, and two calls per pod were a fifth of it)
  local room = {}
  local keep, kept = {}, 0
  for _, pod in ipairs(view.running) do
    local here = room[pod.node]
      or room_made(room, view.nodes_by_name, pod.node, "free_at_end", "free_gpus_at_end")
    local request = pod.requests
    local gpus = whole_gpus(request.gpu)
    if here ~= nil and request.cpu <= here.cpu and request.memory <= here.memory
      and gpus <= here.gpus then
      here.gpu = here.gpu - request.gpu
      here.cpu = here.cpu - request.cpu
      here.memory = here.memory - request.memory
      here.gpus = here.gpus - gpus
      kept = kept + 1
      keep[kept] = pod.name
    end
  end

  -- placing only in room nobody holds now (with no pending pod, the
  -- room of every node is not worth counting)
  local place = {}
  if #view.pending > 0 then
    room = {}
    for _, group in ipairs(groups_of(view.pending)) do
      fill(group, ranked_nodes(group, room, view.nodes_by_name), room, place, view.nodes_by_name)
    end
  end

  return { keep = keep, place = place }
end

return M
