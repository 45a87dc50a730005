/**
 * The operations endpoints every Holdfast process serves: `GET /metrics` (Prometheus text from a
 * {@linkcode Registry}, with `holdfast_build_info{version,commit} 1` added), `GET /healthz` (the process runs) and `GET /readyz` (200 once `isReady()`
 * says so, else 503), and whatever more `routes` answers (the controller's `/dashboard`).
 *
 * @example
 * ```ts ignore
 * import { serveOps } from "./ops_http.ts";
 * const server = serveOps({ hostname: "127.0.0.1", port: 9470 }, () => true);
 * await server.shutdown();
 * ```
 *
 * @module
 */

import { log, type Logger } from "./log.ts";
import {
  CONTENT_TYPE,
  exportBuildInfo,
  type Registry,
  registry as processRegistry,
} from "./metrics.ts";
import { buildInfo } from "./version.ts";

/** Serves /metrics, /healthz and /readyz on `listen`; logs `listening` with the bound address. */
export function serveOps(
  listen: { hostname: string; port: number },
  isReady: () => boolean,
  options: {
    logger?: Logger;
    registry?: Registry;
    /** More routes (e.g. the dashboard): a response for its paths, null to fall through. */
    routes?: (req: Request) => Response | Promise<Response> | null;
  } = {},
): Deno.HttpServer {
  const logger = options.logger ?? log;
  const registry = options.registry ?? processRegistry;
  exportBuildInfo(buildInfo(), registry);
  return Deno.serve({
    ...listen,
    onListen: (addr) => logger.info("listening", { addr: `${addr.hostname}:${addr.port}` }),
  }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/metrics") {
      return new Response(registry.expose(), { headers: { "content-type": CONTENT_TYPE } });
    }
    if (path === "/healthz") return new Response("ok\n");
    if (path === "/readyz") {
      const ok = isReady();
      return new Response(ok ? "ready\n" : "not ready\n", { status: ok ? 200 : 503 });
    }
    return options.routes?.(req) ?? new Response("not found\n", { status: 404 });
  });
}
