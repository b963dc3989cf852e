#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "spank/args.h"

static void conf_args(void)
{
    spank_conf_t c;
    si_error_t err;
    ok(spank_conf_parse(0, NULL, &c, &err) == 0, "no arguments: defaults");
    is_int(c.wait_s, 600, "default wait 600 s");
    is_int(c.gpu, -1, "default: host memory");
    ok(c.on_timeout == SPANK_ON_TIMEOUT_FAIL, "default on_timeout=fail");
    ok(strncmp(c.endpoint, "unix:", 5) == 0, "default endpoint is stageind's socket");

    char *argv[] = {"endpoint=http://127.0.0.1:8470", "munge_socket=/run/m.sock", "wait=1h30m",
                    "on_timeout=continue", "gpu=2", "priority=-5", "run_dir=/run/x"};
    ok(spank_conf_parse(7, argv, &c, &err) == 0, "every argument accepted");
    is_str(c.endpoint, "http://127.0.0.1:8470", "endpoint");
    is_str(c.munge_socket, "/run/m.sock", "munge_socket");
    is_int(c.wait_s, 5400, "wait=1h30m is 5400 s");
    ok(c.on_timeout == SPANK_ON_TIMEOUT_CONTINUE, "on_timeout=continue");
    is_int(c.gpu, 2, "gpu=2");
    is_int(c.priority, -5, "priority=-5");

    spank_conf_t before = c;
    char *bad1[] = {"wait=5m", "colour=blue"};
    ok(spank_conf_parse(2, bad1, &c, &err) < 0, "unknown key refused");
    is_str(err.text, "plugstack.conf argument 2: unknown argument 'colour' (known: endpoint, "
                     "munge_socket, wait, on_timeout, gpu, priority, stagein, config, run_dir, "
                     "push_timeout, scontrol)", "the error names the argument and the known keys");
    is_str(c.scontrol, "/usr/bin/scontrol", "scontrol: the standard path by default");
    spank_conf_t other;
    char *sc[] = {"scontrol=relative/scontrol"};
    ok(spank_conf_parse(1, sc, &other, &err) < 0 && strstr(err.text, "not an absolute path"),
       "scontrol must be an absolute path: %s", err.text);
    char *nosc[] = {"scontrol="};
    ok(spank_conf_parse(1, nosc, &other, &err) == 0 && other.scontrol[0] == '\0',
       "scontrol= turns the job comments off");
    ok(memcmp(&c, &before, sizeof(c)) == 0, "a refused set changes nothing");
    char *bad2[] = {"on_timeout=maybe"};
    ok(spank_conf_parse(1, bad2, &c, &err) < 0 && strstr(err.text, "expected fail or continue"),
       "on_timeout must be fail or continue");
    char *bad3[] = {"wait=soon"};
    ok(spank_conf_parse(1, bad3, &c, &err) < 0 && strstr(err.text, "argument 1: wait"),
       "a bad duration names wait");
    char *bad4[] = {"priority=5000"};
    ok(spank_conf_parse(1, bad4, &c, &err) < 0, "priority out of -1000..1000 refused");
    char *bad5[] = {"run_dir=relative"};
    ok(spank_conf_parse(1, bad5, &c, &err) < 0 && strstr(err.text, "not an absolute path"),
       "run_dir must be absolute");
    char *bad6[] = {"endpoint"};
    ok(spank_conf_parse(1, bad6, &c, &err) < 0 && strstr(err.text, "key=value"),
       "an argument without '=' refused");
    char *list[] = {"endpoint=unix:/run/a.sock,http://stage02:8470"};
    ok(spank_conf_parse(1, list, &other, &err) == 0 &&
           strcmp(other.endpoint, "unix:/run/a.sock,http://stage02:8470") == 0,
       "endpoint=a,b: several stageind instances, kept for the client");
    char *badlist[] = {"wait=5m", "endpoint=unix:/run/a.sock,stage02:8470"};
    ok(spank_conf_parse(2, badlist, &c, &err) < 0 &&
           strstr(err.text, "plugstack.conf argument 2: endpoint: endpoint 2 of 2: bad endpoint"
                            " 'stage02:8470'") &&
           memcmp(&c, &before, sizeof(c)) == 0,
       "a bad endpoint in the list refused at load, naming it: %s", err.text);
    char *dup[] = {"endpoint=unix:/run/a.sock,unix:/run/a.sock"};
    ok(spank_conf_parse(1, dup, &other, &err) < 0 && strstr(err.text, "twice"),
       "the same endpoint twice refused: %s", err.text);
    char *bad7[] = {"gpu=-1"};
    ok(spank_conf_parse(1, bad7, &c, &err) < 0, "gpu=-1 refused (gpu=none means host memory)");
}

