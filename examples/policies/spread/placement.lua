--[[
placement.lua (spread) — which node an AI pod goes to: the emptiest.

WHAT IT DECIDES
  A score for one pod on one node, like the default policies/placement.lua,
  but the other way round: the engine binds the pod to the highest score,
  and here the emptiest feasible node scores highest.

THE RULE (spread: the emptiest feasible node by GPU, then CPU)
  after    = what the node has allocated + what the pod requests
  fraction = after / capacity, per resource (0 if the node has none of it)
  score    = -(1000 * gpu fraction + cpu fraction)
  Spreading keeps load even across nodes (a node failure hurts fewer pods,
  pods compete less for a node's memory bandwidth and network), at the cost
  of fragmentation: a large gang may later find no whole node free.  It also
  spreads AI pods across the nodes where background work runs, so compare
  background evictions with `understory diff` before deploying it.

CALLED AS
  score(pod, node) -> number (higher is better; must be finite)
  The pod and node views are those of policies/placement.lua (see
  docs/policies.md): gpu in devices, cpu in millicores, memory in bytes.
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
  return -(1000 * fraction(gpu_after, node.capacity.gpu) + fraction(cpu_after, node.capacity.cpu))
end

return M
