/* stagein-tape: a tape library's devices and cartridges, for the admin
 * setting up archive.backend = "tape" (doc/admin-tape.md), and a cartridge
 * read into a volume image for `stagein tape dump/import`. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/archive/tape/drive.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: stagein-tape devices [SYSFS_ROOT]\n"
            "       stagein-tape inventory [--rescan] CHANGER\n"
            "       stagein-tape image CHANGER DRIVE ELEMENT BARCODE DIR [BLOCK_SIZE]\n"
            "       stagein-tape move CHANGER SOURCE DESTINATION\n"
            "       stagein-tape reset DEVICE\n"
            "CHANGER, DRIVE: /dev/sgN or iscsi://HOST:PORT/IQN/LUN\n");
    return 2;
}

static const char *type_name(int t)
{
    static const char *const names[] = {"transport", "transport", "slot", "port", "drive"};
    return t >= 0 && t <= 4 ? names[t] : "?";
}

static int devices(const char *root)
{
    scsi_sg_entry_t *e;
    size_t n;
    si_error_t err = {0};
    if (scsi_sg_list(root, &e, &n, &err) < 0) {
        fprintf(stderr, "stagein-tape: %s\n", err.text);
        return 1;
    }
    printf("%-12s %-7s %-8s %-16s %-4s %-10s %-20s %-6s %s\n", "device", "type", "vendor",
           "product", "rev", "h:c:t:l", "serial", "kernel", "changer");
    for (size_t i = 0; i < n; i++)
        if (e[i].type == 1 || e[i].type == 8)
            printf("%-12s %-7s %-8s %-16s %-4s %-10s %-20s %-6s %s\n", e[i].path,
                   e[i].type == 1 ? "drive" : "changer", e[i].vendor, e[i].product,
                   e[i].revision, e[i].hctl[0] ? e[i].hctl : "-",
                   e[i].serial[0] ? e[i].serial : "-", e[i].kernel[0] ? e[i].kernel : "-",
                   e[i].type == 8 ? "-" : e[i].changer >= 0 ? e[e[i].changer].path : "?");
    free(e);
    return 0;
}

/* --rescan: INITIALIZE ELEMENT STATUS first (the robot checks every
 * element: minutes on a large library) */
static int inventory(const char *changer, bool rescan)
{
    si_error_t err = {0};
    tape_changer_t c = {0};
    scsi_cmd_t init;
    scsi_cdb_initialize_element_status(&init);
    if (!(c.dev = scsi_open(changer, &err)) ||
        (rescan && scsi_run(c.dev, &init, NULL, NULL, &err) < 0) ||
        tape_changer_inventory(&c, &err) < 0) {
        fprintf(stderr, "stagein-tape: %s\n", err.text);
        scsi_close(c.dev);
        return 1;
    }
    printf("%-9s %7s %-5s %-32s %-6s %s\n", "type", "element", "full", "barcode", "source",
           "identifier");
    for (size_t i = 0; i < c.nels; i++) {
        const scsi_element_t *x = &c.els[i];
        char src[16] = "-";
        if (x->source_valid)
            snprintf(src, sizeof(src), "%u", x->source);
        printf("%-9s %7u %-5s %-32s %-6s %s\n", type_name(x->type), x->address,
               x->full ? "yes" : "no", x->barcode[0] ? x->barcode : "-", src,
               x->ident[0] ? x->ident : "-");

    }
    free(c.els);
    scsi_close(c.dev);
    return 0;
}

/* Loads BARCODE into the drive at ELEMENT, reads it into DIR/LABEL.vol,
 * puts it back where it was. */
