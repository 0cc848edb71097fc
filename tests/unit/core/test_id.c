/* SPDX-License-Identifier: MIT */
/* orbit_id packing, text form and strict parser; orbit_strerror. */
#include <string.h>
#include "testutil.h"

START_TEST(id_fields_pack_and_unpack)
{
    orbit_id id = orbit_id_make(246, 4095, 0xabcdef, 0x1234);
    ck_assert_uint_eq(orbit_id_kind(id), 246);
    ck_assert_uint_eq(orbit_id_node(id), 4095);
    ck_assert_uint_eq(orbit_id_generation(id), 0xabcdef);
    ck_assert_uint_eq(orbit_id_slot(id), 0x1234);
    ck_assert_uint_eq(orbit_id_counter(id), (0xabcdefull << 16) | 0x1234);
}
END_TEST

START_TEST(id_text_round_trips)
{
    orbit_id ids[] = { 0, orbit_id_make(247, 1, 1, 0), orbit_id_make(255, 65535, 0xffffff, 0xffff) };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char buf[ORBIT_ID_TEXT_MAX];
        int n = orbit_id_format(ids[i], buf, sizeof buf);
        ck_assert_int_eq(n, (int)strlen(buf));
        orbit_id back = 1;
        ck_assert_int_eq(orbit_id_parse(buf, &back), 0);
        ck_assert_uint_eq(back, ids[i]);
    }
    char buf[ORBIT_ID_TEXT_MAX];
    ck_assert_int_eq(orbit_id_format(orbit_id_make(246, 3, 2, 7), buf, sizeof buf), 12);
    ck_assert_str_eq(buf, "246:3:131079");
}
END_TEST

START_TEST(id_format_refuses_a_short_buffer)
{
    char buf[8];
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(orbit_id_format(orbit_id_make(246, 3, 2, 7), buf, sizeof buf), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_id_format(orbit_id_make(246, 3, 2, 7), NULL, 0), -ORBIT_EMALFORMED);
    char exact[13];
    ck_assert_int_eq(orbit_id_format(orbit_id_make(246, 3, 2, 7), exact, sizeof exact), 12);
    ck_assert_int_eq(orbit_id_format(orbit_id_make(246, 3, 2, 7), exact, 12), -ORBIT_ETOOLARGE);
}
END_TEST

START_TEST(id_parse_takes_hex)
{
    orbit_id id;
    ck_assert_int_eq(orbit_id_parse("0xf6000300020007", &id), 0);
    ck_assert_uint_eq(id, 0xf6000300020007ull);
    ck_assert_int_eq(orbit_id_parse("0XFFFFFFFFFFFFFFFF", &id), 0);
    ck_assert_uint_eq(id, UINT64_MAX);
}
END_TEST

START_TEST(id_parse_refuses_malformed_text)
{
    static const char *bad[] = {
        "", ":", "1:2", "1:2:", ":2:3", "1::3", "1:2:3:", "1:2:3 ", " 1:2:3", "+1:2:3", "-1:2:3",
        "256:0:0", "0:65536:0", "0:0:1099511627776", "1:2:3x", "0x", "0x1g", "0x00000000000000000",
        "99999999999999999999999:0:0", "1:2:18446744073709551616", "abc", "1;2;3",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        orbit_id id = 42;
        ck_assert_msg(orbit_id_parse(bad[i], &id) == -ORBIT_EMALFORMED, "accepted '%s'", bad[i]);
        ck_assert_uint_eq(id, 42);   /* untouched on failure */
    }
    orbit_id id;
    ck_assert_int_eq(orbit_id_parse(NULL, &id), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_id_parse("1:2:3", NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_id_parse("255:65535:1099511627775", &id), 0);
    ck_assert_uint_eq(id, UINT64_MAX);
}
END_TEST

START_TEST(strerror_names_every_code_either_sign)
{
    int codes[] = { ORBIT_ESTALE, ORBIT_EBUSY, ORBIT_EDRAINING, ORBIT_ENOTOWNER, ORBIT_ENOTRESERVED,
                    ORBIT_EBUDGET, ORBIT_EKEYFULL, ORBIT_EFULL, ORBIT_EPAYLOADFULL, ORBIT_ETOOLARGE,
                    ORBIT_EMALFORMED, ORBIT_ECLAIMED, ORBIT_ECLOSED, ORBIT_ERESET, ORBIT_EPEERGONE,
                    ORBIT_EAGAIN, ORBIT_ETIMEDOUT, ORBIT_EGEOMETRY, ORBIT_ECORRUPT, ORBIT_EPOISONED,
                    ORBIT_ECLOSEDADM, ORBIT_ENOTSUP };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        ck_assert_ptr_nonnull(orbit_strerror(codes[i]));
        ck_assert_str_eq(orbit_strerror(codes[i]), orbit_strerror(-codes[i]));
    }
    ck_assert_ptr_nonnull(strstr(orbit_strerror(-ORBIT_ECORRUPT), "bounds"));
    ck_assert_ptr_nonnull(orbit_strerror(-99999));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("id");
    TCase *tc = tcase_create("id");
    tcase_add_test(tc, id_fields_pack_and_unpack);
    tcase_add_test(tc, id_text_round_trips);
    tcase_add_test(tc, id_format_refuses_a_short_buffer);
    tcase_add_test(tc, id_parse_takes_hex);
    tcase_add_test(tc, id_parse_refuses_malformed_text);
    tcase_add_test(tc, strerror_names_every_code_either_sign);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
