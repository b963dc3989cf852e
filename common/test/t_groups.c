#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
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
    const gid_t *list;
    size_t n;
    si_groups_of(g, getuid(), getgid(), &list, &n);
    ok(n >= 1 && has(list, n, getgid()), "the caller's groups include its primary group");
    /* what the system says of this process's own supplementary groups */
    gid_t mine[256];
    int nmine = getgroups(256, mine);
    struct passwd *pw = getpwuid(getuid());
    bool all = true;
    for (int i = 0; pw && i < nmine && getuid() != 0; i++)
        all = all && has(list, n, mine[i]);
    ok(all, "every supplementary group of the caller (NSS) is listed");
    const gid_t *again;
    size_t n2;
    si_groups_of(g, getuid(), getgid(), &again, &n2);
    ok(again == list && n2 == n, "a second question is answered from the cache");
    si_groups_of(g, 3999999, 4242, &list, &n);
    ok(n == 1 && list[0] == 4242, "a uid unknown to NSS has only its primary group");
    for (uid_t u = 5000000; u < 5000300; u++)
        si_groups_of(g, u, 7, &list, &n);
    ok(n == 1 && list[0] == 7, "more users than the cache holds still answer");
    si_groups_free(g);
    return done_testing();
}