static int image(const char *changer, const char *drive, const char *element,
                 const char *barcode, const char *dir, size_t block)
{
    si_error_t err = {0};
    tape_changer_t c = {0};
    tape_drive_t d = {.retries = 60, .retry_ms = 500};
    char label[33];
    int rc = 1;
    char *end;
    long el = strtol(element, &end, 10);
    if (*end || el < 0 || el > 0xffff) {
        fprintf(stderr, "stagein-tape: ELEMENT '%s' is not an element address\n", element);
        return 2;
    }
    if (!(c.dev = scsi_open(changer, &err)) || tape_changer_inventory(&c, &err) < 0 ||
        !(d.dev = scsi_open(drive, &err)))
        goto out;
    const scsi_element_t *e = tape_changer_find(&c, barcode);
    if (!e) {
        si_errprintf(&err, "no cartridge %s in the library", barcode);
        goto out;
    }
    uint16_t home = e->type == SCSI_ELEM_DRIVE ? e->source : e->address;
    bool moved = e->address != (uint16_t)el;
    if (moved && tape_changer_move(&c, e->address, (uint16_t)el, &err) < 0)
        goto out;
    if (tape_drive_ready(&d, &err) == 0 && tape_read_image(&d, dir, block, label, &err) == 0) {
        printf("%s/%s.vol\n", dir, label);
        rc = 0;
    }
    si_error_t uerr = {0};
    if (moved && (tape_drive_rewind(&d, &uerr) < 0 || tape_drive_unload(&d, &uerr) < 0 ||
                  tape_changer_move(&c, (uint16_t)el, home, &uerr) < 0))
        fprintf(stderr, "stagein-tape: putting %s back: %s\n", barcode, uerr.text);
out:
    if (rc)
        fprintf(stderr, "stagein-tape: %s\n", err.text);
    free(c.els);
    scsi_close(c.dev);
    scsi_close(d.dev);
    return rc;
}

static int parse_element(const char *text, uint16_t *out)
{
    char *end;
    long el = strtol(text, &end, 10);
    if (!*text || *end || el < 0 || el > 0xffff) {
        fprintf(stderr, "stagein-tape: '%s' is not an element address (0..65535)\n", text);
        return -1;
    }
    *out = (uint16_t)el;
    return 0;
}

/* MOVE MEDIUM by hand (stageind re-reads the inventory when a move of its
 * own then fails: the cartridge is found where it now is). */
static int move(const char *changer, const char *src, const char *dst)
{
    si_error_t err = {0};
    tape_changer_t c = {0};
    uint16_t from, to;
    if (parse_element(src, &from) < 0 || parse_element(dst, &to) < 0)
        return 2;
    int rc = !(c.dev = scsi_open(changer, &err)) || tape_changer_inventory(&c, &err) < 0 ||
             tape_changer_move(&c, from, to, &err) < 0;
    if (rc)
        fprintf(stderr, "stagein-tape: %s\n", err.text);
    free(c.els);
    scsi_close(c.dev);
    return rc;
}

/* LOGICAL UNIT RESET of a drive or changer that hangs. */
static int reset(const char *device)
{
    si_error_t err = {0};
    scsi_dev_t *d = scsi_open(device, &err);
    int rc = !d || scsi_reset(d, &err) < 0;
    if (rc)
        fprintf(stderr, "stagein-tape: %s\n", err.text);
    scsi_close(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "devices") == 0 && argc <= 3)
        return devices(argc == 3 ? argv[2] : "/sys/class/scsi_generic");
    if (argc == 3 && strcmp(argv[1], "inventory") == 0)
        return inventory(argv[2], false);
    if (argc == 4 && strcmp(argv[1], "inventory") == 0 && strcmp(argv[2], "--rescan") == 0)
        return inventory(argv[3], true);
    if ((argc == 7 || argc == 8) && strcmp(argv[1], "image") == 0)
        return image(argv[2], argv[3], argv[4], argv[5], argv[6],
                     argc == 8 ? strtoul(argv[7], NULL, 10) : (8u << 20));
    if (argc == 5 && strcmp(argv[1], "move") == 0)
        return move(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "reset") == 0)
        return reset(argv[2]);
    return usage();
}