static void stage_in(void)
{
    spank_stage_in_t s;
    si_error_t err;
    ok(spank_stage_in_parse("alpha,beta,alpha", &s, &err) == 0, "a list of datasets");
    is_int((long long)s.ndatasets, 2, "duplicates named once");
    is_str(s.datasets[1], "beta", "in the order given");
    ok(s.manifest_path == NULL, "no manifest");
    spank_stage_in_free(&s);
    ok(spank_stage_in_parse("@/home/u/m.txt", &s, &err) == 0, "a manifest");
    is_str(s.manifest_path, "/home/u/m.txt", "its path");
    is_int((long long)s.ndatasets, 0, "no datasets");
    spank_stage_in_free(&s);
    ok(spank_stage_in_parse("@m.txt", &s, &err) < 0 && strstr(err.text, "absolute path"),
       "a relative manifest path refused (the node would not find it)");
    ok(spank_stage_in_parse("a,b/c", &s, &err) < 0 && strstr(err.text, "invalid character '/'"),
       "a bad dataset name refused, character named");
    ok(spank_stage_in_parse(",,", &s, &err) < 0 && strstr(err.text, "names no dataset"),
       "only commas: no dataset");
    ok(spank_stage_in_parse("", &s, &err) < 0, "empty refused");
}

static void stage_out(void)
{
    spank_stage_out_t o[4];
    size_t n = 0;
    si_error_t err;
    ok(spank_stage_out_parse("/scratch/ckpt:ckpt-1,/scratch/logs", "4242", o, 4, &n, &err) == 0,
       "two paths");
    is_int((long long)n, 2, "two entries");
    is_str(o[0].path, "/scratch/ckpt", "first path");
    is_str(o[0].dataset, "ckpt-1", "named dataset");
    is_str(o[1].dataset, "job-4242", "default dataset from the job id");
    ok(spank_stage_out_parse("/scratch/logs", NULL, o, 4, &n, &err) == 0 && o[0].dataset[0] == 0,
       "no job id yet: the default name is left empty");
    ok(spank_stage_out_parse("ckpt:x", "1", o, 4, &n, &err) < 0 && strstr(err.text, "not absolute"),
       "a relative path refused");
    ok(spank_stage_out_parse("/a:bad name", "1", o, 4, &n, &err) < 0 &&
           strstr(err.text, "invalid character ' '"), "a bad dataset name refused");
    ok(spank_stage_out_parse("/a,/b,/c", "1", o, 2, &n, &err) < 0 && strstr(err.text, "more than 2"),
       "too many paths refused");
}

static void gpu(void)
{
    int g = -1;
    si_error_t err;
    ok(spank_gpu_parse(NULL, &g, &err) == 0 && g == 0, "--stage-gpu alone: GPU 0");
    ok(spank_gpu_parse("3", &g, &err) == 0 && g == 3, "--stage-gpu=3");
    ok(spank_gpu_parse("x", &g, &err) < 0 && strstr(err.text, "--stage-gpu"), "--stage-gpu=x refused");
}

int main(void)
{
    conf_args();
    stage_in();
    stage_out();
    gpu();
    return done_testing();
}
