/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's early answers, end to end: every response the relay makes
 * before it read a request whole (400, 408, 413, 431, and 502, 503, 504
 * while a body streams) says Connection: close and the connection closes
 * after it, so the request's rest, here a request smuggled in as the next
 * body bytes, is never read as a request: the recording backend never sees
 * it and nothing answers it. A 503 for a request read whole keeps its
 * connection, which serves the next request.
 */
#include <orbit/orbit.h>
#include "relay_harness.h"

#define SMUGGLED "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
#define BODY_STREAMS 150000   /* a Content-Length past the 64 KiB the relay holds: it streams */

static struct backend_seen *seen;
static uint16_t backend_port;
static uint16_t relay_port;   /* the main relay's: the recording backend, --max-body 200000 */

/* From here on, what reaches the backend is kept. */
static void record_from_now(void)
{
    atomic_store(&seen->log_len, 0);
    atomic_store(&seen->record, 1);
}

/* Nothing of the smuggled request reached the backend (a moment for a late one to arrive). */
static void ck_backend_never_saw_it(const char *what)
{
    tu_sleep_ms(200);
    size_t n = atomic_load(&seen->log_len);
    if (n > BACKEND_LOG_MAX)
        n = BACKEND_LOG_MAX;
    ck_assert_msg(!memmem(seen->log, n, "/smuggled", 9), "%s: the smuggled request reached the backend", what);
}

/* The relay's answer: that status, with Connection: close. */
static void ck_answer_closes(int fd, int status, const char *what)
{
    char buf[4096], want[16];
    read_response(fd, buf, sizeof buf, 5000);
    snprintf(want, sizeof want, "HTTP/1.1 %d", status);
    ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "%s: got '%.60s', want %d", what, buf, status);
    ck_assert_msg(strcasestr(buf, "\r\nConnection: close\r\n"), "%s: the %d keeps the connection: '%s'", what,
                  status, buf);
}

/* The request's rest, after the answer: nothing answers it, and the connection ends. */
static void ck_rest_is_no_request(int fd, const char *what)
{
    send_all(fd, SMUGGLED, strlen(SMUGGLED));   /* may fail: the relay closed already */
    char buf[4096];
    size_t got = 0;
    bool ended = false;
    int64_t end = tu_now_ns() + 3000000000ll;
    while (!ended && got + 1 < sizeof buf && tu_now_ns() < end) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        ended = k <= 0;
        got += k > 0 ? (size_t)k : 0;
    }
    buf[got] = 0;
    ck_assert_msg(got == 0, "%s: the rest was answered as a request: '%.80s'", what, buf);
    ck_assert_msg(ended, "%s: the connection stayed open after the answer", what);
    close(fd);
}

/* A POST whose Content-Length streams, and its first body bytes: the relay starts it at once. */
static int post_streaming(uint16_t port)
{
    int fd = connect_to(port);
    char head[256], body[1000];
    int n = snprintf(head, sizeof head, "POST /sum HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", BODY_STREAMS);
    memset(body, 'x', sizeof body);
    char *req = malloc((size_t)n + sizeof body);
    memcpy(req, head, (size_t)n);
    memcpy(req + n, body, sizeof body);
    send_all(fd, req, (size_t)n + sizeof body);   /* one write: read at once, with the head */
    free(req);
    return fd;
}

/* ---- the relay's own checks ----------------------------------------------------- */

/* n bytes of chunked body, in chunks of 10000 bytes: past 64 KiB the relay streams it on. */
static void send_chunks(int fd, size_t n)
{
    static char data[10000];
    memset(data, 'c', sizeof data);
    for (size_t sent = 0; sent < n; sent += sizeof data) {
        put_str(fd, "2710\r\n");
        send_all(fd, data, sizeof data);
        put_str(fd, "\r\n");
    }
}

#define CHUNKED_HEAD "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"

/* What is sent (a head, chunks of body, the bytes that break it), the answer, and what the
 * client sends after the answer before the smuggled request. */
static const struct early {
    const char *what;
    int status;
    const char *head;        /* NULL: a head longer than --max-head */
    size_t chunks;           /* bytes of chunked body after it (past 64 KiB: streaming) */
    const char *breaks;      /* after them, once the relay streams */
    const char *then;
} early[] = {
    { "400, a bad chunk line in a held body", 400, CHUNKED_HEAD "5\r\nhello\r\nzz\r\n", 0, NULL, NULL },
    { "400, a bad chunk line in a streaming body", 400, CHUNKED_HEAD, 100000, "zz\r\n", NULL },
    { "431, a head past --max-head", 431, NULL, 0, NULL, "\r\n\r\n" },
    { "413, a Content-Length past --max-body", 413,
      "POST /sum HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n", 0, NULL, NULL },
    { "413, a chunked body past --max-body", 413, CHUNKED_HEAD, 250000, NULL, NULL },
    { "408, a head that stops", 408, "POST /sum HTTP/1.1\r\nHo", 0, NULL, "st: t\r\nContent-Length: 0\r\n\r\n" },
    { "408, a held body that stops", 408, "POST /sum HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789",
      0, NULL, NULL },
};

