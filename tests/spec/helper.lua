-- helper.lua — building scenarios and reading simulator output in specs.
--
-- Specs drive the real engine through the Lua module (require "understory")
-- with the default Lua policies in policies/, and read the output document
-- of docs/scenario.md ("The output document").
local understory = require "understory"

local H = {}

H.understory = understory

-- A queue that may hold background work: quota 0 and weight 0 everywhere.
function H.bg_queue(name)
  local zero = { quota = 0, over_quota_weight = 0, limit = -1 }
  return { name = name or "infra-bg",
           resources = { gpu = zero, cpu = zero, memory = zero } }
end

function H.queue(name, gpu_quota, extra)
  local q = { name = name, resources = { gpu = { quota = gpu_quota, over_quota_weight = 1 } } }
  for k, v in pairs(extra or {}) do q[k] = v end
  return q
end

function H.node(name, gpu, extra)
  local n = { name = name, cpu = "64", memory = "512Gi", gpu = gpu or 8 }
  for k, v in pairs(extra or {}) do n[k] = v end
  return n
end

-- A background workload in queue infra-bg with a 5 s grace period.
function H.bg(name, fields)
  local w = { name = name, queue = "infra-bg", termination_grace = 5,
              labels = { ["kai.scheduler/background"] = "true" } }
  for k, v in pairs(fields or {}) do w[k] = v end
  return w
end

function H.run(scenario, opts)
  opts = opts or {}
  if opts.policies == nil then opts.policies = "policies" end
  if opts.policies == false then opts.policies = nil end
  return understory.simulate(scenario, opts)
end

-- The document without the ids of the policies that ran (top level and per
-- cycle), to compare what two policy versions decided.
function H.without_policy_ids(out)
  out.policy = nil
  for _, c in ipairs(out.cycles) do c.policy = nil end
  return out
end

-- Every decision of the run, each with the cycle's number and time added.
function H.decisions(out, pred)
  local list = {}
  for _, c in ipairs(out.cycles) do
    for _, d in ipairs(c.decisions or {}) do
      local copy = { cycle = c.cycle, time = c.time }
      for k, v in pairs(d) do copy[k] = v end
      if not pred or pred(copy) then list[#list + 1] = copy end
    end
  end
  return list
end

function H.events(out, pred)
  local list = {}
  for _, c in ipairs(out.cycles) do
    for _, e in ipairs(c.events or {}) do
      local copy = { cycle = c.cycle, time = c.time }
      for k, v in pairs(e) do copy[k] = v end
      if not pred or pred(copy) then list[#list + 1] = copy end
    end
  end
  return list
end

-- Final pods of a workload (all incarnations), or the one named name that
-- is not releasing.
function H.final_pods(out, workload)
  local list = {}
  for _, p in ipairs(out.final.pods) do
    if p.workload == workload then list[#list + 1] = p end
  end
  return list
end

function H.final_pod(out, name)
  for _, p in ipairs(out.final.pods) do
    if p.name == name and p.state ~= "releasing" then return p end
  end
end

function H.queue_figures(out, name)
  for _, q in ipairs(out.final.queues) do
    if q.name == name then return q end
  end
end

-- Decisions about AI pods only, as "op pod node" strings (bind and pipeline
-- both count as a placement "place").
function H.ai_placements(out, ai_workloads)
  local set, list = {}, {}
  for _, w in ipairs(ai_workloads) do set[w] = true end
  for _, d in ipairs(H.decisions(out)) do
    local wl = d.pod:match("^(.*)%-[^-]+$")
    if set[wl] and (d.op == "bind" and d.action or d.op == "pipeline") then
      list[#list + 1] = string.format("t=%g place %s %s", d.time, d.pod, d.node)
    end
  end
  return list
end

function H.count(list) return #list end

function H.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A policy directory in a fresh temporary folder: the default policies,
-- with the files named in overrides ({["placement.lua"] = source}) replaced.
function H.policy_dir(overrides)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  for _, name in ipairs({ "fairshare.lua", "placement.lua", "background.lua" }) do
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(overrides[name] or H.read("policies/" .. name))
    f:close()
  end
  return dir
end

function H.remove_dir(dir) os.execute("rm -rf '" .. dir .. "'") end

return H
