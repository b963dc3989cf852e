#include "config.h"

#include <string.h>

#include "common/strbuf.h"
#include "common/tap.h"
#include "common/text.h"

static int key_ok(const char *k)
{
    si_error_t err;
    return si_key_check(k, strlen(k), &err) == 0;
}

int main(void)
{
    si_error_t err;
    char big[1100];
    uint64_t u;
    int64_t i;
    char buf[64];

    ok(key_ok("train/part-0001.tar"), "ordinary key accepted");
    ok(key_ok("prefix/"), "prefix with trailing slash accepted");
    ok(key_ok("a..b/c"), "'..' inside a name is not a path component");
    ok(!key_ok("a/../b"), "'..' component rejected");
    ok(!key_ok(".."), "bare '..' rejected");
    ok(!key_ok("a/./b"), "'.' component rejected");
    ok(!key_ok("a//b"), "'//' rejected");
    ok(!key_ok("/abs"), "leading '/' rejected");
    ok(!key_ok(""), "empty key rejected");
    ok(!key_ok("bad\x01" "ctl"), "control byte rejected");
    ok(si_key_check("a\0b", 3, &err) < 0 && strstr(err.text, "NUL"), "NUL rejected: %s", err.text);
    memset(big, 'k', 1025);
    ok(si_key_check(big, 1025, &err) < 0 && strstr(err.text, "1024"), "1025-byte key rejected: %s", err.text);
    ok(si_key_check(big, 1024, &err) == 0, "1024-byte key accepted");
    ok(!key_ok("bad\xc3\x28"), "invalid UTF-8 rejected");
    ok(!key_ok("over\xc0\xaf"), "overlong UTF-8 rejected");
    ok(!key_ok("sur\xed\xa0\x80"), "UTF-16 surrogate rejected");
    ok(key_ok("caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80"), "multi-byte UTF-8 accepted");

    ok(si_bucket_check("imagenet-2026", 13, &err) == 0, "bucket accepted");
    ok(si_bucket_check("Upper", 5, &err) < 0, "upper-case bucket rejected: %s", err.text);
    ok(si_bucket_check("ab", 2, &err) < 0, "short bucket rejected");
    ok(si_bucket_check("-ab", 3, &err) < 0, "bucket starting with '-' rejected");
    ok(si_bucket_check("a..b", 4, &err) < 0, "bucket with '..' rejected");

    ok(si_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "u64 max parses");
    ok(si_parse_u64("18446744073709551616", &u) < 0, "u64 overflow rejected");
    ok(si_parse_u64("-1", &u) < 0, "negative rejected as u64");
    unsigned mode = 1;
    ok(si_parse_mode("0640", &mode) == 0 && mode == 0640, "mode 0640");
    ok(si_parse_mode("755", &mode) == 0 && mode == 0755, "mode 755, no leading 0");
    ok(si_parse_mode("0", &mode) == 0 && mode == 0, "mode 0");
    ok(si_parse_mode("00000777", &mode) == 0 && mode == 0777, "leading zeros");
    mode = 1;
    static const char *const bad_modes[] = {"", "1000", "0800", "64x", " 640", "+640", "-0",
                                            "0x1ff", "7777777777777777777777"};
    int refused = 0;
    for (size_t k = 0; k < sizeof(bad_modes) / sizeof(bad_modes[0]); k++)
        refused += si_parse_mode(bad_modes[k], &mode) < 0;
    ok(refused == 9 && mode == 1, "above 0777, non-octal, signs and spaces refused, mode untouched");
    ok(si_parse_u64("12x", &u) < 0, "trailing junk rejected");
    ok(si_parse_u64("", &u) < 0, "empty rejected");
    ok(si_parse_u64(" 1", &u) < 0, "leading space rejected");
    ok(si_parse_i64("-42", &i) == 0 && i == -42, "i64 negative parses");

    int64_t d;
    ok(si_parse_iso8601_duration("P1D", &d, &err) == 0 && d == 86400, "P1D is a day");
    ok(si_parse_iso8601_duration("PT12H", &d, &err) == 0 && d == 43200, "PT12H");
    ok(si_parse_iso8601_duration("P1DT2H30M5S", &d, &err) == 0 && d == 86400 + 9005,
       "P1DT2H30M5S");
    ok(si_parse_iso8601_duration("P2W", &d, &err) == 0 && d == 14 * 86400, "P2W");
    ok(si_parse_iso8601_duration("PT90S", &d, &err) == 0 && d == 90, "PT90S");
    ok(si_parse_iso8601_duration("P1M", &d, &err) < 0, "months refused: %s", err.text);
    ok(si_parse_iso8601_duration("PT", &d, &err) < 0, "PT alone refused: %s", err.text);
    ok(si_parse_iso8601_duration("P", &d, &err) < 0, "P alone refused");
    ok(si_parse_iso8601_duration("1D", &d, &err) < 0, "no P refused");
    ok(si_parse_iso8601_duration("PT1S2H", &d, &err) < 0, "units out of order refused");
    ok(si_parse_iso8601_duration("PT0S", &d, &err) < 0, "zero refused: %s", err.text);
    ok(si_parse_iso8601_duration("P1DT", &d, &err) < 0, "trailing T refused");
    ok(si_parse_iso8601_duration("P99999999999999999999D", &d, &err) < 0, "overflow refused");
    ok(si_parse_iso8601_duration("PT-5S", &d, &err) < 0, "negative refused");

    is_str(si_format_bytes(999, buf, sizeof(buf)), "999 B", "bytes below 1 kB");
    is_str(si_format_bytes(18000000000000ULL, buf, sizeof(buf)), "18.0 TB", "18 TB");
    is_str(si_format_duration(3723, buf, sizeof(buf)), "1h02m03s", "duration h/m/s");
    is_str(si_format_duration(4.25, buf, sizeof(buf)), "4.2s", "short duration");
    /* hex: one encoder, one digit decoder, one lower-case check */
    char hx[9];
    si_hex((const unsigned char *)"\x01\xab\xff\x10", 4, hx);
    is_str(hx, "01abff10", "si_hex writes lower-case pairs");
    ok(si_hex_digit('0') == 0 && si_hex_digit('9') == 9 && si_hex_digit('a') == 10 &&
       si_hex_digit('F') == 15, "si_hex_digit reads either case");
    ok(si_hex_digit('g') < 0 && si_hex_digit('/') < 0 && si_hex_digit('\0') < 0,
       "si_hex_digit refuses what is not a digit");
    {
        unsigned char bytes[4] = {0};
        ok(si_unhex("01aBfF10", 4, bytes) == 0 && memcmp(bytes, "\x01\xab\xff\x10", 4) == 0,
           "si_unhex reads hex of either case back into bytes");
        ok(si_unhex("01zz", 2, bytes) < 0 && si_unhex("0", 1, bytes) < 0,
           "si_unhex refuses a character that is not a hex digit (also a string cut short)");
        ok(si_unhex("", 0, bytes) == 0, "si_unhex of nothing is nothing");
    }
    ok(si_is_lower_hex("01abff10", 8), "si_is_lower_hex: lower-case digits");
    ok(!si_is_lower_hex("01ABff10", 8), "si_is_lower_hex: upper case refused");
    ok(si_digits(0, 10) == 1 && si_digits(9, 10) == 1 && si_digits(10, 10) == 2 &&
       si_digits(UINT64_MAX, 10) == 20, "si_digits: decimal, 0 has one digit, 2^64-1 has 20");
    ok(si_digits(0xfff, 16) == 3 && si_digits(0x1000, 16) == 4 && si_digits(5, 2) == 3,
       "si_digits: hex and binary");
    ok(si_is_lower_hex("abz", 2) && !si_is_lower_hex("abz", 3),
       "si_is_lower_hex reads len bytes, no more");
    {
        si_strbuf_t b;
        si_strbuf_init(&b, 1000);
        ok(si_strbuf_reserve(&b, 700) && b.cap >= 701 && b.len == 0 && !b.failed,
           "si_strbuf_reserve: room for the bytes and the NUL, nothing appended");
        char *before = b.data;
        ok(si_strbuf_puts(&b, "abc") && b.data == before && strcmp(si_strbuf_str(&b), "abc") == 0,
           "si_strbuf_reserve: appends within the room keep the buffer");
        ok(!si_strbuf_reserve(&b, 998) && b.failed, "si_strbuf_reserve past the limit fails");
        si_strbuf_free(&b);
    }
    return done_testing();
}
