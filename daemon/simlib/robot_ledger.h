/* The robots of a simulated library that several stageind instances share
 * (one library.volume_dir): a small file beside the volume images records,
 * for each robot, the wall-clock time its last booked move ends. Each
 * instance's engine books a move on it (under flock) before the move
 * starts, so the robots' moves of all instances never overlap, as one
 * library's robots serve all its drives. Real-time engines only. */
#ifndef STAGEIN_SIMLIB_ROBOT_LEDGER_H
#define STAGEIN_SIMLIB_ROBOT_LEDGER_H

#include <stdbool.h>

#include "common/error.h"

typedef struct robot_ledger robot_ledger_t;

/* Opens (creating, 0600) the ledger at path for a library of `robots`
 * robots; refuses a ledger recording another number of robots (every
 * instance sharing a library must set the same library.robots). */
robot_ledger_t *robot_ledger_open(const char *path, int robots, si_error_t *err);
void robot_ledger_close(robot_ledger_t *l);

/* Books a move of move_s (wall seconds) on the usable robot (usable[r],
 * `robots` entries) that is free soonest for all instances; *robot is that
 * robot, *wait_s how long (wall seconds) until it is free (0: now). */
int robot_ledger_book(robot_ledger_t *l, const bool *usable, double move_s, int *robot,
                      double *wait_s, si_error_t *err);

#endif
