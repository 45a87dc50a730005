/**
 * Watches over plain HTTP: transitions under selectors, timeouts, initial events, finalizers
 * and no-op writes, as a client of a real API server sees them.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { startKubeServer } from "../../lab/kube/mod.ts";
import { call, CM, readEvents, readWatch } from "./_http.ts";

Deno.test("api: a watch under a label selector sees objects enter (ADDED) and leave (DELETED)", async () => {
  await using server = await startKubeServer();
  const start = await call(server, "GET", CM);
  const res = await fetch(
    `${server.url}${CM}?watch=true&labelSelector=team%3Dblue&resourceVersion=${start.body.metadata.resourceVersion}`,
  );
  const events = readEvents(res, 3);
  await call(server, "POST", CM, { metadata: { name: "a", labels: { team: "red" } } });
  const merge = { "content-type": "application/merge-patch+json" };
  await call(server, "PATCH", `${CM}/a`, { metadata: { labels: { team: "blue" } } }, merge);
  await call(server, "PATCH", `${CM}/a`, { data: { k: "v" } }, merge);
  await call(server, "PATCH", `${CM}/a`, { metadata: { labels: { team: "red" } } }, merge);
  deepStrictEqual((await events).map((e) => e.type), ["ADDED", "MODIFIED", "DELETED"]);
});

Deno.test("api: watch timeoutSeconds ends the stream; sendInitialEvents ends with the marked bookmark", async () => {
  await using server = await startKubeServer();
  await call(server, "POST", CM, { metadata: { name: "a" } });
  const t0 = Date.now();
  const timed = await readWatch(
    await fetch(`${server.url}${CM}?watch=true&timeoutSeconds=1`),
    10,
    60_000,
  );
  deepStrictEqual(timed.events.map((e) => `${e.type} ${e.object.metadata.name}`), ["ADDED a"]);
  ok(timed.ended, "the server ended the stream");
  ok(Date.now() - t0 >= 900, `ended after ${Date.now() - t0} ms, before timeoutSeconds`);
  const res = await fetch(
    `${server.url}${CM}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
  );
  const initial = await readEvents(res, 2);
  deepStrictEqual(initial.map((e) => e.type), ["ADDED", "BOOKMARK"]);
  deepStrictEqual(initial[1]!.object.metadata.annotations, { "k8s.io/initial-events-end": "true" });
});

Deno.test("api: finalizers hold a delete until removed; then the watch sees DELETED", async () => {
  await using server = await startKubeServer();
  const made = await call(server, "POST", CM, {
    metadata: { name: "held", finalizers: ["holdfast.io/test"] },
  });
  const res = await fetch(
    `${server.url}${CM}?watch=true&resourceVersion=${made.body.metadata.resourceVersion}`,
  );
  const events = readEvents(res, 3);
  const del = await call(server, "DELETE", `${CM}/held`);
  deepStrictEqual(del.code, 200);
  ok(del.body.metadata.deletionTimestamp, "marked for deletion");
  deepStrictEqual(
    (await call(server, "GET", `${CM}/held`)).code,
    200,
    "still there while a finalizer is",
  );
  await call(server, "PATCH", `${CM}/held`, { metadata: { finalizers: null } }, {
    "content-type": "application/merge-patch+json",
  });
  deepStrictEqual((await call(server, "GET", `${CM}/held`)).code, 404);
  // As from a real server: the delete marks (MODIFIED), the finalizer removal is written
  // (MODIFIED), then the object goes (DELETED).
  deepStrictEqual((await events).map((e) => e.type), ["MODIFIED", "MODIFIED", "DELETED"]);
});

Deno.test("api: a no-op write keeps the resourceVersion and sends no event, as a real server", async () => {
  await using server = await startKubeServer();
  const made = await call(server, "POST", CM, {
    metadata: { name: "a", labels: { x: "1" } },
    data: { k: "v" },
  });
  const rv = made.body.metadata.resourceVersion;
  const res = await fetch(`${server.url}${CM}?watch=true&resourceVersion=${rv}`);
  // Two events: the first apply's MODIFIED, then a marker written last, so nothing sent by the
  // no-op writes in between can go unseen and the read needs no idle wait.
  const events = readEvents(res, 2);
  const put = await call(server, "PUT", `${CM}/a`, made.body);
  const merge = await call(server, "PATCH", `${CM}/a`, { data: { k: "v" } }, {
    "content-type": "application/merge-patch+json",
  });
  const applied = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "a" },
    data: { k: "v" },
  };
  const ssa = { "content-type": "application/apply-patch+yaml" };
  await call(server, "PATCH", `${CM}/a?fieldManager=m`, applied, ssa);
  const again = await call(server, "PATCH", `${CM}/a?fieldManager=m`, applied, ssa);
  deepStrictEqual([put.body.metadata.resourceVersion, merge.body.metadata.resourceVersion], [
    rv,
    rv,
  ]);
  const ssaRv = again.body.metadata.resourceVersion;
  deepStrictEqual(
    (await call(server, "PATCH", `${CM}/a?fieldManager=m`, applied, ssa)).body.metadata
      .resourceVersion,
    ssaRv,
  );
  await call(server, "POST", CM, { metadata: { name: "marker" } });
  deepStrictEqual(
    (await events).map((e) => `${e.type} ${e.object.metadata.name}`),
    ["MODIFIED a", "ADDED marker"],
    "only the first apply (new manager) changed anything",
  );
});
