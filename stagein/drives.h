/* `stagein drives`: one row per tape drive, read from stageind's Prometheus
 * text (GET /metrics), since the drive metrics are the recall engine's own
 * and the control API has no drive endpoint.
 *
 * Every sample with a `drive` label belongs to that drive's row:
 *   stagein_drive_bytes_read_total{drive="0"} 5e9   -> column bytes_read_total
 *   stagein_drive_state{drive="0",state="reading"} 1 -> column state = reading
 * A sample with further labels sets those labels as text columns when its
 * value is not 0 (one-hot state gauges, info metrics); 0 leaves them unset.
 * Column names drop the "stagein_drive_" (or "stagein_") prefix. */
#ifndef STAGEIN_DRIVES_H
#define STAGEIN_DRIVES_H

#include "common/error.h"
#include "common/table.h"

/* The table (drives in the order first seen; columns likewise, "drive"
 * first), possibly with no rows; NULL with err naming the bad line. */
si_table_t *drives_table(const char *metrics_text, si_error_t *err);

#endif
