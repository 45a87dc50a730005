/**
 * The demo's dashboard server, run inside the virtual cluster's `ctl` namespace (where it reaches
 * Redis and the LB agents' `/metrics`): the controller's dashboard (`controller/status/`) over
 * that Redis and those agents, on this namespace's loopback, and a relay to it listening on
 * `127.0.0.1:PORT` of the namespace NETNS (the demo's own: `/proc/PID/ns/net`) — its socket made
 * there with `inNetns` (a synchronous listen), so the person's browser reaches the page while
 * nothing of the lab is routed into their namespace.
 *
 *     _demo_dashboard_server.ts NETNS PORT REDIS_URL AGENT,AGENT,... [SERVICES_FILE]
 *
 * The demo's agents follow a services file, not a model in Redis: with SERVICES_FILE the page's
 * services and backends come from that file (as the agents read it) while Redis has no model.
 *
 * Prints `{"msg":"listening"}` once it serves, then the dashboard's log lines (`status event`).
 *
 * @module
 */
import { dashboardHandler, StatusFeed } from "../controller/status/dashboard.ts";
import { metricsUrl, readStatus } from "../controller/status/collect.ts";
import { RedisStatusStore } from "../controller/status/redis_status_store.ts";
import type { StatusStore, StoredState } from "../controller/status/model.ts";
import { inNetns } from "../node/bpf/netns.ts";

const [netns = "", portText = "", redis = "", agentsText = "", servicesFile = ""] = Deno.args;
const port = Number(portText);
if (!netns.includes("/") || !(port > 0) || !redis) {
  console.error(`usage: _demo_dashboard_server.ts NETNS PORT REDIS_URL AGENTS, got ${Deno.args}`);
  Deno.exit(2);
}
const MAX_CONNECTIONS = 100_000;

const redisStore = new RedisStatusStore({ url: redis });
/** Redis's state, with the services file's services as the model when Redis holds none. */
const store: StatusStore = {
  async read(): Promise<StoredState> {
    const stored = await redisStore.read();
    if (!servicesFile || stored.model.entries.size > 0) return stored;
    const file = JSON.parse(await Deno.readTextFile(servicesFile)) as {
      services: Array<{ name: string; frontends: unknown[]; backends: object[] }>;
    };
    const entries = new Map(file.services.map((s) => [
      s.name,
      JSON.stringify({
        service: { name: s.name, frontends: s.frontends },
        backends: s.backends.map((b) => ({ ...b, state: "active" })),
      }),
    ]));
    return { ...stored, model: { ...stored.model, entries } };
  },
  close: () => redisStore.close(),
};
const agents = agentsText.split(",").filter((a) => a !== "").map(metricsUrl);
const feed = new StatusFeed(() => readStatus(store, agents));
const handle = dashboardHandler(feed);
feed.start();
const inner = Promise.withResolvers<number>();
Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: (addr) => inner.resolve((addr as Deno.NetAddr).port),
}, (req) => {
  const path = new URL(req.url).pathname;
  if (path === "/") return Response.redirect(new URL("/dashboard", req.url), 302);
  return handle(req) ?? new Response("not found\n", { status: 404 });
});
const innerPort = await inner.promise;

// The previous story's server may hold the port a moment longer (it dies with its cluster).
let listener: Deno.TcpListener | null = null;
for (let k = 0; k < 100 && listener === null; k++) {
  try {
    listener = inNetns(netns, () => Deno.listen({ hostname: "127.0.0.1", port }));
  } catch (err) {
    if (!(err instanceof Deno.errors.AddrInUse)) throw err;
    await new Promise((r) => setTimeout(r, 100));
  }
}
if (listener === null) throw new Error(`127.0.0.1:${port} stayed in use for 10 s`);
console.log(JSON.stringify({ msg: "listening", port, inner: innerPort }));

async function pipe(from: Deno.Conn, to: Deno.Conn): Promise<void> {
  try {
    await from.readable.pipeTo(to.writable);
  } catch { /* either side closed */ }
}

for (let i = 0; i < MAX_CONNECTIONS; i++) {
  const outer = await listener.accept();
  Deno.connect({ hostname: "127.0.0.1", port: innerPort }).then(async (conn) => {
    await Promise.all([pipe(outer, conn), pipe(conn, outer)]);
    for (const c of [outer, conn]) {
      try {
        c.close();
      } catch { /* closed */ }
    }
  }, () => outer.close());
}
