--[[
burst_buffer.lua for sites that run burst_buffer/lua (Slurm >= 21.08;
Debian 12's Slurm 22.05 ships burst_buffer_lua.so). With it, a job that asks
for data pends with reason BurstBufferStageIn while its data is recalled,
instead of holding its nodes in a blocking prolog.

A job asks with a directive in its script:

    #BB_LUA stagein DATASET[,DATASET...]

  job_process  (at submission) checks the directive's dataset names;
  setup        submits the stage request on behalf of the job's user (stageind
               checks that user's permissions; this script runs as SlurmUser,
               which must be root for stageind to accept "on behalf of") and
               records its id under RUN_DIR;
  data_in      waits until the request is staged: the job pends meanwhile;
  paths        gives the job STAGEIN_REQUEST (and STAGEIN_ENDPOINT);
  teardown     releases the request's pins and forgets it.

Install: BurstBufferType=burst_buffer/lua in slurm.conf, this file as
burst_buffer.lua beside slurm.conf, and the settings below for the site.
The SPANK plugin's --stage-in works beside it; use one or the other per job.
Tested by tests/0410-slurm-burst-buffer.sh; see doc/admin-slurm.md.
--]]

-- Site settings.
local STAGEIN = "/usr/bin/stagein"   -- the stagein command
local CONFIG = ""                    -- its stagein.conf ("": its default)
local ENDPOINT = ""                  -- stageind's control API ("": from CONFIG)
local RUN_DIR = "/run/stagein-bb"    -- where request ids are kept, per job
local WAIT = "1d"                    -- the longest data_in waits

local function shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function stagein(args)
    local cmd = shell_quote(STAGEIN)
    if CONFIG ~= "" then
        cmd = cmd .. " --config " .. shell_quote(CONFIG)
    end
    cmd = cmd .. " " .. args
    if ENDPOINT ~= "" then
        cmd = cmd .. " --endpoint " .. shell_quote(ENDPOINT)
    end
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("*a")
    local ok, _, code = p:close()
    -- Lua 5.1's close() returns only the status; 5.2+ return (ok, "exit", code)
    if type(ok) == "number" then
        return ok == 0, out
    end
    return ok and (code == nil or code == 0), out
end

-- The datasets the job's script asks for, or nil; false and a reason when
-- the directive is malformed.
local function datasets_of(job_script)
    local f = io.open(job_script, "r")
    if not f then
        return nil
    end
    local found = nil
    for line in f:lines() do
        local rest = line:match("^#BB_LUA%s+stagein%s*(.*)$")
        if rest then
            local list = rest:match("^([%w%._,-]+)%s*$")
            if not list or list:find(",,", 1, true) or list:match("^,") or list:match(",$") then
                f:close()
                return false, "stagein: '#BB_LUA stagein " .. rest ..
                    "': expected DATASET[,DATASET...] (names of A-Z a-z 0-9 . _ -)"
            end
            found = list
        end
    end
    f:close()
    return found
end

local function request_file(job_id)
    return RUN_DIR .. "/job-" .. job_id .. ".request"
end

local function request_of(job_id)
    local f = io.open(request_file(job_id), "r")
    if not f then
        return nil
    end
    local id = f:read("*l")
    f:close()
    return id
end

function slurm_bb_job_process(job_script)
    local list, why = datasets_of(job_script)
    if list == false then
        return slurm.ERROR, why
    end
    return slurm.SUCCESS
end

function slurm_bb_pools()
    return slurm.SUCCESS
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
    local list = datasets_of(job_script)
    if not list then
        return slurm.SUCCESS
    end
    if request_of(job_id) then
        return slurm.SUCCESS -- set up already (slurmctld restarted)
    end
    local ok, out = stagein(string.format("request %s --job %s --user %s:%s --json",
        list:gsub(",", " "), shell_quote(job_id), shell_quote(uid), shell_quote(gid)))
    local id = ok and out:match('"requestId"%s*:%s*"([0-9a-fA-F-]+)"')
    if not id then
        return slurm.ERROR, "stagein: " .. out:gsub("%s+$", "")
    end
    os.execute("mkdir -p " .. shell_quote(RUN_DIR))
    local f = io.open(request_file(job_id) .. ".new", "w")
    if not f then
        return slurm.ERROR, "stagein: cannot write under " .. RUN_DIR
    end
    f:write(id, "\n")
    f:close()
    os.rename(request_file(job_id) .. ".new", request_file(job_id))
    slurm.log_info("stagein: job %s: stage request %s for uid %s (%s)", job_id, id, uid, list)
    return slurm.SUCCESS
end

-- The job pends (BurstBufferStageIn) until this returns.
function slurm_bb_data_in(job_id, job_script)
    local id = request_of(job_id)
    if not id then
        return slurm.SUCCESS
    end
    local ok, out = stagein(string.format("wait %s --timeout %s", id, WAIT))
    if not ok then
        return slurm.ERROR, "stagein: request " .. id .. ": " .. out:gsub("%s+$", "")
    end
    return slurm.SUCCESS
end

function slurm_bb_test_data_in(job_id, job_script)
    return slurm.SUCCESS, "yes"
end

function slurm_bb_real_size(job_id)
    return slurm.SUCCESS
end

function slurm_bb_paths(job_id, job_script, path_file)
    local id = request_of(job_id)
    if id then
        local f = io.open(path_file, "a")
        if f then
            f:write("STAGEIN_REQUEST=", id, "\n")
            if ENDPOINT ~= "" then
                f:write("STAGEIN_ENDPOINT=", ENDPOINT, "\n")
            end
            f:close()
        end
    end
    return slurm.SUCCESS
end

function slurm_bb_pre_run(job_id, job_script)
    return slurm.SUCCESS
end

function slurm_bb_post_run(job_id, job_script)
    return slurm.SUCCESS
end

function slurm_bb_data_out(job_id, job_script)
    return slurm.SUCCESS
end

function slurm_bb_test_data_out(job_id, job_script)
    return slurm.SUCCESS, "yes"
end

local function teardown(job_id)
    local id = request_of(job_id)
    if id then
        local ok, out = stagein("release " .. id)
        if not ok and not out:find("RELEASED") then
            slurm.log_error("stagein: job %s: release of %s: %s", job_id, id, out)
        end
        os.remove(request_file(job_id))
    end
    return slurm.SUCCESS
end

-- 22.05 calls slurm_bb_job_teardown; earlier releases slurm_bb_teardown.
function slurm_bb_job_teardown(job_id, job_script, hurry)
    return teardown(job_id)
end

function slurm_bb_teardown(job_id, job_script, hurry)
    return teardown(job_id)
end

function slurm_bb_get_status(...)
    return slurm.SUCCESS, "stagein burst_buffer.lua: requests under " .. RUN_DIR .. "\n"
end
