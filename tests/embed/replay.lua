-- replay.lua — drives a scenario file through the Lua module's engine
-- object the way the simulator drives it, and prints every cycle's
-- decisions and events as replay.c does, for
-- tests/cli/embed-equivalence.sh.
--
--   lua5.4 tests/embed/replay.lua SCENARIO.json [POLICIES_DIR]
--
-- Tables in, tables out: the scenario's objects go to the engine as they
-- are, less the simulator's own fields.
local understory = require "understory"

local path, policies = arg[1], arg[2]
local f = assert(io.open(path, "rb"))
local doc = understory.json_decode(f:read("a"))
f:close()

local e <close> = understory.engine { policies = policies, long_grace = 30 }
local out = {}
local function line(s) out[#out + 1] = s end

local function g(x) -- numbers as C's %g prints them
  return string.format("%g", x)
end

local drive = dofile((arg[0]:match("^(.*)/") or ".") .. "/drive.lua")
drive(e, doc, path, function(t, r)
  for _, d in ipairs(r.decisions) do
    local s = string.format("t=%s %s %s %s", g(t), d.op, d.pod, d.node or "-")
    if d.action then s = s .. " action=" .. d.action end
    if d.evictor then s = s .. " evictor=" .. d.evictor end
    if d.waits_for then s = s .. " waits=" .. table.concat(d.waits_for, ",") end
    line(s)
  end
  for _, ev in ipairs(r.events) do
    local s = string.format('t=%s event %s %s %s "%s"', g(t), ev.type, ev.reason, ev.object,
                            ev.message)
    -- annotations in the engine's order: the three keys an Evict carries
    local keys = { "evictor-action-type", "num-evicted-pods", "evictor-pod-group-name" }
    local seen = {}
    for _, k in ipairs(keys) do
      if ev.annotations and ev.annotations[k] then
        s = s .. " " .. k .. "=" .. ev.annotations[k]
        seen[k] = true
      end
    end
    local rest = {}
    for k, v in pairs(ev.annotations or {}) do
      if not seen[k] then rest[#rest + 1] = k .. "=" .. v end
    end
    table.sort(rest)
    if #rest > 0 then s = s .. " " .. table.concat(rest, " ") end
    line(s)
  end
end)
io.write(table.concat(out, "\n"), #out > 0 and "\n" or "")
