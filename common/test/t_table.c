#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "common/tap.h"

int main(void)
{
    static const si_column_t cols[] = {
        {"name", SI_COL_STR}, {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"cached", SI_COL_PERCENT},
    };
    si_table_t *t = si_table_new(cols, 4);
    si_table_row(t);
    si_table_str(t, "imagenet");
    si_table_int(t, 1281167);
    si_table_int(t, 150000000000LL);
    si_table_real(t, 12.5);
    si_table_row(t);
    si_table_str(t, "tiny");
    si_table_int(t, 3);
    si_table_int(t, 512);
    si_table_null(t);
    ok(si_table_str(t, "extra") < 0, "cell past the last column refused");
    is_int(si_table_rows(t), 2, "two rows");

    char *human = si_table_text(t, false);
    is_str(human,
           "name      objects     bytes  cached\n"
           "imagenet  1281167  150.0 GB   12.5%\n"
           "tiny            3     512 B       -\n",
           "human table aligned");
    char *json = si_table_text(t, true);
    is_str(json,
           "[{\"name\":\"imagenet\",\"objects\":1281167,\"bytes\":150000000000,\"cached\":12.5},"
           "{\"name\":\"tiny\",\"objects\":3,\"bytes\":512,\"cached\":null}]\n",
           "json rows typed");
    free(human);
    free(json);
    si_table_free(t);
    return done_testing();
}
