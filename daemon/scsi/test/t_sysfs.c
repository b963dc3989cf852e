/* sysfs discovery of SCSI generic devices (scsi_sg_list) over a fake
 * /sys/class/scsi_generic tree made in a temporary directory: types,
 * vendor, model, serial number (vpd_pg80), H:C:T:L, the st/ch device, and
 * which changer each drive belongs to. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/scsi/scsi.h"

static char root[64];

static void put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* class/NAME/device -> ../../devices/HCTL, with its attributes */
static void device(const char *name, const char *hctl, int type, const char *vendor,
                   const char *model, const char *serial, const char *const *kernel)
{
    char dir[256], cls[256], link[256], txt[64];
    snprintf(dir, sizeof(dir), "%s/devices/%s", root, hctl);
    mkdir(dir, 0755);
    snprintf(cls, sizeof(cls), "%s/class/%s", root, name);
    mkdir(cls, 0755);
    snprintf(link, sizeof(link), "../../devices/%s", hctl);
    snprintf(cls, sizeof(cls), "%s/class/%s/device", root, name);
    if (symlink(link, cls) < 0)
        perror(cls);
    snprintf(txt, sizeof(txt), "%d\n", type);
    put(dir, "type", txt, strlen(txt));
    snprintf(txt, sizeof(txt), "%-8s\n", vendor);
    put(dir, "vendor", txt, strlen(txt));
    snprintf(txt, sizeof(txt), "%-16s\n", model);
    put(dir, "model", txt, strlen(txt));
    put(dir, "rev", "0100\n", 5);
    if (serial) {
        uint8_t page[64] = {(uint8_t)type, 0x80, 0, (uint8_t)(strlen(serial) + 2), ' ', ' '};
        memcpy(page + 6, serial, strlen(serial));
        put(dir, "vpd_pg80", page, 6 + strlen(serial));
    }
    if (kernel) {
        char sub[300];
        snprintf(sub, sizeof(sub), "%s/%s", dir, type == 1 ? "scsi_tape" : "scsi_changer");
        mkdir(sub, 0755);
        for (int i = 0; kernel[i]; i++) {
            char k[400];
            snprintf(k, sizeof(k), "%s/%s", sub, kernel[i]);
            mkdir(k, 0755);
        }
    }
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/t_sysfs.XXXXXX");
    if (!mkdtemp(root)) {
        plan_skip_all("no temporary directory");
        return 0;
    }
    char p[128];
    snprintf(p, sizeof(p), "%s/class", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/devices", root);
    mkdir(p, 0755);
    static const char *const st0[] = {"st0", "st0a", "nst0a", "nst0", "nst0l", NULL};
    static const char *const st1[] = {"nst1", "st1", NULL};
    static const char *const sch0[] = {"sch0", NULL};
    /* a library on host 0: a drive with the changer behind its target
     * (LUN 1), a second drive on another target; a disk; a lone drive on
     * host 2 */
    device("sg0", "0:0:1:0", 1, "IBM", "ULT3580-TD9", "1068001234", st0);
    device("sg1", "0:0:1:1", 8, "IBM", "3573-TL", "00L4U78A5815_LL0", sch0);
    device("sg2", "0:0:2:0", 1, "IBM", "ULT3580-TD9", "1068005678", st1);
    device("sg3", "1:0:0:0", 0, "ATA", "SAMSUNG SSD", NULL, NULL);
    device("sg10", "2:0:5:0", 1, "HP", "Ultrium 8-SCSI", NULL, NULL);
    snprintf(p, sizeof(p), "%s/class", root);

    scsi_sg_entry_t *e = NULL;
    size_t n = 0;
    si_error_t err = {0};
    ok(scsi_sg_list(p, &e, &n, &err) == 0 && n == 5, "5 devices listed (%zu)", n);
    is_str(e[0].path, "/dev/sg0", "sorted by name, sg0 first");
    is_str(e[4].path, "/dev/sg10", "sg10 after sg3 (by number, not as text)");
    ok(e[0].type == 1 && strcmp(e[0].vendor, "IBM") == 0 &&
           strcmp(e[0].product, "ULT3580-TD9") == 0 && strcmp(e[0].revision, "0100") == 0,
       "type, vendor, model and revision, blanks cut");
    is_str(e[0].serial, "1068001234", "the serial number from vpd_pg80, leading blanks cut");
    is_str(e[0].hctl, "0:0:1:0", "H:C:T:L from the device link");
    is_str(e[0].kernel, "nst0", "the drive's non-rewinding st device");
    is_str(e[1].kernel, "sch0", "the changer's ch device");
    is_int(e[0].changer, 1, "a drive with the changer on its target (another LUN) belongs to it");
    is_int(e[2].changer, 1, "a drive on another target: the only changer on its host");
    is_int(e[3].changer, -1, "a disk belongs to no changer");
    is_int(e[4].changer, -1, "a drive on a host without a changer: none");
    ok(e[4].serial[0] == '\0' && e[4].kernel[0] == '\0', "no vpd_pg80, no st: empty");
    size_t idx[4];
    ok(scsi_sg_drives_of(e, n, 1, idx, 4) == 2 && idx[0] == 0 && idx[1] == 2,
       "the changer's drives: sg0 and sg2");
    free(e);

    /* a second changer on host 0: a drive on a target without one is ambiguous */
    device("sg4", "0:0:3:0", 8, "QUANTUM", "Scalar i6", "QX1", NULL);
    ok(scsi_sg_list(p, &e, &n, &err) == 0 && n == 6, "6 devices");
    is_int(e[0].changer, 1, "sg0: still the changer on its own target");
    is_int(e[2].changer, -1, "sg2: two changers on its host, none on its target: none");
    free(e);

    ok(scsi_sg_list("/nonexistent/scsi_generic", &e, &n, &err) == 0 && n == 0,
       "no sg driver (no directory): no devices, no error");
    tap_remove_tree(root);
    return done_testing();
}
