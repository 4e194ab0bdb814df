-- Read the engine's state from Lua (docs/embedding.md, "Lua walk-through"):
-- GPU use, why workloads wait, the cycle's phases, the state as a scenario.
local understory = require "understory"
local e <close> = understory.engine { policies = "policies" }
e:upsert_node { name = "n1", gpu = 8 }
e:upsert_queue { name = "team", resources = { gpu = { quota = 8 } } }
e:upsert_workload({ name = "train", queue = "team", replicas = 2, requests = { gpu = 4 } }, 0)
e:upsert_workload({ name = "eval", queue = "team", requests = { gpu = 4 } }, 0)
e:run_cycle(0)

local g = e:gpu_use()                       -- GPUs held now, by kind
print(string.format("gpu: capacity %g, ai %g, background %g, external %g, idle %g",
                    g.capacity, g.ai, g.background, g.external, g.idle))
for _, w in ipairs(e:workloads()) do        -- pending_reason nil: none of its pods waits
  print(w.name .. ": " .. (w.pending_reason or "-"))
end
local names = {}
for _, ph in ipairs(e:cycle_phases()) do names[#names + 1] = ph.name end
print("phases: " .. table.concat(names, " "))   -- each with ph.seconds (wall clock)

-- the state as a scenario document: understory simulate runs it
local doc = understory.json_decode(e:state_json())
for _, w in ipairs(doc.workloads) do
  print(string.format("%s: %d of %d replicas placed", w.name, #(w.pods or {}), w.replicas))
end
