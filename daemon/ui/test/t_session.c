#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/ui/session.h"

int main(void)
{
    si_error_t err;
    ui_sessions_t *s = ui_sessions_new(60, 3600, 4, 0, &err);
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

    /* a per-user bound: one user's logins push out only their own sessions */
    s = ui_sessions_new(60, 3600, 8, 2, &err);
    ui_user_t bob = {.uid = 3000, .gid = 100};
    char bob_sid[UI_SECRET_LEN + 1], mine[5][UI_SECRET_LEN + 1];
    ui_sessions_token(s, &bob, 100, token, &err);
    ui_sessions_redeem(s, token, 100, bob_sid, &got, &err);
    for (int i = 0; i < 5; i++) {
        ui_sessions_token(s, &alice, 200 + i, token, &err);
        ok(ui_sessions_redeem(s, token, 200 + i, mine[i], &got, &err) == 0, "alice's login %d", i);
    }
    is_int(ui_sessions_count(s, alice.uid, 300), 2, "alice holds her bound of 2");
    ok(!ui_sessions_lookup(s, mine[2], 300, &got) && ui_sessions_lookup(s, mine[3], 300, &got) &&
           ui_sessions_lookup(s, mine[4], 300, &got),
       "her newest two sessions live, the older went");
    ok(ui_sessions_lookup(s, bob_sid, 300, &got) && got.uid == 3000, "bob's session untouched");
    for (int i = 0; i < 20; i++)
        ui_sessions_token(s, &alice, 400 + i, token, &err);
    ok(ui_sessions_lookup(s, bob_sid, 425, &got), "... even after 20 of her login links");
    is_int(ui_sessions_count(s, alice.uid, 425), 2, "her links count against her bound");
    ok(ui_sessions_redeem(s, token, 425, sid, &got, &err) == 0, "her latest link still works");
    ui_sessions_set_limits(s, 60, 3600, 1);
    ui_sessions_token(s, &alice, 600, token, &err);
    is_int(ui_sessions_count(s, alice.uid, 600), 1, "a lower bound, reloaded, applies to the"
           " next login");
    ui_sessions_free(s);
    return done_testing();
}
