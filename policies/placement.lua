--[[
placement.lua — which node an AI pod goes to.

WHAT IT DECIDES
  A score for one pod on one node.  The engine has already kept only the
  nodes the pod can run on (free resources, GPU devices, node selector,
  cordon); it calls score once for each of them and binds the pod to the
  highest score, ties broken by node name.  A score only ranks nodes: it
  cannot make an infeasible node feasible.

THE RULE (bin-packing: the fullest feasible node by GPU, then CPU)
  after    = what the node has allocated + what the pod requests
  fraction = after / capacity, per resource (0 if the node has none of it)
  score    = 1000 * gpu fraction + cpu fraction
  Filling nodes up keeps other nodes whole, for large gangs that need a full
  node and for background work.  The factor 1000 makes GPU decide and CPU
  only break ties.  engine/builtin.c is the same rule in C (the fallback if
  this policy fails); tests check both give identical scores.

CALLED AS
  score(pod, node) -> number (higher is better; must be finite)

  pod.name          pod name
  pod.workload      its workload's name
  pod.queue         its queue's name
  pod.priority      integer priority
  pod.background    boolean: a background pod (normally false here)
  pod.requests      {gpu=, cpu=, memory=}: what one pod requests
  pod.labels        {key = value}: the workload's labels

  node.name         node name
  node.pool         its node pool
  node.labels       {key = value}: only the labels that matter — those some
                    workload's node selector names and those a policy file
                    declares in `labels` (below); any other is nil
  node.capacity     {gpu=, cpu=, memory=}
  node.allocated    {gpu=, cpu=, memory=}: planned use before this pod
  node.free         {gpu=, cpu=, memory=}: capacity - allocated
  node.free_gpus    whole devices free (an integer; a device in fractional
                    use is not free)
  node.unschedulable boolean: cordoned

  Units: gpu in devices (a number: 0.5 is half a device), cpu in millicores
  and memory in bytes (integers).

  SCORES ARE CACHED BY WHAT THE VIEWS SAY, NOT BY NAME.  Pods whose views
  agree on everything but their names (same requests, labels, priority,
  queue, node selector) form one class, and so do nodes (same labels,
  capacity, allocation, cordon, background work).  The engine calls score
  once per (pod class, node class) and reuses the answer for the whole
  cycle; pod.name, pod.workload and node.name are those of the first
  member.  A score must therefore not depend on names: use labels to tell
  nodes apart.  This is what keeps a 10,000-node cycle fast.

  LABELS A POLICY READS.  To read a node label no selector names, list its
  key in `M.labels = { "zone", ... }`: node classes are keyed on the labels
  that matter, so a unique hostname label does not split them, and a
  label not declared is nil in the view.  This policy reads none.

  The same pod table is passed for every node of one pod: do not change it.
  The order of pairs() over labels differs from run to run; sort the keys
  if the order matters.
]]

local M = {}

-- How full a resource is: `used` out of `capacity`, 0 when there is none
-- (a CPU-only node has no GPU fraction to fill).
local function fraction(used, capacity)
  if capacity == 0 then
    return 0
  end
  return used / capacity
end

function M.score(pod, node)
  local gpu_after = node.allocated.gpu + pod.requests.gpu
  local cpu_after = node.allocated.cpu + pod.requests.cpu
  return 1000 * fraction(gpu_after, node.capacity.gpu) + fraction(cpu_after, node.capacity.cpu)
end

return M
