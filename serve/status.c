/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * serve/status.c: /status, the server's health (no key needed): the data
 * source's status, the store's counts, uptime, connections and streams,
 * the loop probe's counts when it runs, and the event forwarder's when the
 * server forwards events.
 */
#include "serve-internal.h"

void lds_status_begin(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                      char *const *seg, const char *query)
{
    (void)seg;
    (void)query;
    ld_future *fs[3] = {ld_store_all(srv->store, ld_kind_features()),
                        ld_store_all(srv->store, ld_kind_segments()),
                        ld_store_initialized(srv->store)};
    lds_wait_for(srv, req, ld_future_all(srv->base, fs, 3), rt, 0);
}

static json_t *counts(const uint64_t *c)
{
    json_t *a = json_array();
    for (int i = 0; i < LDS_PROBE_BUCKETS; i++)
        json_array_append_new(a, json_integer((json_int_t)c[i]));
    return a;
}

/* "loop": the probe's counts (server.h, lds_server_probe()). */
static json_t *probe_json(const lds_server *srv, const struct lds_probe_stats *ps)
{
    json_t *bounds = json_array();
    for (int i = 0; i < LDS_PROBE_BUCKETS - 1; i++)
        json_array_append_new(bounds, json_integer(lds_probe_bounds_ms[i]));
    return json_pack("{s:i, s:I, s:o, s:o, s:o, s:f, s:f}", "periodMs", srv->o.loop_probe_ms,
                     "ticks", (json_int_t)ps->ticks, "boundsMs", bounds, "late", counts(ps->late),
                     "cpu", counts(ps->cpu), "lateMaxMs", (double)ps->late_max_ns / 1e6, "cpuMaxMs",
                     (double)ps->cpu_max_ns / 1e6);
}

void lds_status_finish(lds_server *srv, struct evhttp_request *req, const struct lds_route *rt,
                       ld_future *f, int answer_flags)
{
    (void)rt;
    (void)answer_flags;
    json_t *j = json_object();
    json_t *ds = json_object();
    ld_data_source_status st;
    bool have = srv->o.status && srv->o.status(&st, srv->o.status_arg) == 0;
    const char *state = have ? ld_data_source_state_name(st.state) : NULL;
    json_object_set_new(ds, "state", json_string(state ? state : "unknown"));
    if (have) {
        json_object_set_new(ds, "stateSince", json_integer(st.since_ms));
        if (st.error) {
            const char *kind = ld_data_source_error_kind_name(st.error->kind);
            json_object_set_new(ds, "lastError",
                                json_pack("{s:s,s:i,s:s,s:I}", "kind", kind ? kind : "unknown",
                                          "statusCode", st.error->status_code, "message",
                                          st.error->message ? st.error->message : "", "time",
                                          (json_int_t)st.error->time_ms));
        }
    }
    bool ok = ld_future_is_fulfilled(f);
    json_t *flags = ok ? ld_future_json(ld_future_all_get(f, 0)) : NULL;
    json_t *segs = ok ? ld_future_json(ld_future_all_get(f, 1)) : NULL;
    bool inited = ok && ld_future_bool(ld_future_all_get(f, 2));
    json_object_set_new(j, "status",
                        json_string(!ok       ? "unhealthy"
                                    : !inited ? "initializing"
                                    : (have && st.state != LD_DATA_SOURCE_STATE_VALID)
                                        ? "degraded"
                                        : "healthy"));
    json_object_set_new(j, "dataSource", ds);
    json_object_set_new(j, "store",
                        json_pack("{s:s,s:b}", "description", ld_store_describe(srv->store),
                                  "initialized", inited));
    if (!ok)
        json_object_set_new(j, "storeError", json_string(ld_future_error_message(f)));
    ld_store_status ps_st;
    if (srv->o.persistent && ld_store_current_status(srv->o.persistent, &ps_st) == 0) {
        json_object_set_new(j, "persistentStore",
                            json_pack("{s:s,s:b,s:b}", "description",
                                      ld_store_describe(srv->o.persistent), "available",
                                      ps_st.available, "needsRefresh", ps_st.needs_refresh));
        if (!ps_st.available && ok && inited)
            json_object_set_new(j, "status", json_string("degraded"));
    }
    json_object_set_new(j, "flags", json_integer((json_int_t)json_object_size(flags)));
    json_object_set_new(j, "segments", json_integer((json_int_t)json_object_size(segs)));
    json_object_set_new(j, "uptimeMs",
                        json_integer((json_int_t)((lds_mono_s() - srv->started) * 1000)));
    json_object_set_new(j, "connections", json_integer((json_int_t)srv->st.connections));
    json_object_set_new(j, "streams", json_integer((json_int_t)srv->st.streams));
    json_object_set_new(j, "requests", json_integer((json_int_t)srv->st.requests));
    json_object_set_new(j, "version", json_string(ld_version_string()));
    const struct lds_probe_stats *ps = lds_server_probe(srv);
    if (ps)
        json_object_set_new(j, "loop", probe_json(srv, ps));
    ld_event_forwarder_stats es;
    if (srv->o.events && ld_event_forwarder_stats_get(srv->o.events, &es) == 0)
        json_object_set_new(j, "events",
                            json_pack("{s:I,s:I,s:I,s:I,s:I}", "forwarded",
                                      (json_int_t)es.forwarded, "dropped", (json_int_t)es.dropped,
                                      "refused", (json_int_t)es.refused, "queued",
                                      (json_int_t)es.queued, "queuedBytes", (json_int_t)es.bytes));
    struct lds_blob *b = lds_blob_json(j);
    json_decref(j);
    if (!b) {
        lds_send_error(srv, req, 500, "out of memory", 0);
        return;
    }
    lds_send_blob(srv, req, 200, b, NULL, 0);
    lds_blob_unref(b);
}
