/* The library-wide metrics every library backend (sim, tape) reports in the
 * same words, in a file of its own so the backends call down, never back
 * into the registry (backend.c). */
#include "config.h"
#include "daemon/archive/backend.h"

#include <inttypes.h>
#include <stdio.h>

void archive_metrics_library(FILE *out, const archive_status_t *st)
{
    fprintf(out,
            "# HELP stagein_drives_failed Drives that failed.\n"
            "# TYPE stagein_drives_failed gauge\nstagein_drives_failed %d\n"
            "# HELP stagein_mounts_total Volume mounts.\n"
            "# TYPE stagein_mounts_total counter\nstagein_mounts_total %" PRIu64 "\n"
            "# HELP stagein_tape_reads_total Objects read from tape.\n"
            "# TYPE stagein_tape_reads_total counter\nstagein_tape_reads_total %" PRIu64 "\n"
            "# HELP stagein_tape_read_failures_total Copies that could not be read.\n"
            "# TYPE stagein_tape_read_failures_total counter\n"
            "stagein_tape_read_failures_total %" PRIu64 "\n"
            "# HELP stagein_tape_bytes_read_total Bytes recalled into the cache.\n"
            "# TYPE stagein_tape_bytes_read_total counter\n"
            "stagein_tape_bytes_read_total %" PRIu64 "\n"
            "# HELP stagein_tape_bytes_written_total Bytes of archive files written.\n"
            "# TYPE stagein_tape_bytes_written_total counter\n"
            "stagein_tape_bytes_written_total %" PRIu64 "\n"
            "# HELP stagein_archive_queued_items Recalls handed to the library, not done.\n"
            "# TYPE stagein_archive_queued_items gauge\n"
            "stagein_archive_queued_items %" PRIu64 "\n",
            st->drives_failed, st->mounts, st->reads, st->read_failures, st->bytes_read,
            st->bytes_written, st->queued_items);
}

void archive_metrics_drive_states(FILE *out, const char *library)
{
    fprintf(out, "# HELP stagein_drive_state Tape drives of %s by state.\n"
                 "# TYPE stagein_drive_state gauge\n", library);
}

void archive_metrics_drive_state(FILE *out, int drive, const char *state, const char *volume)
{
    fprintf(out, "stagein_drive_state{drive=\"%d\",state=\"%s\",volume=\"%s\"} 1\n", drive,
            state, volume);
}
