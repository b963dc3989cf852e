#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/ui/session.h"

int main(void)
{
    si_error_t err;
    ui_sessions_t *s = ui_sessions_new(60, 3600, 4, &err);
    ui_user_t alice = {.uid = 1001, .gid = 100}, got;
    char token[UI_SECRET_LEN + 1], token2[UI_SECRET_LEN + 1], sid[UI_SECRET_LEN + 1];

    ok(ui_sessions_token(s, &alice, 1000, token, &err) == 0, "a token");
    is_int(strlen(token), UI_SECRET_LEN, "64 hex characters");
    ok(ui_sessions_token(s, &alice, 1000, token2, &err) == 0 && strcmp(token, token2) != 0,
       "tokens differ");
    ok(!ui_sessions_lookup(s, token, 1000, &got), "a token is no session");
    ok(ui_sessions_redeem(s, token, 1010, sid, &got, &err) == 0, "redeemed");
    is_int(got.uid, 1001, "the token's user");
    ok(strcmp(sid, token) != 0, "the session id is not the token");
    ok(ui_sessions_redeem(s, token, 1011, sid + 0, &got, &err) < 0 && strstr(err.text, "already"),
       "a token works once: %s", err.text);
    ok(ui_sessions_lookup(s, sid, 1020, &got) && got.uid == 1001, "the session finds its user");
    ok(!ui_sessions_lookup(s, sid, 1010 + 3600, &got), "a session expires");
    ok(ui_sessions_redeem(s, token2, 1061, sid, &got, &err) < 0, "a token expires after 60 s");
    ok(ui_sessions_redeem(s, "", 1000, sid, &got, &err) < 0, "an empty token");
    ok(!ui_sessions_lookup(s, NULL, 1000, &got), "no cookie");
    char wrong[UI_SECRET_LEN + 1];
    memset(wrong, 'a', UI_SECRET_LEN);
    wrong[UI_SECRET_LEN] = '\0';
    ok(!ui_sessions_lookup(s, wrong, 1000, &got), "a guessed session id");

    /* bounded: the entry that expires first makes room */
    char sids[6][UI_SECRET_LEN + 1];
    for (int i = 0; i < 6; i++) {
        ui_user_t u = {.uid = 2000 + i, .gid = 100};
        ui_sessions_token(s, &u, 5000 + i, token, &err);
        ui_sessions_redeem(s, token, 5000 + i, sids[i], &got, &err);
    }
    ok(!ui_sessions_lookup(s, sids[0], 5010, &got), "the oldest session made room");
    ok(ui_sessions_lookup(s, sids[5], 5010, &got) && got.uid == 2005, "the newest is there");
    ui_sessions_free(s);
    return done_testing();
}
