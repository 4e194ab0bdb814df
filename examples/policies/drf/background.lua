-- examples/policies/drf/background.lua: a copy of policies/background.lua, unchanged (a policy
-- directory holds all three files, and policies cannot load each other).
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
     still fits in what is free on its own node.  Leaving a pod alone is
     cheaper than evicting and recreating it.
  2. Pending pods, in the order given (by name): each goes to the fullest of
     its candidate nodes that still has room, scored like placement.lua
     (1000 * gpu fraction + cpu fraction, once the pod is on it); ties go to
     the node listed first.  Packing leaves whole nodes idle for the next AI
     gang.  A pod with no room anywhere stays pending: that is the normal
     state of background work on a full cluster.
  engine/builtin.c is the same rule in C (the fallback if this policy
  fails); tests check both give identical answers.

CALLED AS
  reoffer(view) -> { keep = {pod names}, place = {[pod name] = node name} }

  view.nodes            the nodes of the pool, sorted by name; each:
    .name               node name
    .labels             {key = value}
    .capacity           {gpu=, cpu=, memory=}
    .free               {gpu=, cpu=, memory=}: idle once the AI plan and
                        the pods still terminating are counted; running
                        background pods are NOT counted: they are what this
                        policy decides about
    .free_gpus          whole devices free, same accounting (an integer)
  view.nodes_by_name    the same node tables, keyed by name
  view.running          background pods on nodes (running, or pipelined), by name; each:
    .name, .workload    pod and workload names
    .node               name of the node it is on
    .requests           {gpu=, cpu=, memory=}
    .priority           integer
    .labels             {key = value}: the workload's labels
  view.pending          background pods waiting for a node, by name; each:
    .name, .workload, .requests, .priority, .labels   as above
    .candidates         names of the nodes it may go to (node selector,
                        daemonset pin and cordon already applied), sorted

  Units: gpu in devices, cpu in millicores, memory in bytes.  Background
  pods request whole GPUs.

RETURNS
  keep   a list of names of running pods that stay; every other running pod
         is evicted.
  place  pending pod name -> one of its candidate node names.  Pods not
         named stay pending.
  The engine checks the result (no node over capacity, a kept pod stays on
  its node, a placed pod goes to a candidate); a result that breaks a rule
  is rejected and the built-in policy is used for that cycle.
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

-- What is free on each node, as a table we can subtract from as pods are
-- kept and placed (the view itself is left as it was given).
local function free_room(nodes)
  local room = {}
  for _, node in ipairs(nodes) do
    room[node.name] = {
      gpu = node.free.gpu,
      cpu = node.free.cpu,
      memory = node.free.memory,
      gpus = node.free_gpus,
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

function M.reoffer(view)
  local room = free_room(view.nodes)

  local keep = {}
  for _, pod in ipairs(view.running) do
    local here = room[pod.node]
    if here ~= nil and fits(pod.requests, here) then
      take(pod.requests, here)
      keep[#keep + 1] = pod.name
    end
  end

  local place = {}
  for _, pod in ipairs(view.pending) do
    local best_node, best_score = nil, nil
    for _, name in ipairs(pod.candidates) do
      local there = room[name]
      if there ~= nil and fits(pod.requests, there) then
        local score = fullness_after(view.nodes_by_name[name], there, pod.requests)
        -- strictly better only: on a tie the node listed first wins
        if best_score == nil or score > best_score then
          best_node, best_score = name, score
        end
      end
    end
    if best_node ~= nil then
      take(pod.requests, room[best_node])
      place[pod.name] = best_node
    end
  end

  return { keep = keep, place = place }
end

return M
