-- reoffer_spec.lua — what background.lua is offered.  Running background
-- pods are offered only on nodes the AI plan changed this cycle; pods
-- elsewhere stay as they are, whatever the policy would say about them.
local H = require "tests.spec.helper"


describe("background re-offer", function()
  it("offers running pods only on nodes the AI plan changed", function()
    -- a policy that keeps nothing it is offered and places nothing, and
    -- fails outright if it is ever offered n2's agent
    local dir = H.policy_dir({ ["background.lua"] = [[
      local M = {}
      function M.reoffer(view)
        for _, p in ipairs(view.running) do
          if p.node == "n2" then error("offered " .. p.name) end
        end
        return { keep = {}, place = {} }
      end
      return M
    ]] })
    local out = H.run({
      name = "offered", cycle_interval = 10, horizon = 20,
      nodes = { H.node("n1", 8), H.node("n2", 8) },
      queues = { H.queue("ml", 16), H.bg_queue() },
      workloads = {
        H.bg("agent", { controller = "daemonset", requests = { cpu = "40" },
                        pods = { { node = "n1", state = "running" },
                                 { node = "n2", state = "running" } } }),
        { name = "train", queue = "ml", requests = { gpu = 1, cpu = "40" }, submit_at = 10,
          node_selector = {} },
      },
    }, { policies = dir, plain_ties = true })
    H.remove_dir(dir)
    -- at t=0 nothing changed: both agents stay, though the policy keeps none
    assert.are.equal(0, #H.decisions(out, function(d) return d.time == 0 end))
    -- at t=10 train lands on n1 (ties by name): only n1's agent was offered,
    -- and the policy evicted it (40 + 40 cores > 64); n2's agent was never
    -- offered, or the policy would have failed
    local ev = H.decisions(out, function(d) return d.op == "evict" end)
    assert.are.equal(1, #ev)
    assert.are.equal("agent-n1", ev[1].pod)
    assert.are.equal("running", H.final_pod(out, "agent-n2").state)
    assert.are.same({}, H.events(out, function(e) return e.reason == "PolicyFailed" end))
  end)
end)