START_TEST(own_answers_close)
{
    const struct early *e = &early[_i];
    record_from_now();
    int fd = connect_to(relay_port);
    if (e->head) {
        put_str(fd, e->head);
    } else {
        static char head[20000];
        int n = snprintf(head, sizeof head, "GET /x HTTP/1.1\r\nHost: t\r\nX-Long: ");
        memset(head + n, 'a', sizeof head - (size_t)n - 1);
        send_all(fd, head, sizeof head - 1);
    }
    send_chunks(fd, e->chunks);
    if (e->breaks) {
        tu_sleep_ms(200);   /* streaming before the bad line comes */
        put_str(fd, e->breaks);
    }
    ck_answer_closes(fd, e->status, e->what);
    if (e->then)
        put_str(fd, e->then);   /* what completes the request: what follows would be one */
    ck_rest_is_no_request(fd, e->what);
    ck_backend_never_saw_it(e->what);
}
END_TEST

/* ---- while the body streams: the source of the response failed ------------------ */

/* A relay in front of a backend that is not there (pid *pid); its port. */
static uint16_t relay_on(uint16_t port, const char *tag, pid_t *pid, char *extra2[])
{
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name(tag));
    char *extra[8] = { "--workers", "2" };
    for (int i = 0; extra2 && extra2[i] && i < 4; i++)
        extra[2 + i] = extra2[i];
    return relay_start(fleet, port, extra, pid);
}

START_TEST(refused_connect_502_streaming)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);   /* bound, never listening */
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &alen), 0);
    pid_t pid;
    uint16_t port = relay_on(ntohs(a.sin_port), "relay-502", &pid, NULL);
    int fd = post_streaming(port);
    ck_answer_closes(fd, 502, "a streaming body, the backend refusing");
    ck_rest_is_no_request(fd, "502 (streaming)");
    relay_stop(pid);
    close(s);
}
END_TEST

START_TEST(connect_timeout_504_streaming)
{
    /* A listener whose accept queue is full (backlog 0, one connection never accepted):
     * the kernel drops the relay's SYNs, and its connect times out. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s, 0), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &alen), 0);
    int filler = connect_to(ntohs(a.sin_port));
    pid_t pid;
    uint16_t port = relay_on(ntohs(a.sin_port), "relay-504", &pid, (char *[]){ "--connect-timeout", "300", NULL });
    int fd = post_streaming(port);
    ck_answer_closes(fd, 504, "a streaming body, the backend not answering its connect");
    ck_rest_is_no_request(fd, "504 (streaming)");
    relay_stop(pid);
    close(filler);
    close(s);
}
END_TEST

/*
 * A member of the relay's fleet holding every key of its pool (64, the relay's
 * key_capacity): a worker can register no upstream for the backend's key, so no
 * source can be had: 503. Joined before the relay starts, at the capacity its 2
 * workers join with (2 * 2 + 4), with the relay's pool spec.
 */
static struct orbit_fleet *fill_key_table(const char *fleet, struct orbit_pool **pool)
{
    struct orbit_fleet *f = tu_join(fleet, 8, -1, 0, tu_backing());
    const struct orbit_pool_spec spec = { .kind = ORBIT_POOL_KIND, .key_capacity = 64, .lane_capacity = 256,
                                          .generation_limit = 0 };
    ck_assert_int_eq(orbit_pool_open(f, &spec, pool), 0);
    int rc = 0, keys = 0;
    for (; rc == 0 && keys < 1000; keys++) {
        char name[32];
        snprintf(name, sizeof name, "filler-%d", keys);
        orbit_id id;
        rc = orbit_pool_register(*pool, orbit_key_from_string(name), 1, &id);
    }
    ck_assert_msg(rc == -ORBIT_EKEYFULL, "filling the key table: %s after %d keys (%s)", orbit_strerror(rc), keys,
                  orbit_last_error());
    return f;
}

START_TEST(no_source_503_streaming)
{
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-503"));
    struct orbit_pool *pool;
    struct orbit_fleet *f = fill_key_table(fleet, &pool);
    pid_t pid;
    uint16_t port = relay_start(fleet, backend_port, (char *[]){ "--workers", "2", NULL }, &pid);
    /* A request read whole: 503, and its connection serves the next one. */
    int keep = connect_to(port);
    char buf[4096];
    put_str(keep, "POST /sum HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    read_response(keep, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 503", 12) == 0, "a request read whole: got '%.60s'", buf);
    ck_assert_msg(!strcasestr(buf, "\r\nConnection: close\r\n"), "a 503 for a request read whole closed: '%s'", buf);
    record_from_now();
    int fd = post_streaming(port);
    ck_answer_closes(fd, 503, "a streaming body, no source");
    /* The table has room again: a request read as one now would reach the backend. */
    orbit_pool_close(pool);
    orbit_fleet_leave(f);
    ck_rest_is_no_request(fd, "503 (streaming)");
    ck_backend_never_saw_it("503 (streaming)");
    put_str(keep, "GET /after-503 HTTP/1.1\r\nHost: t\r\n\r\n");
    read_response(keep, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "/after-503"), "after the 503: '%.60s'", buf);
    close(keep);
    relay_stop(pid);
}
END_TEST

int main(void)
{
    pid_t bpid, rpid;
    backend_port = backend_start(&bpid, &seen);
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-early"));
    relay_port = relay_start(fleet, backend_port, (char *[]){ "--workers", "2", "--header-timeout", "1000",
                                                              "--max-body", "200000", NULL }, &rpid);
    Suite *s = suite_create("relay_early");
    TCase *tc = tcase_create("early answers");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, own_answers_close, 0, (int)(sizeof early / sizeof early[0]));
    tcase_add_test(tc, refused_connect_502_streaming);
    tcase_add_test(tc, connect_timeout_504_streaming);
    tcase_add_test(tc, no_source_503_streaming);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    relay_stop(rpid);
    kill(bpid, SIGKILL);
    waitpid(bpid, NULL, 0);
    return rc;
}
