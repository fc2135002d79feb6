/*
 * ops.c - the operational routes: health and readiness probes, drain and
 * Prometheus metrics.
 */
#include <stdio.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/json.h"

void
wire_healthz(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    (void)a;
    (void)r;
    static const char ok[] = "{\"status\":\"ok\"}\n";
    http_respond(req, 200, "application/json", ok, sizeof(ok) - 1);
}

void
wire_readyz(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    (void)r;
    json_t *o = json_object();
    const char *missing = table_missing(a->table);
    bool draining = table_draining(a->table);
    bool ready = !missing[0] && !draining;
    (void)json_set(o, "ready", json_boolean(ready));
    (void)json_set(o, "isolation", json_string(a->cfg.isolation));
    (void)json_set(o, "cgroup", json_string(a->cfg.cgroup));
    (void)json_set(o, "draining", json_boolean(draining));
    json_t *miss = json_array();
    if (missing[0]) {
        /* one entry per ';'-separated item */
        char tmp[1024];
        (void)snprintf(tmp, sizeof(tmp), "%s", missing);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
            while (*t == ' ')
                t++;
            (void)json_array_append_new(miss, json_string(t));
        }
    }
    (void)json_set(o, "missing", miss);
    api_json(req, ready ? 200 : 503, o);
}

void
wire_drain(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    (void)r;
    table_drain(a->table);
    json_t *o = json_object();
    (void)json_set(o, "draining", json_true());
    (void)json_set(o, "sandboxes", json_integer(table_count(a->table)));
    api_json(req, 200, o);
}

void
wire_metrics(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    (void)r;
    struct buf b;
    buf_init(&b, 1024 * 1024);
    const struct table_stats *st = table_stats(a->table);
    uint64_t running = 0;
    list_foreach (l, table_entries(a->table)) {
        struct entry *e = list_entry(l, struct entry, link);
        if (e->state == E_READY)
            running += sandbox_proc_count(e->sb, true);
    }
#define M(name, type, help, val)                                                                   \
    (void)buf_printf(                                                                              \
            &b, "# HELP abx_" name " " help "\n# TYPE abx_" name " " type "\nabx_" name " %llu\n", \
            (unsigned long long)(val))
    M("sandboxes", "gauge", "Live sandboxes.", table_count(a->table));
    M("sandboxes_created_total", "counter", "Sandboxes created.", st->created);
    M("sandboxes_failed_total", "counter", "Sandbox creations that failed.", st->failed);
    M("sandboxes_ended_total", "counter", "Sandboxes killed or ended.", st->ended);
    M("pool_ready", "gauge", "Warm sandboxes ready to hand out.", sandbox_host_pool_ready(a->sh));
    M("processes_running", "gauge", "Processes running in all sandboxes.", running);
    M("execs_total", "counter", "Exec requests started.", a->m.execs);
    M("exec_failures_total", "counter", "Exec requests that could not start.", a->m.exec_failures);
    M("requests_total", "counter", "HTTP requests.", a->m.requests);
    M("responses_4xx_total", "counter", "Requests refused as bad input.", a->m.errors_4xx);
    M("bytes_uploaded_total", "counter", "File bytes written through the API.",
      a->m.bytes_uploaded);
    M("store_damaged_reads_total", "counter",
      "Reads that found stored content damaged (and did not hand it out).", store_damaged_reads());
    M("draining", "gauge", "1 while draining.", table_draining(a->table) ? 1 : 0);
    M("ready", "gauge", "1 when the configured isolation is available.",
      table_missing(a->table)[0] ? 0 : 1);
#undef M
    (void)buf_printf(&b,
                     "# HELP abx_create_seconds_avg Mean time to create a sandbox.\n"
                     "# TYPE abx_create_seconds_avg gauge\nabx_create_seconds_avg %.6f\n",
                     st->create_count ? st->create_us_sum / 1e6 / st->create_count : 0.0);
    http_respond(req, 200, "text/plain; version=0.0.4", b.data, b.len);
    buf_done(&b);
}
