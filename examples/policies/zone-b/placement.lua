--[[
placement.lua (zone-b) — which node an AI pod goes to: zone b first.

WHAT IT DECIDES
  A score for one pod on one node, like the default policies/placement.lua
  (bin-packing), except that every node labelled zone=b outranks every
  other node.  The change an operator might make to move AI work onto
  newer hardware; docs/operations.md uses it to show a policy change
  checked and diffed on a cluster's captured state before it is reloaded.

THE RULE (zone b first, then bin-packing by GPU, then CPU)
  preferred = 1,000,000 on a node labelled zone=b, else 0
  fraction  = (allocated + requested) / capacity, per resource
  score     = preferred + 1000 * gpu fraction + cpu fraction

NODE LABELS
  It reads the label `zone`, so it declares it (docs/policies.md, "Node
  labels a policy sees"): without the declaration node.labels.zone is nil.

CALLED AS
  score(pod, node) -> number (higher is better; must be finite)
  The pod and node views are those of policies/placement.lua.
]]

local M = {labels = {"zone"}}

-- How full a resource is: `used` out of `capacity`, 0 when there is none.
local function fraction(used, capacity)
  if capacity == 0 then
    return 0
  end
  return used / capacity
end

function M.score(pod, node)
  local preferred = 0
  if node.labels.zone == "b" then
    preferred = 1000000
  end
  local gpu_after = node.allocated.gpu + pod.requests.gpu
  local cpu_after = node.allocated.cpu + pod.requests.cpu
  return preferred + 1000 * fraction(gpu_after, node.capacity.gpu) + fraction(cpu_after, node.capacity.cpu)
end

return M
