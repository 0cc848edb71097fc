/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay as an HTTP/1.1 reverse proxy, from raw sockets: interim 1xx
 * responses, response framing (chunked with trailers, close-delimited), a
 * POST sent once, the smuggling vectors refused, hop-by-hop fields dropped,
 * HTTP/1.0 and Connection: close, timeouts, bodies beyond 16 KiB and chunked
 * request bodies, 100-continue, and the command line.
 */
#include "http_smuggling.h"
#include "relay_harness.h"

/* A chunked body this long streams through the relay (it holds 64 KiB). */
#define RELAY_STREAM_BODY (100u << 10)

static uint16_t relay_port, backend_port;
static char relay_fleet[64];
static struct backend_seen *seen;

static size_t ask(const char *req, char *buf, size_t cap)
{
    int fd = connect_to(relay_port);
    send_all(fd, req, strlen(req));
    size_t n = read_response(fd, buf, cap, 5000);
    close(fd);
    return n;
}

/* The body of a response in buf (after the head). */
static const char *body_of(const char *buf)
{
    const char *e = strstr(buf, "\r\n\r\n");
    return e ? e + 4 : "";
}

START_TEST(interim_1xx_is_never_the_response)
{
    /* Each request gets its own answer, never the one a 100 left behind on a shared upstream. */
    char buf[4096], req[128], path[32];
    int fd = connect_to(relay_port);
    for (int i = 0; i < 12; i++) {
        snprintf(path, sizeof path, "/100/%d", i);
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
        int c = i % 2 ? fd : connect_to(relay_port);
        send_all(c, req, strlen(req));
        read_response(c, buf, sizeof buf, 5000);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "request %d got '%.40s'", i, buf);
        ck_assert_str_eq(body_of(buf), path);
        if (c != fd)
            close(c);
    }
    close(fd);
}
END_TEST

