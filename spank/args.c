#include "config.h"
#include "spank/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "common/text.h"
#include "stagein/client.h"
#include "stagein/stage_args.h"

#define DEFAULT_WAIT_S 600
#define DEFAULT_PUSH_TIMEOUT_S 3600
#define DEFAULT_RUN_DIR LOCALSTATEDIR "/run/stagein-spank"
#define DEFAULT_STAGEIN BINDIR "/stagein"
#define DEFAULT_ENDPOINT "unix:" LOCALSTATEDIR "/lib/stagein/stageind.sock"
#define DEFAULT_SCONTROL "/usr/bin/scontrol"

static int copy_value(char *dst, size_t size, const char *key, const char *value,
                      si_error_t *err)
{
    if (!*value)
        return si_errprintf(err, "%s= needs a value", key);
    if ((size_t)snprintf(dst, size, "%s", value) >= size)
        return si_errprintf(err, "%s= is longer than %zu bytes", key, size - 1);
    return 0;
}

static int parse_gpu_number(const char *text, int *gpu, si_error_t *err)
{
    int64_t n;
    if (si_parse_i64(text, &n) < 0 || n < 0 || n > 1023)
        return si_errprintf(err, "GPU '%s' is not a device number 0..1023", text);
    *gpu = (int)n;
    return 0;
}

static int conf_arg(const char *arg, spank_conf_t *c, si_error_t *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return si_errprintf(err, "'%s' is not of the form key=value", arg);
    char key[32];
    size_t klen = (size_t)(eq - arg);
    if (klen == 0 || klen >= sizeof(key))
        return si_errprintf(err, "'%s' is not of the form key=value", arg);
    memcpy(key, arg, klen);
    key[klen] = '\0';
    const char *v = eq + 1;
    if (strcmp(key, "endpoint") == 0) {
        /* endpoint=a,b,c: stageind instances tried in order (stagein/client.h) */
        if (copy_value(c->endpoint, sizeof(c->endpoint), key, v, err) < 0)
            return -1;
        return client_check_endpoints(v, err) < 0 ? si_errprefix(err, "endpoint") : 0;
    }
    if (strcmp(key, "munge_socket") == 0)
        return copy_value(c->munge_socket, sizeof(c->munge_socket), key, v, err);
    if (strcmp(key, "stagein") == 0)
        return copy_value(c->stagein, sizeof(c->stagein), key, v, err);
    if (strcmp(key, "config") == 0)
        return copy_value(c->config, sizeof(c->config), key, v, err);
    if (strcmp(key, "scontrol") == 0) {
        if (*v && v[0] != '/')
            return si_errprintf(err, "scontrol=%s is not an absolute path (scontrol= turns the "
                                     "job comments off)", v);
        snprintf(c->scontrol, sizeof(c->scontrol), "%s", v);
        return 0;
    }
    if (strcmp(key, "run_dir") == 0) {
        if (v[0] != '/')
            return si_errprintf(err, "run_dir=%s is not an absolute path", v);
        return copy_value(c->run_dir, sizeof(c->run_dir), key, v, err);
    }
    if (strcmp(key, "wait") == 0 || strcmp(key, "push_timeout") == 0) {
        int64_t s;
        if (stage_parse_duration(v, &s, err) < 0)
            return si_errprefix(err, "%s", key);
        *(strcmp(key, "wait") == 0 ? &c->wait_s : &c->push_timeout_s) = s;
        return 0;
    }
    if (strcmp(key, "on_timeout") == 0) {
        if (strcmp(v, "fail") == 0)
            c->on_timeout = SPANK_ON_TIMEOUT_FAIL;
        else if (strcmp(v, "continue") == 0)
            c->on_timeout = SPANK_ON_TIMEOUT_CONTINUE;
        else
            return si_errprintf(err, "on_timeout=%s: expected fail or continue", v);
        return 0;
    }
    if (strcmp(key, "gpu") == 0) {
        if (strcmp(v, "none") == 0) {
            c->gpu = -1;
            return 0;
        }
        return parse_gpu_number(v, &c->gpu, err) < 0 ? si_errprefix(err, "gpu") : 0;
    }
    if (strcmp(key, "priority") == 0)
        return stage_parse_priority(v, &c->priority, err) < 0 ? si_errprefix(err, "priority") : 0;
    return si_errprintf(err, "unknown argument '%s' (known: endpoint, munge_socket, wait, "
                             "on_timeout, gpu, priority, stagein, config, run_dir, push_timeout, "
                             "scontrol)",
                        key);
}

