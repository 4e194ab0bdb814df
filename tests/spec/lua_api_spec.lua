-- lua_api_spec.lua — the Lua module keeps up with the C API.  Every public
-- function of bindings/understory.h and every field of us_engine_options
-- must have its Lua counterpart below, or be one of the documented
-- exceptions (docs/embedding.md, "Lua walk-through"); a function or option
-- added to the header without either fails here, naming it.  Each
-- counterpart is checked to exist in the module as loaded.
local H = require "tests.spec.helper"
local understory = H.understory

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local header = read("bindings/understory.h")

-- Where each C function is in Lua: a method of the engine object (e:NAME),
-- a field of the module (understory.NAME), or a field of what a method
-- returns (checked where they are exercised: embed_spec, engine_state_spec).
local method, module, field = "method", "module", "field"
local counterpart = {
  us_version = { module, "version" },
  us_engine_create = { module, "engine" },
  us_engine_destroy = { method, "close" },
  us_engine_load_policies = { method, "load_policies" },
  us_engine_reload_policies = { method, "reload_policies" },
  us_engine_policy_id = { method, "policy_id" },
  us_engine_upsert_node_json = { method, "upsert_node" },
  us_engine_remove_node = { method, "remove_node" },
  us_engine_upsert_queue_json = { method, "upsert_queue" },
  us_engine_remove_queue = { method, "remove_queue" },
  us_engine_upsert_workload_json = { method, "upsert_workload" },
  us_engine_remove_workload = { method, "remove_workload" },
  us_engine_complete_workload = { method, "complete_workload" },
  us_engine_upsert_pod_json = { method, "upsert_pod" },
  us_engine_remove_pod = { method, "remove_pod" },
  us_engine_run_cycle = { method, "run_cycle" },
  us_engine_time = { method, "time" },
  us_engine_cycle_count = { method, "cycle_count" },
  us_engine_decision_count = { field, "run_cycle", "decisions" },
  us_engine_decision = { field, "run_cycle", "decisions" },
  us_engine_event_count = { field, "run_cycle", "events" },
  us_engine_event = { field, "run_cycle", "events" },
  us_engine_policy_log_count = { field, "run_cycle", "log" },
  us_engine_policy_log = { field, "run_cycle", "log" },
  us_engine_policy_log_dropped = { field, "run_cycle", "log_dropped" },
  us_engine_on_event = { method, "on_event" },
  us_engine_pod_count = { method, "pods" },
  us_engine_pod = { method, "pods" },
  us_engine_node_count = { method, "nodes" },
  us_engine_node = { method, "nodes" },
  us_engine_node_named = { method, "node" },
  us_engine_queue_count = { method, "queues" },
  us_engine_queue = { method, "queues" },
  us_engine_workload_count = { method, "workloads" },
  us_engine_workload = { method, "workloads" },
  us_engine_workload_pending_reason = { field, "workloads", "pending_reason" },
  us_engine_gpu_use = { method, "gpu_use" },
  us_engine_cycle_phase_count = { method, "cycle_phases" },
  us_engine_cycle_phase = { method, "cycle_phases" },
  us_engine_cycle_reuse = { method, "cycle_reuse" },
  us_engine_state_json = { method, "state_json" },
}

-- No Lua counterpart, and why (the same list is in docs/embedding.md).
local exception = {
  us_strerror = "errors are raised as Lua errors carrying the message",
  us_free = "state_json returns a Lua string; the module frees the C text",
  us_engine_options_init = "options are a table; absent keys take the defaults",
  us_queue_spec_init = "specs are tables; absent keys take the defaults",
  us_workload_spec_init = "specs are tables; absent keys take the defaults",
  us_engine_upsert_node = "the module passes tables as JSON: upsert_node is the _json call",
  us_engine_upsert_queue = "the module passes tables as JSON: upsert_queue is the _json call",
  us_engine_upsert_workload = "the module passes tables as JSON: upsert_workload is the _json call",
  us_engine_upsert_pod = "the module passes tables as JSON: upsert_pod is the _json call",
}