START_TEST(interim_1xx_forwarded_to_http11_clients)
{
    /* 103 and 102 go on to an HTTP/1.1 client as they come (the backend holds its final
     * response until the 103 arrived here), without hop-by-hop fields; then the final
     * response, and the connection carries on. */
    char buf[4096];
    atomic_store(&seen->release, 0);
    int fd = connect_to(relay_port);
    put_str(fd, "GET /early HTTP/1.1\r\nHost: t\r\n\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 3000);
    atomic_store(&seen->release, 1);
    ck_assert_str_eq(buf, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n/early", 5000);
    static const char rest[] = "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\n";
    ck_assert_msg(strncmp(buf, rest, sizeof rest - 1) == 0, "got '%s'", buf);
    ck_assert_str_eq(body_of(strstr(buf, "HTTP/1.1 200")), "/early");
    put_str(fd, "GET /next HTTP/1.1\r\nHost: t\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_str_eq(body_of(buf), "/next");
    close(fd);
    /* HTTP/1.0 clients never see a 1xx (RFC 9110 15.2). */
    fd = connect_to(relay_port);
    put_str(fd, "GET /early HTTP/1.0\r\n\r\n");
    read_until(fd, buf, sizeof buf, NULL, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    ck_assert_ptr_null(strstr(buf, " 103 "));
    ck_assert_ptr_null(strstr(buf, " 102 "));
    ck_assert_str_eq(body_of(buf), "/early");
    close(fd);
    /* An interim response is not the response: a backend silent after it is still a 504. */
    fd = connect_to(relay_port);
    put_str(fd, "GET /early-slow HTTP/1.1\r\nHost: t\r\n\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 103", 12) == 0, "got '%.40s'", buf);
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 504", 12) == 0, "got '%.40s'", buf);
    close(fd);
}
END_TEST

START_TEST(chunked_and_close_delimited_responses)
{
    char buf[4096];
    int fd = connect_to(relay_port);
    put_str(fd, "GET /chunked HTTP/1.1\r\nHost: t\r\n\r\n");
    read_until(fd, buf, sizeof buf, "0\r\nX-T: 1\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.60s'", buf);
    ck_assert_ptr_nonnull(strstr(buf, "5\r\nhello\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, " world\r\n0\r\nX-T: 1\r\n\r\n"));
    /* The connection stays usable after it. */
    put_str(fd, "GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_str_eq(body_of(buf), "/after");
    close(fd);
    /* A close-delimited body reaches the client, which is told the connection closes. */
    fd = connect_to(relay_port);
    put_str(fd, "GET /close HTTP/1.1\r\nHost: t\r\n\r\n");
    read_until(fd, buf, sizeof buf, NULL, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.60s'", buf);
    ck_assert_ptr_nonnull(strcasestr(buf, "\r\nConnection: close\r\n"));
    ck_assert_str_eq(body_of(buf), "close-delimited body");
    close(fd);
}
END_TEST

START_TEST(post_reaches_the_backend_once)
{
    char buf[4096];
    int before = atomic_load(&seen->posts);
    ask("POST /drop HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", buf, sizeof buf);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 502", 12) == 0, "got '%.60s'", buf);
    tu_sleep_ms(300);
    ck_assert_int_eq(atomic_load(&seen->posts) - before, 1);
}
END_TEST

START_TEST(smuggling_vectors_get_400_and_close)
{
    static const char *const bad[] = {
        "POST /s HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /s HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        "POST /s HTTP/1.1\r\nHost: t\r\nContent-Length: 5x\r\n\r\nhello",
        "POST /s HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello",
        "GET /s HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n",
        "GET /s HTTP/1.1\nHost: t\n\n",
        "GET /s HTTP/1.1\r\nHost: t\rX: 1\r\n\r\n",
        "POST /s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST /s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "GET /s HTTP/1.1\r\n\r\n",
        /* A Transfer-Encoding libhttp-parser does not read as chunked, beside an
         * upgrade (which made it frame no body): it went upstream as it was. */
        "POST /s HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nTransfer-Encoding: chunked\t\r\n\r\n"
        "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
        "POST /s HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nTransfer-Encoding: chunked\r\n"
        "Transfer-Encoding-X: y\r\n\r\n0\r\n\r\n",
    };
    int before = atomic_load(&seen->requests);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[1024];
        int fd = connect_to(relay_port);
        send_all(fd, bad[i], strlen(bad[i]));
        read_until(fd, buf, sizeof buf, "\r\n\r\n", 3000);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 400", 12) == 0, "case %zu got '%.40s'", i, buf);
        ck_assert_msg(closed_within(fd, 3000), "case %zu: the connection stayed open", i);
        close(fd);
    }
    ck_assert_int_eq(atomic_load(&seen->requests), before);   /* none reached the backend */
}
END_TEST

START_TEST(hop_by_hop_fields_are_dropped)
{
    char buf[8192];
    ask("GET /echo HTTP/1.1\r\nHost: t\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n"
        "Keep-Alive: timeout=9\r\nTE: trailers\r\nUpgrade: websocket\r\nProxy-Authorization: Basic x\r\n"
        "X-Kept: 2\r\n\r\n", buf, sizeof buf);
    const char *seen_head = body_of(buf);
    ck_assert_ptr_nonnull(strstr(seen_head, "X-Kept: 2\r\n"));
    static const char *const gone[] = { "X-Secret", "Keep-Alive", "\r\nTE:", "Upgrade", "Proxy-Authorization" };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        ck_assert_msg(!strcasestr(seen_head, gone[i]), "the backend saw %s", gone[i]);
    ask("GET /hop HTTP/1.1\r\nHost: t\r\n\r\n", buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "X-Kept: 1\r\n"));
    static const char *const gone2[] = { "X-Hop", "Keep-Alive", "Upgrade", "Proxy-Authenticate" };
    for (size_t i = 0; i < sizeof gone2 / sizeof gone2[0]; i++)
        ck_assert_msg(!strcasestr(buf, gone2[i]), "the client saw %s", gone2[i]);
}
END_TEST

START_TEST(http10_and_connection_close)
{
    char buf[4096];
    int fd = connect_to(relay_port);
    put_str(fd, "GET /a HTTP/1.0\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_str_eq(body_of(buf), "/a");
    ck_assert_msg(!strcasestr(buf, "keep-alive"), "an HTTP/1.0 client was told keep-alive");
    ck_assert(closed_within(fd, 3000));
    close(fd);
    fd = connect_to(relay_port);
    put_str(fd, "GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_ptr_nonnull(strcasestr(buf, "\r\nConnection: keep-alive\r\n"));
    put_str(fd, "GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_str_eq(body_of(buf), "/c");
    close(fd);
    fd = connect_to(relay_port);
    put_str(fd, "GET /d HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_ptr_nonnull(strcasestr(buf, "\r\nConnection: close\r\n"));
    ck_assert(closed_within(fd, 3000));
    close(fd);
}
END_TEST

START_TEST(header_idle_and_response_timeouts)
{
    char buf[1024];
    int64_t t0 = tu_now_ns();
    int fd = connect_to(relay_port);       /* a head that never completes: 408 */
    put_str(fd, "GET / HTTP/1.1\r\nHost");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 408", 12) == 0, "got '%.40s'", buf);
    ck_assert(closed_within(fd, 2000));
    close(fd);
    fd = connect_to(relay_port);           /* idle: closed */
    ck_assert(closed_within(fd, 5000));
    close(fd);
    ck_assert_int_lt(tu_now_ns() - t0, 8000000000ll);
    ask("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n", buf, sizeof buf);   /* no answer in time: 504 */
    ck_assert_msg(strncmp(buf, "HTTP/1.1 504", 12) == 0, "got '%.40s'", buf);
    /* A body that stops coming once begun: the client's connection is cut (a 504 cannot
     * follow bytes of the response), not held as long as the backend likes. */
    fd = connect_to(relay_port);
    put_str(fd, "GET /stall-body HTTP/1.1\r\nHost: t\r\n\r\n");
    read_until(fd, buf, sizeof buf, "0123456789", 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    ck_assert_msg(closed_within(fd, 6000), "a stalled response body held the client for 6 s");
    close(fd);
    /* A client that stops reading its response: cut after the idle timeout (2 s here),
     * which lets the upstream go, instead of holding it as long as the client likes. */
    fd = connect_to(relay_port);
    put_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    tu_sleep_ms(4000);
    size_t got = 0;
    bool ended = false;
    char b[65536];
    for (;;) {
        struct pollfd pl = { .fd = fd, .events = POLLIN };
        if (poll(&pl, 1, 3000) <= 0)
            break;
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0) {
            ended = k == 0 || errno == ECONNRESET;
            break;
        }
        got += (size_t)k;
        ck_assert_msg(got < (64u << 20), "the whole response came: the client was never cut");
    }
    ck_assert_msg(ended, "read %zu bytes, and the connection did not end", got);
    close(fd);
}
END_TEST

START_TEST(large_and_chunked_request_bodies)
{
    size_t n = 100 * 1024;
    char *req = malloc(n + 256), buf[8192];
    int h = sprintf(req, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n", n);
    for (size_t i = 0; i < n; i++)
        req[h + i] = (char)(i * 131 + 7);   /* every byte value: NUL, CR and LF among them */
    int fd = connect_to(relay_port);
    send_all(fd, req, (size_t)h + n);
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    ck_assert_ptr_nonnull(strstr(buf, "body=102400"));
    /* Chunked: the backend gets the payload with its length. */
    put_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++) {
        put_str(fd, "2710\r\n");            /* 10000 bytes */
        send_all(fd, req + h, 10000);
        put_str(fd, "\r\n");
    }
    put_str(fd, "0\r\nX-Trailer: 1\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    ck_assert_ptr_nonnull(strstr(buf, "body=50000"));
    ck_assert_ptr_nonnull(strcasestr(body_of(buf), "Content-Length: 50000\r\n"));
    ck_assert_ptr_null(strcasestr(body_of(buf), "Transfer-Encoding"));
    close(fd);
    /* Over --max-body: 413 from the head alone, before any body byte is sent. */
    fd = connect_to(relay_port);
    put_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 413", 12) == 0, "got '%.40s'", buf);
    close(fd);
    free(req);
}
END_TEST

START_TEST(stalled_streamed_body_is_cut)
{
    /* A body that streams (over 64 KiB) and stops: cut after the header timeout, not held. */
    int fd = connect_to(relay_port);
    put_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 150000\r\n\r\n0123456789");
    int64_t t0 = tu_now_ns();
    ck_assert(closed_within(fd, 6000));
    ck_assert_int_lt(tu_now_ns() - t0, 6000000000ll);
    close(fd);
    /* The next streamed request still goes through. */
    size_t n = 150000;
    char *req = malloc(n + 128), buf[8192];
    int h = sprintf(req, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n", n);
    memset(req + h, 'y', n);
    fd = connect_to(relay_port);
    send_all(fd, req, (size_t)h + n);
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_ptr_nonnull(strstr(buf, "body=150000"));
    close(fd);
    free(req);
}
END_TEST

/* Sends the chunks of a chunked body of total payload bytes (every byte value) in
 * many sizes, with extensions, but not its last chunk; returns the payload's hash. */
static uint64_t send_chunked(int fd, size_t total)
{
    static char data[200000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 131 + 7);
    uint64_t hash = FNV_BASIS;
    size_t sent = 0;
    for (unsigned i = 0; sent < total; i++) {
        size_t n = (i * 7919u) % (i % 3 ? 70000u : 300u) + 1;   /* 1 byte .. 68 KiB */
        if (n > total - sent)
            n = total - sent;
        char line[64];
        snprintf(line, sizeof line, i % 5 ? "%zx\r\n" : "%zX;ext=%u\r\n", n, i);
        put_str(fd, line);
        const char *p = data + (sent % 1000);
        send_all(fd, p, n);
        put_str(fd, "\r\n");
        hash = fnv1a(hash, p, n);
        sent += n;
    }
    return hash;
}

/* send_chunked, then the last chunk and a trailer. */
static uint64_t send_chunked_body(int fd, size_t total)
{
    uint64_t hash = send_chunked(fd, total);
    put_str(fd, "0\r\nX-Trailer: 1\r\n\r\n");
    return hash;
}

/* Where the backend's log holds what (memmem), from byte from on; NULL if nowhere. */
static const char *log_find(size_t from, size_t to, const char *what)
{
    return from < to ? memmem(seen->log + from, to - from, what, strlen(what)) : NULL;
}

/*
 * Each malformed chunked body of http_smuggling.h, then another request, on a
 * connection of its own: 400 and the connection closed. After lead bytes of a
 * correct body (0: the body is held until it is whole; past 64 KiB it streams
 * to the backend as it comes). Then, from what the backend recorded: held,
 * not a byte reached it; streamed, the request never ended (no last chunk)
 * and nothing of the bad line or after it came; never a request answered.
 */
static void malformed_chunks_end_to_end(size_t lead)
{
    static const struct http_chunked_vector bad[] = { HTTP_CHUNKED_SMUGGLING_VECTORS };
    int before = atomic_load(&seen->requests);
    atomic_store(&seen->record, 1);
    size_t from = atomic_load(&seen->log_len);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[1024], next[96];
        int fd = connect_to(relay_port);
        put_str(fd, "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        if (lead) {
            send_chunked(fd, lead);
            tu_sleep_ms(50);   /* read, and streaming, before the bad line comes */
        }
        send_all(fd, bad[i].body, bad[i].len);
        snprintf(next, sizeof next, "GET /smuggled-%zu HTTP/1.1\r\nHost: t\r\n\r\n", i);
        put_str(fd, next);
        read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 400", 12) == 0, "%s (lead %zu): got '%.40s'", bad[i].name, lead, buf);
        ck_assert_msg(closed_within(fd, 3000), "%s (lead %zu): the connection stayed open", bad[i].name, lead);
        close(fd);
    }
    tu_sleep_ms(200);   /* what the relay may still send (it must not) has reached the backend */
    atomic_store(&seen->record, 0);
    size_t to = atomic_load(&seen->log_len);
    ck_assert_uint_le(to, BACKEND_LOG_MAX);
    const char *s = log_find(from, to, "/smuggled-");
    ck_assert_msg(!s, "the backend got %.16s", s);
    if (!lead)
        ck_assert_msg(to == from, "%zu bytes reached the backend: '%.80s'", to - from, seen->log + from);
    else
        ck_assert_msg(to > from && !log_find(from, to, "\r\n0\r\n"), "the backend got %s", to > from ? "a last chunk" : "nothing");
    ck_assert_int_eq(atomic_load(&seen->requests), before);
}

START_TEST(malformed_chunk_lines_get_400_and_close)
{
    malformed_chunks_end_to_end(0);
}
END_TEST

START_TEST(malformed_chunk_lines_cut_a_streamed_body)
{
    malformed_chunks_end_to_end(RELAY_STREAM_BODY);
}
END_TEST

START_TEST(correct_chunked_bodies_go_through)
{
    /* The strict reading takes every correct form: extensions (quoted strings too),
     * upper-case hex, leading zeros, trailers; the backend gets each payload whole. */
    static const struct http_chunked_good good[] = { HTTP_CHUNKED_GOOD_BODIES };
    int fd = connect_to(relay_port);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char buf[4096], want[128];
        put_str(fd, "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        put_str(fd, good[i].body);
        read_response(fd, buf, sizeof buf, 5000);
        size_t n = strlen(good[i].payload);
        snprintf(want, sizeof want, "bytes=%zu fnv=%016llx framing=length", n,
                 (unsigned long long)fnv1a(FNV_BASIS, good[i].payload, n));
        ck_assert_msg(strncmp(body_of(buf), want, strlen(want)) == 0, "body %zu: got '%s'", i, buf);
    }
    close(fd);
    /* A backend's chunked response with a bare LF in a size line: never passed on. */
    char buf[1024];
    ask("GET /chunked-bare-lf HTTP/1.1\r\nHost: t\r\n\r\n", buf, sizeof buf);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 502", 12) == 0, "got '%.60s'", buf);
}
END_TEST

/* A relay of its own on the test's backend: defaults but for two workers. */
static pid_t plain_relay(uint16_t *port)
{
    pid_t pid;
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-plain"));
    *port = relay_start(fleet, backend_port, (char *[]){ "--workers", "2", NULL }, &pid);
    return pid;
}

START_TEST(chunked_body_streams_through)
{
    /* 8 MiB in many chunks (the relay once held chunked bodies whole, up to 1 MiB), then
     * a pipelined request on the same connection. */
    uint16_t port;
    pid_t pid = plain_relay(&port);
    int before = atomic_load(&seen->posts);
    int fd = connect_to(port);
    put_str(fd, "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    uint64_t hash = send_chunked_body(fd, 8u << 20);
    put_str(fd, "GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
    char buf[8192], want[128];
    /* Both responses at once: pipelined, they may arrive in one segment. */
    read_until(fd, buf, sizeof buf, "\r\n\r\n/after", 20000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.60s'", buf);
    snprintf(want, sizeof want, "bytes=%u fnv=%016llx framing=chunked", 8u << 20, (unsigned long long)hash);
    ck_assert_msg(strncmp(body_of(buf), want, strlen(want)) == 0, "the backend saw '%s', not '%s'", body_of(buf), want);
    char *second = strstr(body_of(buf), "HTTP/1.1 ");
    ck_assert_msg(second != NULL, "no second response: '%s'", buf);
    ck_assert_str_eq(body_of(second), "/after");
    close(fd);
    ck_assert_int_eq(atomic_load(&seen->posts) - before, 1);
    /* Small and large bodies alike, one connection: each arrives whole. */
    fd = connect_to(port);
    size_t sizes[] = { 0, 1, 65535, 65537, 300000, 10 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        put_str(fd, "PUT /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        hash = send_chunked_body(fd, sizes[i]);
        read_response(fd, buf, sizeof buf, 10000);
        snprintf(want, sizeof want, "bytes=%zu fnv=%016llx ", sizes[i], (unsigned long long)hash);
        ck_assert_msg(strncmp(body_of(buf), want, strlen(want)) == 0, "size %zu: the backend saw '%s'", sizes[i],
                      body_of(buf));
    }
    close(fd);
    relay_stop(pid);
}
END_TEST

START_TEST(streamed_chunked_body_is_never_sent_twice)
{
    /* An idempotent PUT whose body streamed: the upstream drops it after reading it all;
     * the body is gone, so the relay answers 502 rather than sending it again. */
    uint16_t port;
    pid_t pid = plain_relay(&port);
    int before = atomic_load(&seen->requests);
    int fd = connect_to(port);
    put_str(fd, "PUT /drop HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    send_chunked_body(fd, 300000);
    char buf[1024];
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 502", 12) == 0, "got '%.60s'", buf);
    close(fd);
    tu_sleep_ms(300);
    ck_assert_int_eq(atomic_load(&seen->requests) - before, 1);
    relay_stop(pid);
}
END_TEST

START_TEST(streamed_chunked_body_errors)
{
    /* Past what is held (so it streams), a malformed chunk: 400 and the connection closed;
     * a stalled one: cut after the header timeout. Then a request still goes through. */
    char buf[1024];
    int fd = connect_to(relay_port);
    put_str(fd, "PUT /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    send_chunked(fd, 100000);   /* its last chunk is not sent: the body goes on */
    tu_sleep_ms(200);           /* read, and streaming, before the bad chunk comes */
    put_str(fd, "zz\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 400", 12) == 0, "got '%.60s'", buf);
    ck_assert(closed_within(fd, 3000));
    close(fd);
    fd = connect_to(relay_port);
    put_str(fd, "PUT /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    send_chunked(fd, 100000);
    put_str(fd, "10\r\n0123");
    int64_t t0 = tu_now_ns();
    ck_assert(closed_within(fd, 6000));
    ck_assert_int_lt(tu_now_ns() - t0, 6000000000ll);
    close(fd);
    fd = connect_to(relay_port);
    put_str(fd, "GET /after-errors HTTP/1.1\r\nHost: t\r\n\r\n");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_str_eq(body_of(buf), "/after-errors");
    close(fd);
}
END_TEST

START_TEST(chunked_body_over_max_body)
{
    /* --max-body 200000: a chunked body past it is answered 413 and the connection closed. */
    int fd = connect_to(relay_port);
    put_str(fd, "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    send_chunked_body(fd, 250000);
    char buf[1024];
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 413", 12) == 0, "got '%.60s'", buf);
    ck_assert(closed_within(fd, 3000));
    close(fd);
}
END_TEST

START_TEST(expect_100_continue)
{
    char buf[4096];
    int fd = connect_to(relay_port);
    put_str(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    read_until(fd, buf, sizeof buf, "\r\n\r\n", 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 100", 12) == 0, "got '%.40s'", buf);
    put_str(fd, "hello");
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    ck_assert_ptr_nonnull(strstr(buf, "body=5"));
    ck_assert_ptr_null(strcasestr(body_of(buf), "Expect:"));
    close(fd);
}
END_TEST

/* The sum of a counter over the relay's workers (orbit-relay --stats FLEET --json). */
static long long stat_sum(const char *fleet, const char *key)
{
    char out[16384], pat[64];
    pid_t pid;
    int fd = spawn_out((char *[]){ (char *)relay_bin(), "--stats", (char *)fleet, "--json", NULL }, &pid);
    read_until(fd, out, sizeof out, NULL, 5000);
    close(fd);
    ck_assert_int_eq(tu_wait_child(pid, 5000), 0);
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    long long sum = 0;
    int seen_any = 0;
    for (const char *p = strstr(out, pat); p; p = strstr(p + 1, pat), seen_any++)
        sum += strtoll(p + strlen(pat), NULL, 10);
    ck_assert_msg(seen_any > 0, "no %s in %s", key, out);
    return sum;
}

/* Reads a response from fd until the connection ends or ms pass without a
 * byte: how many body bytes (past the head) came, whether each was c, and
 * whether the connection ended. */
static size_t read_to_end(int fd, int ms, char c, bool *all_c, bool *ended)
{
    char b[65536];
    size_t got = 0, head = 0;
    *all_c = true;
    *ended = false;
    for (;;) {
        struct pollfd pl = { .fd = fd, .events = POLLIN };
        if (poll(&pl, 1, ms) <= 0)
            return got;
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0) {
            *ended = true;
            return got;
        }
        size_t i = 0;
        if (head == 0) {   /* the head comes whole in the first read here */
            char *e = memmem(b, (size_t)k, "\r\n\r\n", 4);
            ck_assert_msg(e != NULL, "no head in the first %zd bytes", k);
            head = (size_t)(e - b) + 4;
            i = head;
        }
        for (; i < (size_t)k; i++, got++)
            *all_c = *all_c && b[i] == c;
    }
}

START_TEST(long_bodies_go_by_splice)
{
    /* A 64 MiB body, read at the client's pace: all of it, every byte, and the
     * relay says it went by splice. */
    long long before = stat_sum(relay_fleet, "spliced");
    int fd = connect_to(relay_port);
    put_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    bool all_b, ended;
    size_t got = read_to_end(fd, 5000, 'b', &all_b, &ended);
    close(fd);
    ck_assert_msg(ended && all_b, "ended %d, body intact %d", ended, all_b);
    ck_assert_uint_eq(got, 64u << 20);
    ck_assert_int_eq(stat_sum(relay_fleet, "spliced"), before + 1);
    /* A backend that closes mid-body, and one that stalls (the response timeout,
     * 1.5 s here): the client's connection is cut short of the length its head said. */
    static const char *const cut[] = { "/cut-long", "/stall-long" };
    for (int i = 0; i < 2; i++) {
        char req[96];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", cut[i]);
        fd = connect_to(relay_port);
        put_str(fd, req);
        int64_t t0 = tu_now_ns();
        got = read_to_end(fd, 4000, 'c', &all_b, &ended);
        close(fd);
        ck_assert_msg(ended && all_b, "%s: ended %d, body intact %d", cut[i], ended, all_b);
        ck_assert_msg(got == (256u << 10), "%s: %zu body bytes", cut[i], got);
        ck_assert_msg(tu_now_ns() - t0 < 4000000000ll, "%s: cut after %lld ms", cut[i],
                      (long long)((tu_now_ns() - t0) / 1000000));
    }
    /* A client that leaves mid-body: the relay goes on serving. */
    fd = connect_to(relay_port);
    put_str(fd, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    char b[1 << 16];
    ck_assert_int_gt(recv(fd, b, sizeof b, 0), 0);
    close(fd);
    char buf[1024];
    ask("GET /after HTTP/1.1\r\nHost: t\r\n\r\n", buf, sizeof buf);
    ck_assert_str_eq(body_of(buf), "/after");
}
END_TEST

START_TEST(response_timeout_is_504_on_any_worker)
{
    /* One upstream, two workers: a request accepted by the worker that does not own the
     * idle upstream is relayed through the owner. A backend that never answers is a 504
     * either way (it was a 502 through the owner). */
    char fleet[64], buf[1024];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-504"));
    pid_t pid;
    uint16_t port = relay_start(fleet, backend_port, (char *[]){ "--workers", "2", "--upstreams", "1",
                                                                 "--response-timeout", "400", NULL }, &pid);
    int remote_rounds = 0;
    for (int round = 0; round < 24 && remote_rounds < 2; round++) {
        int warm = connect_to(port), slow = connect_to(port);
        put_str(warm, "GET /warm HTTP/1.1\r\nHost: t\r\n\r\n");   /* the upstream: dialled by warm's worker */
        read_response(warm, buf, sizeof buf, 5000);
        ck_assert_str_eq(body_of(buf), "/warm");
        long long remote = stat_sum(fleet, "remote_leases");
        int before = atomic_load(&seen->requests);
        put_str(slow, round % 2 ? "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"
                                : "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
        read_until(slow, buf, sizeof buf, "\r\n\r\n", 5000);
        bool via_owner = stat_sum(fleet, "remote_leases") > remote;
        remote_rounds += via_owner;
        ck_assert_msg(strncmp(buf, "HTTP/1.1 504", 12) == 0, "round %d (%s): got '%.40s'", round,
                      via_owner ? "through the owner" : "local", buf);
        /* A request that timed out is not sent again, GET or POST. */
        ck_assert_msg(atomic_load(&seen->requests) - before == 1, "round %d (%s): the backend saw it %d times",
                      round, via_owner ? "through the owner" : "local", atomic_load(&seen->requests) - before);
        close(warm);
        close(slow);
    }
    ck_assert_msg(remote_rounds > 0, "no request went through the upstream's owner in 24 rounds");
    relay_stop(pid);
}
END_TEST

START_TEST(a_refused_connect_is_one_502_not_a_retry_storm)
{
    /* A backend that is down: each request gets its 502 from one refused connect and the
     * connection stays usable; the relay does not dial again for the same request. */
    char fleet[64], buf[1024];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-down"));
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &alen), 0);
    uint16_t dead = ntohs(a.sin_port);   /* bound, never listening: connects are refused */
    pid_t pid;
    uint16_t port = relay_start(fleet, dead, (char *[]){ "--workers", "2", NULL }, &pid);
    int fd = connect_to(port);
    enum { N = 20 };
    for (int i = 0; i < N; i++) {
        put_str(fd, i % 2 ? "GET /down HTTP/1.1\r\nHost: t\r\n\r\n"
                          : "POST /down HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
        read_response(fd, buf, sizeof buf, 5000);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 502", 12) == 0, "request %d: got '%.40s'", i, buf);
    }
    close(fd);
    ck_assert_int_eq(stat_sum(fleet, "retries"), 0);
    ck_assert_int_eq(stat_sum(fleet, "upstream_failures"), N);
    relay_stop(pid);
    close(s);
}
END_TEST

/* Runs the relay with args; its exit status and stderr. */
static int run_cli(char *const args[], char *err, size_t cap)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        char *argv[8] = { (char *)relay_bin() };
        for (int i = 0; args[i] && i < 6; i++)
            argv[i + 1] = args[i];
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = read_until(p[0], err, cap, NULL, 5000);
    err[got] = 0;
    close(p[0]);
    return tu_wait_child(pid, 5000);
}

START_TEST(command_line)
{
    char err[1024];
    ck_assert_int_eq(run_cli((char *[]){ "--help", NULL }, err, sizeof err), 0);
    ck_assert_int_eq(run_cli((char *[]){ "--version", NULL }, err, sizeof err), 0);
    char *bad[][4] = { { "--workers", "abc", NULL }, { "--no-such-option", NULL },
                       { "--fleet", "x", "--listen", NULL }, { "--max-body", "-1", NULL } };
    const char *named[] = { "--workers", "--no-such-option", "--listen", "--max-body" };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(run_cli(bad[i], err, sizeof err), 2);
        ck_assert_msg(strstr(err, named[i]), "case %zu: '%s' does not name %s", i, err, named[i]);
        ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "case %zu: not one line: '%s'", i, err);
    }
}
END_TEST

int main(void)
{
    pid_t bpid, rpid;
    uint16_t bport = backend_start(&bpid, &seen);
    backend_port = bport;
    snprintf(relay_fleet, sizeof relay_fleet, "%s", tu_fleet_name("relay-http"));
    char *extra[] = { "--workers", "2", "--header-timeout", "1000", "--idle-timeout", "2000",
                      "--response-timeout", "1500", "--max-body", "200000", NULL };
    relay_port = relay_start(relay_fleet, bport, extra, &rpid);

    Suite *s = suite_create("relay");
    TCase *tc = tcase_create("proxy");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, interim_1xx_is_never_the_response);
    tcase_add_test(tc, interim_1xx_forwarded_to_http11_clients);
    tcase_add_test(tc, chunked_and_close_delimited_responses);
    tcase_add_test(tc, post_reaches_the_backend_once);
    tcase_add_test(tc, smuggling_vectors_get_400_and_close);
    tcase_add_test(tc, hop_by_hop_fields_are_dropped);
    tcase_add_test(tc, http10_and_connection_close);
    tcase_add_test(tc, header_idle_and_response_timeouts);
    tcase_add_test(tc, large_and_chunked_request_bodies);
    tcase_add_test(tc, stalled_streamed_body_is_cut);
    tcase_add_test(tc, chunked_body_streams_through);
    tcase_add_test(tc, streamed_chunked_body_is_never_sent_twice);
    tcase_add_test(tc, streamed_chunked_body_errors);
    tcase_add_test(tc, malformed_chunk_lines_get_400_and_close);
    tcase_add_test(tc, malformed_chunk_lines_cut_a_streamed_body);
    tcase_add_test(tc, correct_chunked_bodies_go_through);
    tcase_add_test(tc, chunked_body_over_max_body);
    tcase_add_test(tc, expect_100_continue);
    tcase_add_test(tc, long_bodies_go_by_splice);
    tcase_add_test(tc, response_timeout_is_504_on_any_worker);
    tcase_add_test(tc, a_refused_connect_is_one_502_not_a_retry_storm);
    tcase_add_test(tc, command_line);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    relay_stop(rpid);
    kill(bpid, SIGKILL);
    waitpid(bpid, NULL, 0);
    return rc;
}
