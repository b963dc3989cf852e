/* Following a stage request in the catalog, for the benchmarks that stage
 * through a real stageind (stage, backends). */
#ifndef BENCH_REQUEST_H
#define BENCH_REQUEST_H

/* Polls request uuid's state in the catalog at db_path until it is COMPLETED
 * or FAILED or limit_s passed on the monotonic clock; final (16 bytes)
 * receives the last state ("" if never seen). Returns the seconds it took
 * from t0 (monotonic) or, when shorter, from t0_wall (wall clock) to the
 * request's own `updated` time: the poll can then be slow enough not to
 * compete with the daemon for the CPUs. */
double bench_wait_request(const char *db_path, const char *uuid, double t0, double t0_wall,
                          double limit_s, char final[16]);

#endif