-- us_engine_options fields as understory.engine{...} options, each with a
-- value it accepts.
local option = {
  policies = { "policies", "policies" },
  plain_ties = { "plain_ties", true },
  long_grace = { "long_grace", 60 },
  instructions = { "instructions", 1000000 },
  memory = { "memory", "32Mi" },
  check_invariants = { "check_invariants", true },
  time_limit_ms = { "time_limit", 200 },
  cycle_budget = { "cycle_budget", 2.5 },
  full_cycles = { "full_cycles", true },
  reported_pods = { "reported_pods", true },
}

local function public_functions()
  local list = {}
  for name in header:gmatch("US_API[^;{]-[%s%*](us_[%w_]+)%s*%(") do list[#list + 1] = name end
  return list
end

local function option_fields()
  local body = assert(header:match("typedef struct us_engine_options%s*(%b{})"))
  body = body:gsub("/%*.-%*/", "")
  local list = {}
  for decl in body:sub(2, -2):gmatch("[^;]+") do
    for name in decl:gmatch("([%a_][%w_]*)%s*,") do list[#list + 1] = name end
    local last = decl:match("([%a_][%w_]*)%s*$")
    if last then list[#list + 1] = last end
  end
  return list
end

describe("the Lua module against bindings/understory.h", function()
  it("reads the header (a vacuous list would pass anything)", function()
    local fns = public_functions()
    assert.is_true(#fns >= 45, "only " .. #fns .. " functions found")
    local found = {}
    for _, f in ipairs(fns) do found[f] = true end
    assert.is_true(found.us_engine_state_json and found.us_version and found.us_free)
    assert.are.same({ "policies", "plain_ties", "long_grace", "instructions", "memory",
                      "check_invariants", "time_limit_ms", "cycle_budget", "full_cycles",
                      "reported_pods" },
                    option_fields())
  end)

  it("has a counterpart for every public function, or a documented exception", function()
    local missing = {}
    for _, f in ipairs(public_functions()) do
      if not counterpart[f] and not exception[f] then missing[#missing + 1] = f end
    end
    assert.are.same({}, missing)
  end)

  it("lists no function the header no longer has", function()
    local have, stale = {}, {}
    for _, f in ipairs(public_functions()) do have[f] = true end
    for f in pairs(counterpart) do if not have[f] then stale[#stale + 1] = f end end
    for f in pairs(exception) do if not have[f] then stale[#stale + 1] = f end end
    table.sort(stale)
    assert.are.same({}, stale)
  end)

  it("has every counterpart it names", function()
    local e <close> = understory.engine()
    local methods = getmetatable(e).__index
    local absent = {}
    for f, c in pairs(counterpart) do
      local ok
      if c[1] == method then
        ok = type(methods[c[2]]) == "function"
      elseif c[1] == module then
        ok = understory[c[2]] ~= nil
      else
        ok = type(methods[c[2]]) == "function"
      end
      if not ok then absent[#absent + 1] = f .. " -> " .. c[2] end
    end
    table.sort(absent)
    assert.are.same({}, absent)
    -- the fields named: from a cycle that has a workload
    e:upsert_node(H.node("n1"))
    e:upsert_queue(H.queue("team", 8))
    e:upsert_workload({ name = "w", queue = "team", replicas = 2, requests = { gpu = 8 } }, 0)
    local got = { run_cycle = e:run_cycle(0), workloads = e:workloads()[1] }
    for f, c in pairs(counterpart) do
      if c[1] == field then
        assert.is_not_nil(got[c[2]][c[3]], f .. " -> " .. c[2] .. "()." .. c[3])
      end
    end
  end)

  it("accepts every engine option", function()
    local missing = {}
    for _, f in ipairs(option_fields()) do
      local o = option[f]
      if not o then
        missing[#missing + 1] = f
      else
        local e <close> = understory.engine { [o[1]] = o[2] }
        assert.are.equal(0, e:cycle_count())
      end
    end
    assert.are.same({}, missing)
    -- and refuses one it does not know, listing the ones it does
    local ok, msg = pcall(understory.engine, { full_cycle = true })
    assert.is_false(ok)
    for _, o in pairs(option) do assert.is_truthy(msg:find(o[1], 1, true), o[1]) end
  end)
end)
