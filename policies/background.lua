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

-- Room on each node, as a table we can subtract from as pods are kept or
-- placed (the view itself is left as it was given): `which` names the
-- node field (free_at_end or idle), `which_gpus` its device count.
local function room_of(nodes, which, which_gpus)
  local room = {}
  for _, node in ipairs(nodes) do
    room[node.name] = {
      gpu = node[which].gpu,
      cpu = node[which].cpu,
      memory = node[which].memory,
      gpus = node[which_gpus],
    }
  end
  return room
end

local function fits(request, room)
  return request.cpu <= room.cpu
    and request.memory <= room.memory
    and whole_gpus(request.gpu) <= room.gpus
end

local function take(request, room)
  room.gpu = room.gpu - request.gpu
  room.cpu = room.cpu - request.cpu
  room.memory = room.memory - request.memory
  room.gpus = room.gpus - whole_gpus(request.gpu)
end

-- The placement score of a node once the pod is on it: fuller is better.
local function fullness_after(node, room, request)
  local gpu_after = (node.capacity.gpu - room.gpu) + request.gpu
  local cpu_after = (node.capacity.cpu - room.cpu) + request.cpu
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

-- The group's candidates that have room for one of its pods, fullest first
-- (once the pod is on them); ties go to the node listed first.
local function ranked_nodes(group, room, nodes_by_name)
  local ranked = {}
  for listed, name in ipairs(group.candidates) do
    local there = room[name]
    if there ~= nil and fits(group.requests, there) then
      ranked[#ranked + 1] = {
        name = name,
        listed = listed,
        score = fullness_after(nodes_by_name[name], there, group.requests),
      }
    end
  end
  table.sort(ranked, function(a, b)
    if a.score ~= b.score then
      return a.score > b.score
    end
    return a.listed < b.listed
  end)
  return ranked
end

-- Each pod of the group goes to the first ranked node that still has room.
-- A node that takes a pod only gets fuller, so it stays the best choice while
-- it has room: ranking once is the same as finding the fullest node for
-- every pod, at a fraction of the work.
local function fill(group, ranked, room, place)
  local at = 1
  for _, pod in ipairs(group.pods) do
    while at <= #ranked and not fits(pod.requests, room[ranked[at].name]) do
      at = at + 1
    end
    if at > #ranked then
      return
    end
    take(pod.requests, room[ranked[at].name])
    place[pod.name] = ranked[at].name
  end
end

function M.reoffer(view)
  -- keeping is judged against where the AI plan ends
  local room = room_of(view.nodes, "free_at_end", "free_gpus_at_end")
  local keep = {}
  for _, pod in ipairs(view.running) do
    local here = room[pod.node]
    if here ~= nil and fits(pod.requests, here) then
      take(pod.requests, here)
      keep[#keep + 1] = pod.name
    end
  end

  -- placing only in room nobody holds now (with no pending pod, the
  -- room of every node is not worth counting)
  local place = {}
  if #view.pending > 0 then
    room = room_of(view.nodes, "idle", "idle_gpus")
    for _, group in ipairs(groups_of(view.pending)) do
      fill(group, ranked_nodes(group, room, view.nodes_by_name), room, place)
    end
  end

  return { keep = keep, place = place }
end

return M
