#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/groups.h"
#include "common/tap.h"

static bool has(const gid_t *list, size_t n, gid_t g)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == g)
            return true;
    return false;
}

int main(void)
{
    si_groups_t *g = si_groups_new(60);
    ok(g != NULL, "cache made");
    gid_t list[SI_GROUPS_MAX], again[SI_GROUPS_MAX];
    size_t n;
    si_groups_of(g, getuid(), getgid(), list, &n);
    ok(n >= 1 && has(list, n, getgid()), "the caller's groups include its primary group");
    /* what the system says of this process's own supplementary groups */
    gid_t mine[256];
    int nmine = getgroups(256, mine);
    struct passwd *pw = getpwuid(getuid());
    bool all = true;
    for (int i = 0; pw && i < nmine && getuid() != 0; i++)
        all = all && has(list, n, mine[i]);
    ok(all, "every supplementary group of the caller (NSS) is listed");
    size_t n2;
    si_groups_of(g, getuid(), getgid(), again, &n2);
    ok(n2 == n && memcmp(again, list, n * sizeof(*list)) == 0, "a second question, the same answer");
    si_groups_of(g, 3999999, 4242, list, &n);
    ok(n == 1 && list[0] == 4242, "a uid unknown to NSS has only its primary group");
    for (uid_t u = 5000000; u < 5000300; u++)
        si_groups_of(g, u, 7, list, &n);
    ok(n == 1 && list[0] == 7, "more users than the cache holds still answer");
    gid_t three[3] = {10, 200, 3000};
    char text[32];
    ok(si_groups_format(three, 3, text, sizeof(text)) && strcmp(text, ",10,200,3000,") == 0,
       "formatted for the catalog's rule: %s", text);
    ok(!si_groups_format(three, 3, text, 8) && strcmp(text, ",10,") == 0,
       "too small a buffer keeps whole groups only: %s", text);
    ok(si_groups_format(three, 0, text, sizeof(text)) && text[0] == '\0', "none: empty");
    si_groups_free(g);
    return done_testing();
}
