/* The ibex C API end to end from plain C11, linked against libibex.so: device list,
 * open, PD, MR, CQ, two QPs of two contexts connected to each other in one process, an
 * RDMA WRITE and a SEND (with immediate), completions, counters, the endpoint address
 * in binary and string form, error paths, teardown. Exits non-zero on any failure. */
#include <ibex/ibex.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    ibex_last_error());                                                     \
            ++failures;                                                                     \
        }                                                                                   \
    } while (0)

#define REQUIRE_OK(expr)                                                                    \
    do {                                                                                    \
        ibex_status_t st_ = (expr);                                                         \
        if (st_ != IBEX_OK) {                                                               \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, ibex_strerror(st_), \
                    ibex_last_error());                                                     \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

struct side {
    ibex_context_t *ctx;
    ibex_pd_t *pd;
    ibex_cq_t *cq;
    ibex_qp_t *qp;
    ibex_mr_t *mr;
    unsigned char *buf;
};

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC); /* C11; no POSIX needed */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_side(struct side *s, size_t len) {
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    memset(s, 0, sizeof *s);
    REQUIRE_OK(ibex_open_device("udp:lo", NULL, &s->ctx));
    CHECK(strcmp(ibex_context_device_name(s->ctx), "udp:lo") == 0);
    REQUIRE_OK(ibex_alloc_pd(s->ctx, &s->pd));
    REQUIRE_OK(ibex_create_cq(s->ctx, 64, &s->cq));
    qa.send_cq = s->cq;
    qa.recv_cq = s->cq;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    REQUIRE_OK(ibex_create_qp(s->pd, &qa, &s->qp));
    s->buf = calloc(1, len);
    if (!s->buf) return 1;
    REQUIRE_OK(ibex_reg_mr(s->pd, s->buf, len,
                           IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ, &s->mr));
    return 0;
}