int spank_conf_parse(int argc, char *const argv[], spank_conf_t *conf, si_error_t *err)
{
    spank_conf_t c = {
        .wait_s = DEFAULT_WAIT_S,
        .on_timeout = SPANK_ON_TIMEOUT_FAIL,
        .gpu = -1,
        .push_timeout_s = DEFAULT_PUSH_TIMEOUT_S,
    };
    snprintf(c.run_dir, sizeof(c.run_dir), "%s", DEFAULT_RUN_DIR);
    snprintf(c.stagein, sizeof(c.stagein), "%s", DEFAULT_STAGEIN);
    snprintf(c.endpoint, sizeof(c.endpoint), "%s", DEFAULT_ENDPOINT);
    snprintf(c.scontrol, sizeof(c.scontrol), "%s", DEFAULT_SCONTROL);
    for (int i = 0; i < argc; i++)
        if (conf_arg(argv[i], &c, err) < 0)
            return si_errprefix(err, "plugstack.conf argument %d", i + 1);
    *conf = c;
    return 0;
}

void spank_stage_in_free(spank_stage_in_t *s)
{
    for (size_t i = 0; i < s->ndatasets; i++)
        free(s->datasets[i]);
    free(s->datasets);
    free(s->manifest_path);
    memset(s, 0, sizeof(*s));
}

int spank_stage_in_parse(const char *text, spank_stage_in_t *out, si_error_t *err)
{
    spank_stage_in_t s = {0};
    char *copy = NULL;
    if (!text || !*text)
        return si_errprintf(err, "--stage-in needs a dataset name or @manifest");
    if (text[0] == '@') {
        if (text[1] != '/')
            return si_errprintf(err, "--stage-in=%s: a manifest is given by its absolute path "
                                     "(@/path/manifest)", text);
        if (!(s.manifest_path = strdup(text + 1)))
            return si_errprintf(err, "out of memory");
        *out = s;
        return 0;
    }
    if (!(copy = strdup(text)) ||
        !(s.datasets = calloc(strlen(text) / 2 + 1, sizeof(*s.datasets)))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    char *save = NULL;
    for (char *p = copy;; p = NULL) {
        char *name = strtok_r(p, ",", &save);
        if (!name)
            break;
        if (si_dataset_check(name, err) < 0) {
            si_errprefix(err, "--stage-in");
            goto error;
        }
        bool seen = false;
        for (size_t i = 0; i < s.ndatasets; i++)
            seen = seen || strcmp(s.datasets[i], name) == 0;
        if (seen)
            continue;
        if (!(s.datasets[s.ndatasets] = strdup(name))) {
            si_errprintf(err, "out of memory");
            goto error;
        }
        s.ndatasets++;
    }
    if (s.ndatasets == 0) {
        si_errprintf(err, "--stage-in=%s names no dataset", text);
        goto error;
    }
    free(copy);
    *out = s;
    return 0;
error:
    free(copy);
    spank_stage_in_free(&s);
    return -1;
}

static int stage_out_one(char *item, const char *job, spank_stage_out_t *o, si_error_t *err)
{
    char *colon = strrchr(item, ':');
    const char *dataset = NULL;
    if (colon) {
        *colon = '\0';
        dataset = colon + 1;
        if (si_dataset_check(dataset, err) < 0)
            return si_errprefix(err, "--stage-out %s", item);
    }
    if (item[0] != '/')
        return si_errprintf(err, "--stage-out path '%s' is not absolute", item);
    if ((size_t)snprintf(o->path, sizeof(o->path), "%s", item) >= sizeof(o->path))
        return si_errprintf(err, "--stage-out path '%.60s...' is too long", item);
    o->dataset[0] = '\0';
    if (dataset)
        snprintf(o->dataset, sizeof(o->dataset), "%s", dataset);
    else if (job)
        snprintf(o->dataset, sizeof(o->dataset), "job-%s", job);
    return 0;
}

int spank_stage_out_parse(const char *text, const char *job, spank_stage_out_t *out, size_t max,
                          size_t *n, si_error_t *err)
{
    if (!text || !*text)
        return si_errprintf(err, "--stage-out needs PATH[:DATASET]");
    char *copy = strdup(text);
    if (!copy)
        return si_errprintf(err, "out of memory");
    size_t count = 0;
    int rc = 0;
    char *save = NULL;
    for (char *p = copy;; p = NULL) {
        char *item = strtok_r(p, ",", &save);
        if (!item)
            break;
        if (count == max) {
            rc = si_errprintf(err, "--stage-out names more than %zu paths", max);
            break;
        }
        if ((rc = stage_out_one(item, job, &out[count], err)) < 0)
            break;
        count++;
    }
    if (rc == 0 && count == 0)
        rc = si_errprintf(err, "--stage-out=%s names no path", text);
    free(copy);
    if (rc == 0)
        *n = count;
    return rc;
}

int spank_gpu_parse(const char *text, int *gpu, si_error_t *err)
{
    if (!text || !*text) {
        *gpu = 0;
        return 0;
    }
    return parse_gpu_number(text, gpu, err) < 0 ? si_errprefix(err, "--stage-gpu") : 0;
}
