-- tests/docs/doctest.lua — runs the commands that README.md and docs/*.md
-- show, and checks the output they show, so that no snippet rots.
--
-- Usage: lua5.4 tests/docs/doctest.lua ROOT UNDERSTORY FILE.md...
-- (tests/run.sh calls it; ROOT is the repository, UNDERSTORY the binary that
-- `understory` means in a console block).
--
-- What a document may hold, and what is checked:
--   ```console   lines starting with "$ " are commands, run in order by one
--                bash (so `echo $?` shows the previous command's status);
--                the lines after a command, up to the next "$ ", are what it
--                prints (stdout and stderr together).  A line "..." stands
--                for any number of lines; a line ending in "..." matches any
--                line that starts with what precedes it.  The shown lines
--                must appear in that order, contiguously but for "...";
--                a block of output may start anywhere in the real output
--                when its first line is "...".
--   ```sh        a script, run by bash with `set -e`: it must exit 0.
--   other blocks (```lua, ```json, ```c, plain ```) are not run, unless
--                the line before them is a directive (below).
-- Directives, an HTML comment on the line before the fence:
--   <!-- doctest: skip: REASON -->    do not run this block (say why)
--   <!-- doctest: file: PATH -->      the block is the text of PATH, byte
--                                     for byte but for surrounding blank lines
--   <!-- doctest: internals -->       (anywhere in a file) the file describes
--                                     engine internals: the us_ names it
--                                     mentions are looked up in engine/*.h
-- And in every document: each `us_...` name must be public (declared in
-- bindings/understory.h) or, in an internals document, exist in engine/*.h;
-- each `understory.NAME` must be a field of the Lua module.
--
-- Every document runs in a scratch copy of the repository's tracked files
-- (build/ linked in, ./understory copied from UNDERSTORY), with HOME set to a scratch directory, so that
-- `make install PREFIX=$HOME/...` or `cc ... -o prog` leave nothing behind.
-- Prints one line per block and, last, "N passed, N failed".
--
-- With DOCTEST_UPDATE=1 in the environment, a console command whose shown
-- output has no "..." line and does not match is rewritten in the document
-- with what it printed (then read `git diff`: the change is yours to judge).

local ROOT, UNDERSTORY = arg[1], arg[2]
local files = {}
for i = 3, #arg do files[#files + 1] = arg[i] end
assert(ROOT and UNDERSTORY and #files > 0, "usage: doctest.lua ROOT UNDERSTORY FILE.md...")

local passed, failed = 0, 0
local UPDATE = os.getenv("DOCTEST_UPDATE") == "1"
local updates = {}   -- {at = first line after the command, count, text}

local function sh_quote(s)
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function read_file(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s
end

local function write_file(path, s)
    local f = assert(io.open(path, "wb"))
    f:write(s)
    f:close()
end

local function run(cmd)
    local p = io.popen(cmd .. " 2>&1", "r")
    local out = p:read("a")
    local ok, _, code = p:close()
    return out, ok and 0 or code
end

local function report(ok, where, what, detail)
    if ok then
        passed = passed + 1
        print(string.format("ok    %s  %s", where, what))
    else
        failed = failed + 1
        print(string.format("FAIL  %s  %s", where, what))
        if detail then print((detail:gsub("\n?$", "\n"):gsub("([^\n]*)\n", "      | %1\n"))) end
    end
end

-- ---- parsing -----------------------------------------------------------

-- Blocks of a markdown text: {lang, line, lines = {...}, directive}.
local function parse(text)
    local blocks, lines = {}, {}
    for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
    local i = 1
    while i <= #lines do
        local indent, lang = lines[i]:match("^(%s*)```(%S*)%s*$")
        if indent then
            local directive = i > 1 and lines[i - 1]:match("^%s*<!%-%- doctest: (.-) %-%->%s*$")
            local b = { lang = lang, line = i, lines = {}, directive = directive }
            i = i + 1
            while i <= #lines and not lines[i]:match("^%s*```%s*$") do
                b.lines[#b.lines + 1] = lines[i]:sub(#indent + 1)
                i = i + 1
            end
            blocks[#blocks + 1] = b
        end
        i = i + 1
    end
    return blocks, lines
end

-- ---- output matching ---------------------------------------------------

local function rstrip(s) return (s:gsub("%s+$", "")) end

local function line_matches(want, got)
    want, got = rstrip(want), rstrip(got)
    local prefix = want:match("^(.-)%.%.%.$")
    if prefix and want ~= "..." then return got:sub(1, #prefix) == prefix end
    return want == got
end

-- Does want (lines, with "..." gaps) match got (lines) from position gi on?
local function match_from(want, wi, got, gi)
    while wi <= #want do
        if rstrip(want[wi]) == "..." then
            if wi == #want then return true end
            for k = gi, #got do
                if match_from(want, wi + 1, got, k) then return true end
            end
            return false
        end
        if gi > #got or not line_matches(want[wi], got[gi]) then return false end
        wi, gi = wi + 1, gi + 1
    end
    return gi > #got
end

local function output_matches(want, got_text)
    local got = {}
    for l in got_text:gmatch("([^\n]*)\n") do got[#got + 1] = l end
    if got_text ~= "" and got_text:sub(-1) ~= "\n" then
        got[#got + 1] = got_text:match("([^\n]*)$")
    end
    -- Trailing blank lines on either side carry no meaning.
    while #want > 0 and rstrip(want[#want]) == "" do want[#want] = nil end
    while #got > 0 and rstrip(got[#got]) == "" do got[#got] = nil end
    return match_from(want, 1, got, 1)
end

-- ---- running blocks ----------------------------------------------------

local function run_console(block, dir, env)
    local cmds = {}
    for i, l in ipairs(block.lines) do
        local c = l:match("^%$ (.*)$")
        if c then
            cmds[#cmds + 1] = { cmd = c, want = {}, at = block.line + i }
        elseif #cmds > 0 then
            local w = cmds[#cmds].want
            w[#w + 1] = l
        end
    end
    if #cmds == 0 then return false, "a console block with no \"$ \" command" end
    -- One bash runs them all; a record separator before each command marks
    -- where its output starts, and `(exit $s)` keeps $? for `echo $?`.
    local script = { "cd " .. sh_quote(dir), "s=0" }
    for k, c in ipairs(cmds) do
        script[#script + 1] = string.format("printf '\\036%d\\n'; (exit $s); %s\ns=$?", k, c.cmd)
    end
    write_file(dir .. "/.doctest.sh", table.concat(script, "\n") .. "\n")
    local out = run(env .. " bash " .. sh_quote(dir .. "/.doctest.sh") .. " </dev/null")
    local pieces = {}
    for k, piece in (out .. "\030"):gmatch("\030(%d+)\n(.-)%f[\030]") do
        pieces[tonumber(k)] = piece
    end
    for k, c in ipairs(cmds) do
        local got = pieces[k]
        if got == nil then
            return false, string.format("$ %s: did not run; output so far:\n%s", c.cmd, out)
        end
        local nwant = #c.want
        if not output_matches(c.want, got) then
            local elided = false
            for _, w in ipairs(c.want) do elided = elided or rstrip(w):match("%.%.%.$") ~= nil end
            if UPDATE and not elided then
                updates[#updates + 1] = { at = c.at, count = nwant, text = got }
            else
                return false, string.format("$ %s\nshown:\n%s\nprinted:\n%s", c.cmd,
                    table.concat(c.want, "\n"), got)
            end
        end
    end
    return true
end

local function run_sh(block, dir, env)
    write_file(dir .. "/.doctest.sh",
        "set -e\ncd " .. sh_quote(dir) .. "\n" .. table.concat(block.lines, "\n") .. "\n")
    local out, code = run(env .. " bash " .. sh_quote(dir .. "/.doctest.sh") .. " </dev/null")
    if code ~= 0 then return false, string.format("exit status %d:\n%s", code, out) end
    return true
end

local function check_file_block(block, dir, path)
    local text = read_file(dir .. "/" .. path)
    if not text then return false, path .. ": no such file" end
    local shown = table.concat(block.lines, "\n")
    if rstrip(text):gsub("^\n+", "") ~= rstrip(shown):gsub("^\n+", "") then
        return false, "the block differs from " .. path
    end
    return true
end

-- ---- names -------------------------------------------------------------

local function word_set(text, pattern)
    local set = {}
    for w in text:gmatch(pattern) do set[w] = true end
    return set
end

local public = word_set(read_file(ROOT .. "/bindings/understory.h") or "", "us_[%w_]+")
local internal = {}
for h in io.popen("ls " .. sh_quote(ROOT) .. "/engine/*.h"):lines() do
    for w in pairs(word_set(read_file(h) or "", "us_[%w_]+")) do internal[w] = true end
end
local lua_fields = {}
do
    local cpath = ROOT .. "/build/release/lua/?.so"
    local out = run("LUA_CPATH=" .. sh_quote(cpath) .. " lua5.4 -e " ..
        sh_quote("for k in pairs(require 'understory') do print(k) end"))
    for l in out:gmatch("[^\n]+") do lua_fields[l] = true end
end

local function check_names(file, text)
    local internals = text:find("<!%-%- doctest: internals %-%->") ~= nil
    local lineno = 0
    for l in (text .. "\n"):gmatch("([^\n]*)\n") do
        lineno = lineno + 1
        -- us_ alone (the prefix, spoken of) is not a name; nor is the end
        -- of another identifier (free_gpus_at_end).
        for w in l:gmatch("%f[%w_]us_[%w_]*[%w]") do
            local ok = public[w] or (internals and internal[w])
            if not ok then
                report(false, string.format("%s:%d", file, lineno),
                    string.format("`%s` is %s", w, internal[w] and
                        "internal to the engine (not in bindings/understory.h)" or "not a name the code has"))
            end
        end
        for w in l:gmatch("%f[%w_]understory%.([%a_][%w_]*)") do
            if not lua_fields[w] and not l:find("understory%." .. w .. "%.") and
               not ({ json = 1, yaml = 1, h = 1, pc = 1, so = 1, md = 1 })[w] then
                report(false, string.format("%s:%d", file, lineno),
                    string.format("`understory.%s` is not a function of the Lua module", w))
            end
        end
    end
end

-- ---- main --------------------------------------------------------------

local scratch_root = assert(run("mktemp -d ${TMPDIR:-/tmp}/understory-doctest.XXXXXX"):match("^(%S+)"))
local bin = scratch_root .. "/bin"
assert(run("mkdir -p " .. sh_quote(bin) .. " && ln -s " .. sh_quote(UNDERSTORY) .. " " ..
    sh_quote(bin .. "/understory")))

for fi, file in ipairs(files) do
    local text = assert(read_file(ROOT .. "/" .. file), file .. ": cannot read")
    check_names(file, text)
    local dir = string.format("%s/repo%d", scratch_root, fi)
    local home = string.format("%s/home%d", scratch_root, fi)
    local _, code = run(string.format(
        "mkdir -p %s %s && cd %s && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C %s && ln -s %s %s && cp -p %s %s",
        sh_quote(dir), sh_quote(home), sh_quote(ROOT), sh_quote(dir),
        sh_quote(ROOT .. "/build"), sh_quote(dir .. "/build"),
        sh_quote(UNDERSTORY), sh_quote(dir .. "/understory")))
    assert(code == 0, "cannot copy the repository")
    local env = string.format("env HOME=%s PATH=%s:\"$PATH\" LUA_INIT= LUA_CPATH= LUA_PATH=",
        sh_quote(home), sh_quote(bin))
    for _, b in ipairs(parse(text)) do
        local where = string.format("%s:%d", file, b.line)
        local d = b.directive
        if d and d:match("^skip:%s*%S") then
            print(string.format("skip  %s  (%s)", where, d:match("^skip:%s*(.*)$")))
        elseif d and d:match("^skip") then
            report(false, where, "a skip directive must say why")
        elseif d and d:match("^file: ") then
            local path = d:match("^file: (%S+)")
            local ok, why = check_file_block(b, dir, path)
            report(ok, where, "is " .. path, why)
        elseif d then
            report(false, where, "unknown directive: " .. d)
        elseif b.lang == "console" then
            local ok, why = run_console(b, dir, env)
            report(ok, where, "console", why)
        elseif b.lang == "sh" then
            local ok, why = run_sh(b, dir, env)
            report(ok, where, "sh", why)
        end
    end
    if #updates > 0 then
        local lines = {}
        for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
        lines[#lines] = nil
        table.sort(updates, function(a, b) return a.at > b.at end)
        for _, u in ipairs(updates) do
            local new = {}
            for l in (u.text:gsub("\n$", "") .. "\n"):gmatch("([^\n]*)\n") do new[#new + 1] = l end
            for _ = 1, u.count do table.remove(lines, u.at + 1) end
            for k = #new, 1, -1 do table.insert(lines, u.at + 1, new[k]) end
            print(string.format("updated %s:%d", file, u.at))
        end
        write_file(ROOT .. "/" .. file, table.concat(lines, "\n") .. "\n")
        updates = {}
    end
end

run("rm -rf " .. sh_quote(scratch_root))
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