static void close_side(struct side *s) {
    if (s->mr) CHECK(ibex_dereg_mr(s->mr) == IBEX_OK);
    if (s->qp) CHECK(ibex_destroy_qp(s->qp) == IBEX_OK);
    if (s->cq) CHECK(ibex_destroy_cq(s->cq) == IBEX_OK);
    if (s->pd) CHECK(ibex_dealloc_pd(s->pd) == IBEX_OK);
    if (s->ctx) CHECK(ibex_close_device(s->ctx) == IBEX_OK);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* Polls until one completion arrives (5 s at most). */
static int wait_one(ibex_cq_t *cq, ibex_wc_t *wc) {
    double end = now_s() + 5.0;
    while (now_s() < end) {
        int n = 0;
        if (ibex_poll_cq(cq, 1, wc, &n) != IBEX_OK) return 0;
        if (n == 1) return 1;
    }
    return 0;
}

int main(void) {
    enum { LEN = 1 << 20, MSG = 100000 };
    ibex_device_list_t *list = NULL;
    int ndev = 0, i, found = 0;
    struct side a, b;
    ibex_ep_addr_t aa, ba, parsed;
    uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
    char str[IBEX_EP_ADDR_STR_LEN];
    ibex_sge_t sge;
    ibex_send_wr_t wr;
    ibex_send_wr_t *bad_wr = NULL;
    ibex_recv_wr_t rwr;
    ibex_wc_t wc;
    ibex_counters_t ka, kb;
    ibex_qp_attr_t qattr = IBEX_QP_ATTR_INIT;

    CHECK(ibex_version() == IBEX_VERSION);
    CHECK(strlen(ibex_version_string()) > 0);

    /* Devices. */
    REQUIRE_OK(ibex_get_device_list(&list, &ndev));
    for (i = 0; i < ndev; ++i) {
        CHECK(ibex_device_name(list, i) != NULL);
        CHECK(ibex_device_provider(list, i) != NULL);
        if (strcmp(ibex_device_name(list, i), "udp:lo") == 0) found = 1;
    }
    CHECK(found);
    CHECK(ibex_device_name(list, ndev) == NULL);
    ibex_free_device_list(list);

    /* Two endpoints, connected through their exchanged addresses (string form for one
     * direction, binary for the other, as two processes would). */
    if (open_side(&a, LEN) || open_side(&b, LEN)) return 1;
    REQUIRE_OK(ibex_qp_local_addr(a.qp, &aa));
    REQUIRE_OK(ibex_qp_local_addr(b.qp, &ba));
    CHECK(aa.qpn == ibex_qp_num(a.qp));
    REQUIRE_OK(ibex_ep_addr_to_string(&aa, str, sizeof str));
    CHECK(strncmp(str, "ibex1:127.", 10) == 0);
    REQUIRE_OK(ibex_ep_addr_from_string(str, &parsed));
    CHECK(memcmp(parsed.gid, aa.gid, 16) == 0 && parsed.qpn == aa.qpn && parsed.psn == aa.psn &&
          parsed.udp_port == aa.udp_port && parsed.mtu == aa.mtu);
    REQUIRE_OK(ibex_ep_addr_pack(&ba, wire, sizeof wire));
    memset(&ba, 0, sizeof ba);
    REQUIRE_OK(ibex_ep_addr_unpack(wire, sizeof wire, &ba));
    CHECK(ba.qpn == ibex_qp_num(b.qp));
    REQUIRE_OK(ibex_qp_connect(a.qp, &ba));
    REQUIRE_OK(ibex_qp_connect(b.qp, &parsed));
    REQUIRE_OK(ibex_query_qp(a.qp, &qattr));
    CHECK(qattr.qp_state == IBEX_QPS_RTS);
    CHECK(qattr.dest.qpn == ibex_qp_num(b.qp));

    /* RDMA WRITE a -> b. */
    for (i = 0; i < MSG; ++i) a.buf[i] = (unsigned char)(i * 31 + 7);
    sge.addr = (uint64_t)(uintptr_t)a.buf;
    sge.length = MSG;
    sge.lkey = ibex_mr_lkey(a.mr);
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_RDMA_WRITE;
    wr.send_flags = IBEX_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)(b.buf + 4096);
    wr.wr.rdma.rkey = ibex_mr_rkey(b.mr);
    REQUIRE_OK(ibex_post_send(a.qp, &wr, &bad_wr));
    CHECK(wait_one(a.cq, &wc));
    CHECK(wc.wr_id == 1 && wc.status == IBEX_WC_SUCCESS && wc.opcode == IBEX_WC_RDMA_WRITE);
    CHECK(memcmp(b.buf + 4096, a.buf, MSG) == 0);
    CHECK(b.buf[4095] == 0 && b.buf[4096 + MSG] == 0);

    /* SEND_WITH_IMM b -> a into a posted receive; a waits on the CQ's fd. */
    memset(&rwr, 0, sizeof rwr);
    sge.addr = (uint64_t)(uintptr_t)(a.buf + 500000);
    sge.length = 5000;
    sge.lkey = ibex_mr_lkey(a.mr);
    rwr.wr_id = 2;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    REQUIRE_OK(ibex_post_recv(a.qp, &rwr, NULL));
    {
        ibex_sge_t s2;
        s2.addr = (uint64_t)(uintptr_t)(b.buf + 4096);
        s2.length = 3333;
        s2.lkey = ibex_mr_lkey(b.mr);
        memset(&wr, 0, sizeof wr);
        wr.wr_id = 3;
        wr.sg_list = &s2;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_SEND_WITH_IMM;
        wr.imm_data = 0xfeed;
        wr.send_flags = IBEX_SEND_SIGNALED;
        REQUIRE_OK(ibex_post_send(b.qp, &wr, NULL));
    }
    REQUIRE_OK(ibex_req_notify_cq(a.cq));
    {
        ibex_status_t st = ibex_cq_wait(a.cq, 5000);
        CHECK(st == IBEX_OK);
    }
    CHECK(wait_one(a.cq, &wc));
    CHECK(wc.wr_id == 2 && wc.status == IBEX_WC_SUCCESS && wc.opcode == IBEX_WC_RECV);
    CHECK(wc.byte_len == 3333 && wc.imm_data == 0xfeed && (wc.wc_flags & IBEX_WC_WITH_IMM));
    CHECK(memcmp(a.buf + 500000, a.buf, 3333) == 0);
    CHECK(wait_one(b.cq, &wc));
    CHECK(wc.wr_id == 3 && wc.status == IBEX_WC_SUCCESS && wc.opcode == IBEX_WC_SEND);

    /* Counters. */
    memset(&ka, 0, sizeof ka);
    memset(&kb, 0, sizeof kb);
    ka.size = sizeof ka;
    kb.size = sizeof kb;
    REQUIRE_OK(ibex_query_counters(a.ctx, &ka));
    REQUIRE_OK(ibex_query_counters(b.ctx, &kb));
    CHECK(ka.tx_packets > 0 && ka.rx_packets > 0 && kb.rx_bytes >= MSG);
    CHECK(ka.rx_icrc_errors == 0 && kb.rx_icrc_errors == 0);
    {
        ibex_device_attr_t da;
        memset(&da, 0, sizeof da);
        da.size = sizeof da;
        REQUIRE_OK(ibex_query_device(a.ctx, &da));
        CHECK(da.max_msg_size >= MSG && ibex_mtu_to_bytes((ibex_mtu_t)da.max_mtu) >= 256 && da.efficient_msg_bytes > 0);
    }

    /* Error paths: each returns its status and leaves a detail message. */
    {
        ibex_context_t *no_ctx = NULL;
        ibex_cq_t *no_cq = NULL;
        ibex_mr_t *no_mr = NULL;
        CHECK(ibex_open_device("nosuch:x", NULL, &no_ctx) == IBEX_ERR_NO_DEVICE && ibex_last_error()[0] != '\0');
        CHECK(no_ctx == NULL);
        CHECK(ibex_create_cq(b.ctx, 0, &no_cq) == IBEX_ERR_INVALID_ARGUMENT && ibex_last_error()[0] != '\0');
        CHECK(ibex_reg_mr(b.pd, b.buf, 0, IBEX_ACCESS_LOCAL_WRITE, &no_mr) == IBEX_ERR_INVALID_ARGUMENT);
        CHECK(ibex_alloc_pd(NULL, NULL) == IBEX_ERR_INVALID_ARGUMENT);
    }
    CHECK(ibex_post_send(NULL, &wr, NULL) == IBEX_ERR_INVALID_ARGUMENT);
    CHECK(ibex_ep_addr_from_string("ibex1:garbage", &parsed) == IBEX_ERR_INVALID_ARGUMENT);
    CHECK(ibex_destroy_cq(b.cq) == IBEX_ERR_INVALID_STATE); /* still used by b.qp */
    CHECK(ibex_cq_wait(b.cq, 10) == IBEX_ERR_TIMEOUT);
    {
        /* A bad rkey: REM_ACCESS_ERR, then the QP is in ERR. */
        ibex_sge_t s3;
        s3.addr = (uint64_t)(uintptr_t)b.buf;
        s3.length = 16;
        s3.lkey = ibex_mr_lkey(b.mr);
        memset(&wr, 0, sizeof wr);
        wr.wr_id = 4;
        wr.sg_list = &s3;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_RDMA_WRITE;
        wr.send_flags = IBEX_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)a.buf;
        wr.wr.rdma.rkey = 0;
        REQUIRE_OK(ibex_post_send(b.qp, &wr, NULL));
        CHECK(wait_one(b.cq, &wc));
        CHECK(wc.wr_id == 4 && wc.status == IBEX_WC_REM_ACCESS_ERR);
        CHECK(strcmp(ibex_wc_status_str(wc.status), "IBV_WC_REM_ACCESS_ERR") == 0);
        REQUIRE_OK(ibex_query_qp(b.qp, &qattr));
        CHECK(qattr.qp_state == IBEX_QPS_ERR);
    }

    /* Teardown, in dependency order. */
    close_side(&a);
    close_side(&b);
    if (failures) fprintf(stderr, "c_api_c11: %d check(s) failed\n", failures);
    else printf("c_api_c11: all checks passed\n");
    return failures ? 1 : 0;
}
