--[[
burst_buffer.lua for sites that run burst_buffer/lua (Slurm >= 21.08;
Debian 12's Slurm 22.05 ships burst_buffer_lua.so). With it, a job that asks
for data pends with reason BurstBufferStageIn while its data is recalled,
instead of holding its nodes in a blocking prolog.

A job asks with a directive in its script:

    #BB_LUA stagein DATASET[,DATASET...]

slurmctld runs these functions as SlurmUser, and the request is made with
`stagein request --job ID --wait` as SlurmUser: stageind checks dataset
permissions for SlurmUser, not for the job's user (the stagein command has no
option yet to stage on behalf of a user, which stageind allows root), so use
it only for datasets every user may read. The SPANK plugin checks the user. Install: BurstBufferType=burst_buffer/lua
in slurm.conf, this file as burst_buffer.lua beside slurm.conf, and set
STAGEIN below. Not exercised by the test suite (see doc/admin-slurm.md).
--]]

local STAGEIN = "/usr/bin/stagein"
local WAIT = "1d"          -- the longest data_in may wait

local function datasets_of(job_script)
    local f = io.open(job_script, "r")
    if not f then
        return nil
    end
    local found = nil
    for line in f:lines() do
        local list = line:match("^#BB_LUA%s+stagein%s+([%w%._,-]+)%s*$")
        if list then
            found = list
        end
    end
    f:close()
    return found
end

local function run(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("*a")
    local ok, _, code = p:close()
    return ok and code == 0, out
end

-- Every job with a directive is valid here; stageind checks permissions
-- when data_in submits the request.
function slurm_bb_job_process(job_script)
    return slurm.SUCCESS
end

function slurm_bb_pools()
    return slurm.SUCCESS
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
    return slurm.SUCCESS
end

-- The job pends (BurstBufferStageIn) until this returns.
function slurm_bb_data_in(job_id, job_script)
    local list = datasets_of(job_script)
    if not list then
        return slurm.SUCCESS
    end
    local names = list:gsub(",", " ")
    local ok, out = run(string.format("%s request %s --job %s --wait --timeout %s",
        STAGEIN, names, job_id, WAIT))
    if not ok then
        return slurm.ERROR, "stagein: " .. out
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

function slurm_bb_teardown(job_id, job_script, hurry)
    return slurm.SUCCESS
end

function slurm_bb_get_status(...)
    return slurm.SUCCESS, "stagein burst_buffer.lua"
end
