-- labels_spec.lua — what a policy sees of a node's labels.  A node view
-- carries the labels some workload's node selector names and the labels the
-- policy declares it reads (`labels = {...}` in the table a policy file
-- returns); any other label (a unique hostname, an instance id) is not in
-- the view, so node classes can ignore it and a policy cannot depend on it.
local H = require "tests.spec.helper"

-- A placement policy that fails on purpose, naming what it saw: the
-- PolicyFailed event carries the message, the built-in takes over.
local function reporter(declare)
  return "local M = {}\n" .. (declare and ("M.labels = " .. declare .. "\n") or "") ..
         "function M.score(pod, node)\n" ..
         "  error(string.format('zone=%s rack=%s host=%s', tostring(node.labels.zone),\n" ..
         "    tostring(node.labels.rack), tostring(node.labels['kubernetes.io/hostname'])))\n" ..
         "end\nreturn M\n"
end

-- Prefer rack r2 when the policy can see racks; else every node scores 0
-- and the name decides (n1).
local function rack_lover(declare)
  return "local M = {}\n" .. (declare and ("M.labels = " .. declare .. "\n") or "") ..
         "function M.score(pod, node)\n  if node.labels.rack == 'r2' then return 10 end\n  return 0\nend\nreturn M\n"
end

local function scenario()
  local function labels(i)
    return { zone = "a", rack = "r" .. i, ["kubernetes.io/hostname"] = "n" .. i }
  end
  return {
    name = "labels", cycle_interval = 10, horizon = 10,
    nodes = { H.node("n1", 8, { labels = labels(1) }), H.node("n2", 8, { labels = labels(2) }) },
    queues = { H.queue("ml", 16) },
    workloads = { { name = "job", queue = "ml", requests = { gpu = 1 }, node_selector = { zone = "a" } } },
  }
end

local function run_with(placement)
  local dir = H.policy_dir({ ["placement.lua"] = placement })
  local ok, out = pcall(H.run, scenario(), { policies = dir })
  H.remove_dir(dir)
  return ok, out
end

local function failure_message(out)
  local ev = H.events(out, function(e) return e.reason == "PolicyFailed" end)
  assert.are.equal(1, #ev)
  return ev[1].message
end

local function node_of(out, pod)
  local d = H.decisions(out, function(x) return x.pod == pod end)
  assert.are.equal(1, #d)
  return d[1].node
end

describe("a policy's view of node labels", function()
  it("has the labels a node selector names, and nil for an undeclared label", function()
    local ok, out = run_with(reporter(nil))
    assert.is_true(ok, tostring(out))
    local msg = failure_message(out)
    assert.truthy(msg:find("zone=a rack=nil host=nil", 1, true), msg)
  end)

  it("has the labels the policy declares", function()
    local ok, out = run_with(reporter('{"rack"}'))
    assert.is_true(ok, tostring(out))
    local msg = failure_message(out)
    assert.truthy(msg:find("zone=a rack=r1 host=nil", 1, true), msg)
  end)

  it("decides by a declared label, and cannot by an undeclared one", function()
    local ok, out = run_with(rack_lover('{"rack"}'))
    assert.is_true(ok, tostring(out))
    assert.are.equal("n2", node_of(out, "job-0"))
    ok, out = run_with(rack_lover(nil))
    assert.is_true(ok, tostring(out))
    -- rack is nil on both: equal scores, the name decides
    assert.are.equal("n1", node_of(out, "job-0"))
  end)

  it("rejects a declaration that is not a list of label keys, naming the file", function()
    for _, bad in ipairs({ '"rack"', "{1}", '{"rack", ""}', "{true}" }) do
      local ok, err = run_with(rack_lover(bad))
      assert.is_false(ok, bad)
      assert.truthy(tostring(err):find("placement.lua: labels", 1, true), tostring(err))
    end
  end)
end)
