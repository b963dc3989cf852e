--[[
burst_buffer.lua for sites that run burst_buffer/lua (Slurm >= 21.08;
Debian 12's Slurm 22.05 ships burst_buffer_lua.so). With it, a job that asks
for data pends with reason BurstBufferStageIn while its data is recalled,
instead of holding its nodes in a blocking prolog.

A job asks with a directive in its script:

    #BB_LUA stagein DATASET[,DATASET...]

  job_process  (at submission) checks the directive's dataset names and
               starts submitting the stage request on behalf of the job's user
               in the background, so the recall overlaps everything the job
               waits for, its dependencies included (stageind checks that
               user's permissions; this script runs as SlurmUser, which must be
               root for stageind to accept "on behalf of"); the request's id is
               recorded under RUN_DIR;
  setup        (once the job is eligible) waits for that, or submits the
               request itself (after a slurmctld restart);
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
local ENDPOINT = ""                  -- stageind's control API ("": from CONFIG; several: "E1,E2")
local RUN_DIR = "/run/stagein-bb"    -- where request ids are kept, per job
local WAIT = "1d"                    -- the longest data_in waits
local SQUEUE = "/usr/bin/squeue"     -- tells the job's uid and gid

local function shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function stagein_command(args)
    local cmd = shell_quote(STAGEIN)
    if CONFIG ~= "" then
        cmd = cmd .. " --config " .. shell_quote(CONFIG)
    end
    cmd = cmd .. " " .. args
    if ENDPOINT ~= "" then
        cmd = cmd .. " --endpoint " .. shell_quote(ENDPOINT)
    end
    return cmd
end

local function stagein(args)
    local p = io.popen(stagein_command(args) .. " 2>&1")
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

-- The job's id, from where slurmctld keeps its script (.../job.ID/script).
local function job_id_of(job_script)
    return tostring(job_script):match("job%.(%d+)/script$")
end

-- The stage request, made as soon as slurmctld shows the job's uid and gid
-- (job_process runs inside slurmctld, which cannot be asked from here): a
-- background shell, bounded in time, that records the id like setup does.
local function submit_early(job_id, list)
    os.execute("mkdir -p " .. shell_quote(RUN_DIR))
    local file = request_file(job_id)
    local f = io.open(file .. ".pending", "w")
    if not f then
        return
    end
    f:close()
    local script = string.format([[
for _ in $(seq 600); do
    ids=$(%s -h -t all -j %s -O UserId:16,GroupId:16 2>/dev/null) && [ -n "$ids" ] && break
    sleep 0.5
done
set -- $ids
if [ -n "${2:-}" ] && out=$(%s); then
    id=$(printf '%%s' "$out" | sed -n 's/.*"requestId" *: *"\([0-9a-fA-F-]*\)".*/\1/p')
    [ -n "$id" ] && printf '%%s\n' "$id" > %s.new && mv %s.new %s
fi
rm -f %s.pending]], shell_quote(SQUEUE), shell_quote(job_id),
        stagein_command(string.format("request %s --job %s --user \"$1:$2\" --json",
            list:gsub(",", " "), shell_quote(job_id))),
        shell_quote(file), shell_quote(file), shell_quote(file), shell_quote(file))
    os.execute("(/bin/sh -c " .. shell_quote(script) .. ") </dev/null >/dev/null 2>&1 &")
end

function slurm_bb_job_process(job_script)
    local list, why = datasets_of(job_script)
    if list == false then
        return slurm.ERROR, why
    end
    local job_id = job_id_of(job_script)
    if list and job_id then
        submit_early(job_id, list)
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
    -- job_process's submission still on its way: wait for it (bounded)
    for _ = 1, 300 do
        local f = io.open(request_file(job_id) .. ".pending", "r")
        if not f then
            break
        end
        f:close()
        os.execute("sleep 0.1")
    end
    if request_of(job_id) then
        return slurm.SUCCESS -- made at submission (or set up before a slurmctld restart)
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
